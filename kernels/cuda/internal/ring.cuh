// The ring collectives as CUDA kernels: the ring loop (kernels/ring_loop.h,
// the host executor's too) over the primitives (primitives.cuh), plus the
// reduction and copy kernels. Included by one .cu
// file per datatype family, which instantiates the typed launchers.
//
// Launch shape. RingKernel: one block of kRingThreads threads per channel
// (gridDim.x = nchannels, block c runs channel c), no dynamic shared memory,
// parameters by value in __grid_constant__ memory; block c copies its
// DeviceChannel from the device-memory table into shared memory first. Every
// rank's kernel must be resident at the same time as its peers' (they spin on
// each other): the communicator checks at init that the ranks sharing a GPU,
// times their channels, fit what the GPU holds at once (LoadRingTyped's
// occupancy times the multiprocessors), and loads every kernel before the
// first launch.
// ReduceKernel / CopyKernel: a grid-stride loop over the whole buffer,
// kReduceThreads threads per block, as many blocks as fit at once.
//
// Memory ordering. A block orders its threads with __syncthreads(); only
// thread 0 touches the FIFO counters (device_fifo.cuh). Data produced by a
// peer is read after thread 0's system-scope acquire and a barrier; data this
// block produced for a peer is published by thread 0's system-scope release
// store after a barrier (the barrier puts the other threads' writes before
// the release in causality order, and a release is cumulative in the PTX
// memory model, so no separate fence is needed). LL lines are self-validating
// (flags). The user buffers are plain device memory of this rank, ordered by
// the stream.
#ifndef RINGO_KERNELS_CUDA_INTERNAL_RING_CUH_
#define RINGO_KERNELS_CUDA_INTERNAL_RING_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/internal/kernel_params.h"
#include "kernels/cuda/internal/primitives.cuh"
#include "kernels/cuda/internal/reduce_copy.h"
#include "kernels/reduce_op.h"
#include "kernels/ring_loop.h"
#include "kernels/schedule.h"

