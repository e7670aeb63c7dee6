// Between launch.cc (the host dispatch, compiled without nvcc) and the .cu
// files (one per datatype family): what a ring kernel receives by value, and
// the typed launchers each .cu file instantiates. No CUDA headers.
#ifndef RINGO_KERNELS_CUDA_INTERNAL_KERNEL_PARAMS_H_
#define RINGO_KERNELS_CUDA_INTERNAL_KERNEL_PARAMS_H_

#include <cstdint>
#include <type_traits>

#include "base/device/dtype.h"
#include "kernels/cuda/device_types.h"
#include "kernels/cuda/p2p_types.h"
#include "kernels/ring_loop.h"
#include "kernels/schedule.h"

namespace ringo::kernels {
struct WireSource;  // kernels/wire.h (ring_wire.cu includes it)
}  // namespace ringo::kernels

namespace ringo::kernels::gpu::internal {

// The ring kernel's only parameter (__grid_constant__, about 400 bytes, so a
// launch carries little): the ring collective as the loop runs it (counts in
// elements of the kernel's T: bytes for AllGather and Broadcast, LoopArgs),
// the channel table (device memory; block c copies channels[c] into shared
// memory once), and the guard.
struct RingKernelParams {
  RingArgs ring;
  const DeviceChannel* channels;
  KernelGuard guard;
};

// What a typed launcher returns instead of a cudaError_t when this build left
// the (T, op) instantiation out (--define=ringo_cuda_kernels=dev).
inline constexpr int kNotBuilt = -1;

// The development build (--define=ringo_cuda_kernels=dev, which defines
// RINGO_CUDA_DEV_KERNELS) compiles float, bfloat16 and bytes with sum only,
// so nvcc takes seconds; everything else reports kNotBuilt. The one list.
template <typename T, base::RedOp kOp>
constexpr bool KernelBuilt() {
#if defined(RINGO_CUDA_DEV_KERNELS) && RINGO_CUDA_DEV_KERNELS
  return kOp == base::RedOp::kSum &&
         (std::is_same<T, float>::value || std::is_same<T, base::BFloat16>::value ||
          std::is_same<T, uint8_t>::value);
#else
  return true;
#endif
}

// Each returns a cudaError_t value (0 on success) or kNotBuilt. Instantiated
// for every (T, op) in the datatype family's .cu file. Launches return the
// launch call's own result (cudaLaunchKernel), never cudaGetLastError(),
// which may hold an error another call left.
template <typename T, base::RedOp kOp>
int LaunchRingTyped(const RingKernelParams& params, Proto proto, void* stream);

template <typename T, base::RedOp kOp>
int LaunchReduceTyped(const void* a, const void* b, void* dst, int64_t count, void* stream);

// Loads the (T, op) ring kernels (both protocols) and its reduction kernel
// on the current device now, rather than at their first launch (CUDA's lazy
// loading may synchronise the context then, which would wait for ring
// kernels that wait for this one), and lowers *blocks_per_sm to the fewest
// ring blocks of kRingThreads one multiprocessor holds at once.
template <typename T, base::RedOp kOp>
int LoadRingTyped(int* blocks_per_sm);

// dst = Post(Pre(src)) for `count` elements: a one-rank premul-sum (every
// other one-rank collective is a copy). `scalar_ptr` as CollArgs'.
template <typename T, base::RedOp kOp>
int LaunchPreTyped(const void* src, void* dst, int64_t count, uint64_t scalar, const void* scalar_ptr,
                   void* stream);

// The point-to-point kernel (ring_p2p.cu), and its loading.
int LaunchP2pTyped(const P2pKernelArgs& args, const KernelGuard& guard, void* stream);
int LoadP2pKernel();

// Byte copy through the same loop (ring_int8.cu), and its loading.
int LaunchCopyBytes(const void* src, void* dst, int64_t bytes, void* stream);
int LoadCopyKernel();

// The compressed wire's kernels (ring_wire.cu), and their loading. `wire`
// a kernels::Wire, `dtype` a base::DataType (fp32, bf16 or fp16).
int LaunchWireEncodeKernel(int wire, int dtype, const void* src, int64_t n, float scale, void* out, void* stream);
int LaunchWireSumKernel(const kernels::WireSource* sources, int nsources, int wire, int64_t n, float* acc, void* stream);
int LaunchWireDecodeKernel(int wire, const void* in, int64_t n, int dtype, void* dst, void* stream);
int LoadWireKernels();

}  // namespace ringo::kernels::gpu::internal

#endif  // RINGO_KERNELS_CUDA_INTERNAL_KERNEL_PARAMS_H_
