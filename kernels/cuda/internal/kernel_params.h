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
#include "kernels/schedule.h"

namespace ringo::kernels::gpu::internal {

// The ring kernel's only parameter (__grid_constant__, about 400 bytes, so a
// launch carries little). Block c copies channels[c] from device memory into
// shared memory once. Counts are in elements of the kernel's T: bytes for
// AllGather and Broadcast, which move bytes whatever the datatype, as the host
// executor does.
struct RingKernelParams {
  const DeviceChannel* channels;  // device memory, nchannels entries
  int order[kMaxInlineRanks];
  const int* device_order;  // used when nranks > kMaxInlineRanks
  const void* send;
  void* recv;
  int64_t count;
  int64_t slice_bytes;
  Coll coll;
  int nranks;
  int pos;
  int rank;
  int root_pos;
  int nchannels;
  const volatile int* abort;  // host-mapped; may be null
  ErrorRecord* error;         // host-mapped; may be null
  uint64_t timeout_ns;        // 0: no deadline
  uint64_t scalar;            // premul-sum: the scalar's bits (DeviceCollArgs::scalar)
  const void* scalar_ptr;     // premul-sum: device memory holding it instead; null: `scalar`
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
// other one-rank collective is a copy). `scalar_ptr` as RingKernelParams'.
template <typename T, base::RedOp kOp>
int LaunchPreTyped(const void* src, void* dst, int64_t count, uint64_t scalar, const void* scalar_ptr,
                   void* stream);

// The point-to-point kernel (ring_p2p.cu), and its loading.
int LaunchP2pTyped(const P2pKernelArgs& args, const int* abort, ErrorRecord* error, uint64_t timeout_ns,
                   void* stream);
int LoadP2pKernel();

// Byte copy through the same loop (ring_int8.cu), and its loading.
int LaunchCopyBytes(const void* src, void* dst, int64_t bytes, void* stream);
int LoadCopyKernel();

}  // namespace ringo::kernels::gpu::internal

#endif  // RINGO_KERNELS_CUDA_INTERNAL_KERNEL_PARAMS_H_