namespace ringo::kernels::gpu::internal {

inline constexpr int kReduceThreads = 512;

// Copies the channel table entry into shared memory (8-byte words, one per
// thread), then a barrier.
__device__ __forceinline__ const DeviceChannel& LoadChannel(const DeviceChannel* table, int channel,
                                                            uint64_t* shared_words) {
  static_assert(
      sizeof(DeviceChannel) % sizeof(uint64_t) == 0 && alignof(DeviceChannel) == alignof(uint64_t),
      "DeviceChannel is copied as 8-byte words");
  constexpr int kWords = static_cast<int>(sizeof(DeviceChannel) / sizeof(uint64_t));
  static_assert(kWords <= kRingThreads, "one word per thread");
  const uint64_t* src = reinterpret_cast<const uint64_t*>(table + channel);
  if (threadIdx.x < kWords) shared_words[threadIdx.x] = src[threadIdx.x];
  __syncthreads();
  return *reinterpret_cast<const DeviceChannel*>(shared_words);
}

template <typename T, base::RedOp kOp, typename Proto>
__global__ void __launch_bounds__(kRingThreads, 1) RingKernel(const __grid_constant__ RingKernelParams p) {
  __shared__ BlockState state;
  __shared__ uint64_t channel_words[sizeof(DeviceChannel) / sizeof(uint64_t)];
  const int channel = blockIdx.x;
  const DeviceChannel& ch = LoadChannel(p.channels, channel, channel_words);
  Primitives<T, kOp, Proto> prims(p, ch, &state, channel);
  RunRingChannel<T>(p.ring, channel, prims);
  prims.Finish();
  if (threadIdx.x == 0) {  // after Finish's last post, in thread 0's order
    MarkLaunchEnded(ch.send, p.guard.launch);
    MarkLaunchEnded(ch.recv, p.guard.launch);
  }
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

// Loads `kernel` now (cudaFuncGetAttributes does) and lowers *blocks_per_sm
// (when given) to its occupancy at `threads` threads a block.
template <typename Kernel>
int LoadKernel(Kernel kernel, int threads, int* blocks_per_sm) {
  cudaFuncAttributes attr;
  cudaError_t err = cudaFuncGetAttributes(&attr, kernel);
  if (err != cudaSuccess || blocks_per_sm == nullptr) return static_cast<int>(err);
  int n = 0;
  err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, 0);
  if (err == cudaSuccess && n < *blocks_per_sm) *blocks_per_sm = n;
  return static_cast<int>(err);
}

template <typename T, base::RedOp kOp>
int LaunchRingTyped(const RingKernelParams& params, Proto proto, void* stream) {
  if constexpr (!KernelBuilt<T, kOp>()) {
    return kNotBuilt;
  } else {
    void* args[] = {const_cast<RingKernelParams*>(&params)};
    const dim3 grid(static_cast<unsigned>(params.ring.nchannels));
    const dim3 block(kRingThreads);
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (proto == Proto::kLL) {
      return static_cast<int>(
          cudaLaunchKernel(RingKernel<T, kOp, ProtoLL>, grid, block, args, 0, s));
    }
    return static_cast<int>(
        cudaLaunchKernel(RingKernel<T, kOp, ProtoSimple>, grid, block, args, 0, s));
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
    const T* ta = static_cast<const T*>(a);
    const T* tb = static_cast<const T*>(b);
    T* td = static_cast<T*>(dst);
    void* args[] = {&ta, &tb, &td, &count};
    return static_cast<int>(cudaLaunchKernel(ReduceKernel<T, kOp>, dim3(blocks),
                                             dim3(kReduceThreads), args, 0,
                                             static_cast<cudaStream_t>(stream)));
  }
}

// dst = Post(Pre(src)): a one-rank premul-sum.
template <typename T, base::RedOp kOp>
__global__ void __launch_bounds__(kReduceThreads)
    PreKernel(const T* src, T* dst, int64_t n, uint64_t scalar, const void* scalar_ptr) {
  CollArgs call;
  call.scalar = scalar;
  call.scalar_ptr = scalar_ptr;
  const auto f = ReduceFunc<T, kOp>::Make(OpParams(1, ScalarBits<T>(call)));
  ReduceCopy<T, kOp, Mode::kPreSend>(f, static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x,
                                     static_cast<int64_t>(gridDim.x) * blockDim.x, src, nullptr, dst, nullptr, n);
}

template <typename T, base::RedOp kOp>
int LaunchPreTyped(const void* src, void* dst, int64_t count, uint64_t scalar, const void* scalar_ptr,
                   void* stream) {
  if constexpr (!KernelBuilt<T, kOp>()) {
    return kNotBuilt;
  } else {
    if (count == 0) return 0;
    int blocks = 0;
    const int err = GridFor(PreKernel<T, kOp>, count, sizeof(T), &blocks);
    if (err != 0) return err;
    const T* s = static_cast<const T*>(src);
    T* d = static_cast<T*>(dst);
    void* args[] = {&s, &d, &count, &scalar, &scalar_ptr};
    return static_cast<int>(cudaLaunchKernel(PreKernel<T, kOp>, dim3(blocks), dim3(kReduceThreads), args, 0,
                                             static_cast<cudaStream_t>(stream)));
  }
}

template <typename T, base::RedOp kOp>
int LoadRingTyped(int* blocks_per_sm) {
  if constexpr (!KernelBuilt<T, kOp>()) {
    return kNotBuilt;
  } else {
    int err = LoadKernel(RingKernel<T, kOp, ProtoLL>, kRingThreads, blocks_per_sm);
    if (err == 0) err = LoadKernel(RingKernel<T, kOp, ProtoSimple>, kRingThreads, blocks_per_sm);
    if (err == 0) err = LoadKernel(ReduceKernel<T, kOp>, kReduceThreads, nullptr);
    if (err == 0) err = LoadKernel(PreKernel<T, kOp>, kReduceThreads, nullptr);
    return err;
  }
}

}  // namespace ringo::kernels::gpu::internal

// Explicit instantiations of the typed launchers for one datatype, every op;
// used at namespace scope in the family's .cu file.
#define RINGO_CUDA_INSTANTIATE_OP(T, OP)                                                          \
  template int ringo::kernels::gpu::internal::LaunchRingTyped<T, ringo::base::RedOp::OP>(         \
      const ringo::kernels::gpu::internal::RingKernelParams&, ringo::kernels::gpu::Proto, void*); \
  template int ringo::kernels::gpu::internal::LaunchReduceTyped<T, ringo::base::RedOp::OP>(       \
      const void*, const void*, void*, int64_t, void*);                                           \
  template int ringo::kernels::gpu::internal::LoadRingTyped<T, ringo::base::RedOp::OP>(int*);       \
  template int ringo::kernels::gpu::internal::LaunchPreTyped<T, ringo::base::RedOp::OP>(            \
      const void*, void*, int64_t, uint64_t, const void*, void*);

#define RINGO_CUDA_INSTANTIATE(T)      \
  RINGO_CUDA_INSTANTIATE_OP(T, kSum)   \
  RINGO_CUDA_INSTANTIATE_OP(T, kProd)  \
  RINGO_CUDA_INSTANTIATE_OP(T, kMax)   \
  RINGO_CUDA_INSTANTIATE_OP(T, kMin)   \
  RINGO_CUDA_INSTANTIATE_OP(T, kAvg)    \
  RINGO_CUDA_INSTANTIATE_OP(T, kPreMulSum)

#endif  // RINGO_KERNELS_CUDA_INTERNAL_RING_CUH_
