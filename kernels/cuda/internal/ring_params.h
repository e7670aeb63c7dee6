// How launch.cc turns DeviceCollArgs into the ring kernel's parameters, and
// which instantiation runs them; shared with the host test of the ring loop.
#ifndef RINGO_KERNELS_CUDA_INTERNAL_RING_PARAMS_H_
#define RINGO_KERNELS_CUDA_INTERNAL_RING_PARAMS_H_

#include <cstdint>

#include "base/device/dtype.h"
#include "base/status.h"
#include "kernels/cuda/device_types.h"
#include "kernels/cuda/internal/kernel_params.h"

namespace ringo::kernels::gpu::internal {

// Fills *p (zeroed first) for `args` over `channels`. AllGather and Broadcast
// move bytes whatever the datatype, as the host executor does: their count
// becomes bytes and *kernel_dtype / *kernel_op become uint8 / sum. Checks only
// what it needs (root position); LaunchRingKernel checks the rest first.
base::Status BuildRingParams(const DeviceCollArgs& args, const DeviceChannel* channels, int nchannels,
                             ErrorRecord* mapped_error, const int* mapped_abort, uint64_t timeout_ns,
                             RingKernelParams* p, base::DataType* kernel_dtype, base::RedOp* kernel_op);

}  // namespace ringo::kernels::gpu::internal

#endif  // RINGO_KERNELS_CUDA_INTERNAL_RING_PARAMS_H_
