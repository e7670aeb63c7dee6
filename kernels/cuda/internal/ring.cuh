// The ring collectives as CUDA kernels: the ring loop written once over the
// primitives (primitives.cuh), walking schedule.h exactly as the host
// executor does, plus the reduction and copy kernels. Included by one .cu
// file per datatype family, which instantiates the typed launchers.
//
// Launch shape. RingKernel: one block of kRingThreads threads per channel
// (gridDim.x = nchannels, block c runs channel c), no dynamic shared memory,
// parameters by value in __grid_constant__ memory. Every rank's kernel must be
// resident at the same time as its peers' (they spin on each other).
// ReduceKernel / CopyKernel: a grid-stride loop over the whole buffer,
// kReduceThreads threads per block, as many blocks as fit at once.
//
// Memory ordering. A block orders its threads with __syncthreads(); only
// thread 0 touches the FIFO counters (device_fifo.cuh). Data produced by a
// peer is read after thread 0's system-scope acquire and a barrier; data this
// block produced for a peer is published by thread 0's system fence and
// release store after a barrier. LL lines are self-validating (flags). The
// user buffers are plain device memory of this rank, ordered by the stream.
#ifndef RINGO_KERNELS_CUDA_INTERNAL_RING_CUH_
#define RINGO_KERNELS_CUDA_INTERNAL_RING_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/internal/kernel_params.h"
#include "kernels/cuda/internal/primitives.cuh"
#include "kernels/cuda/internal/reduce_copy.h"
#include "kernels/cuda/internal/ring_loop.h"
#include "kernels/reduce_op.h"
#include "kernels/schedule.h"

namespace ringo::kernels::gpu::internal {

inline constexpr int kReduceThreads = 512;

template <typename T, base::RedOp kOp, typename Proto>
__global__ void __launch_bounds__(kRingThreads, 1) RingKernel(const __grid_constant__ RingKernelParams p) {
  __shared__ BlockState state;
  const int channel = blockIdx.x;
  Primitives<T, kOp, Proto> prims(p, p.channels[channel], &state, channel);
  RunRing<T>(p, channel, prims);
  prims.Finish();
}

// dst = a (+) b as a partial result: the recvReduceSend arithmetic.
template <typename T, base::RedOp kOp>
__global__ void __launch_bounds__(kReduceThreads) ReduceKernel(const T* a, const T* b, T* dst, int64_t n) {
  const auto f = ReduceFunc<T, kOp>::Make(1);
  ReduceCopy<T, kOp, Mode::kReduce>(f, static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x,
                                    static_cast<int64_t>(gridDim.x) * blockDim.x, a, b, dst, nullptr, n);
}

// Blocks for a grid-stride kernel over `n` elements: what fits on the device at once, at most one vector per thread.
template <typename Kernel>
int GridFor(Kernel kernel, int64_t n, int elem_bytes, int* blocks) {
  int device = 0;
  int sms = 0;
  int per_sm = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err == cudaSuccess) err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kReduceThreads, 0);
  if (err != cudaSuccess) return static_cast<int>(err);
  const int64_t vectors = (n * elem_bytes + 15) / 16;
  const int64_t needed = (vectors + kReduceThreads - 1) / kReduceThreads;
  const int64_t most = static_cast<int64_t>(sms) * (per_sm > 0 ? per_sm : 1);
  *blocks = static_cast<int>(needed < most ? (needed > 0 ? needed : 1) : most);
  return 0;
}

template <typename T, base::RedOp kOp>
int LaunchRingTyped(const RingKernelParams& params, Proto proto, void* stream) {
  if constexpr (!KernelBuilt<T, kOp>()) {
    return kNotBuilt;
  } else {
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (proto == Proto::kLL) {
      RingKernel<T, kOp, ProtoLL><<<params.nchannels, kRingThreads, 0, s>>>(params);
    } else {
      RingKernel<T, kOp, ProtoSimple><<<params.nchannels, kRingThreads, 0, s>>>(params);
    }
    return static_cast<int>(cudaGetLastError());
  }
}

template <typename T, base::RedOp kOp>
int LaunchReduceTyped(const void* a, const void* b, void* dst, int64_t count, void* stream) {
  if constexpr (!KernelBuilt<T, kOp>()) {
    return kNotBuilt;
  } else {
    if (count == 0) return 0;
    int blocks = 0;
    const int err = GridFor(ReduceKernel<T, kOp>, count, sizeof(T), &blocks);
    if (err != 0) return err;
    ReduceKernel<T, kOp><<<blocks, kReduceThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(dst), count);
    return static_cast<int>(cudaGetLastError());
  }
}

}  // namespace ringo::kernels::gpu::internal

// Explicit instantiations of the typed launchers for one datatype, every op;
// used at namespace scope in the family's .cu file.
#define RINGO_CUDA_INSTANTIATE_OP(T, OP)                                                                          \
  template int ringo::kernels::gpu::internal::LaunchRingTyped<T, ringo::base::RedOp::OP>(                         \
      const ringo::kernels::gpu::internal::RingKernelParams&, ringo::kernels::gpu::Proto, void*);                \
  template int ringo::kernels::gpu::internal::LaunchReduceTyped<T, ringo::base::RedOp::OP>(                       \
      const void*, const void*, void*, int64_t, void*);

#define RINGO_CUDA_INSTANTIATE(T)      \
  RINGO_CUDA_INSTANTIATE_OP(T, kSum)   \
  RINGO_CUDA_INSTANTIATE_OP(T, kProd)  \
  RINGO_CUDA_INSTANTIATE_OP(T, kMax)   \
  RINGO_CUDA_INSTANTIATE_OP(T, kMin)   \
  RINGO_CUDA_INSTANTIATE_OP(T, kAvg)

#endif  // RINGO_KERNELS_CUDA_INTERNAL_RING_CUH_
