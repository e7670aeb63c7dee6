// How launch.cc turns DeviceCollArgs into the ring kernel's parameters;
// shared with the host test of the kernels' primitives.
#ifndef RINGO_KERNELS_CUDA_INTERNAL_RING_PARAMS_H_
#define RINGO_KERNELS_CUDA_INTERNAL_RING_PARAMS_H_

#include <cstdint>

#include "base/device/dtype.h"
#include "kernels/cuda/device_types.h"
#include "kernels/cuda/internal/kernel_params.h"

namespace ringo::kernels::gpu::internal {

// The kernel's parameters for `args` over `channels` (device memory):
// LoopArgs of its ring collective (AllGather and Broadcast move bytes, as the
// host executor's do; the (dtype, op) of p.ring.call picks the kernel).
// LaunchRingKernel checks the arguments first.
RingKernelParams BuildRingParams(const DeviceCollArgs& args, const DeviceChannel* channels,
                                 const KernelGuard& guard);

}  // namespace ringo::kernels::gpu::internal

#endif  // RINGO_KERNELS_CUDA_INTERNAL_RING_PARAMS_H_
