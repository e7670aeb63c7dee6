// The verification kernels of verify_cuda.h. Launch shape: kThreads threads a
// block, at most kMaxBlocks blocks, grid-stride loops over the elements. The
// count kernel sums per warp with shuffles, per block in shared memory, and
// adds each block's nonzero sum to the counter with one device-scope atomic;
// the counter is read only after the stream has passed the kernel, so no
// other ordering is needed.
#include <cuda_runtime.h>

#include "tools/perf/pattern_math.h"
#include "tools/perf/verify_cuda.h"

namespace ringo::perf::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
// Enough blocks to fill an H100 (132 SMs) several times over; larger
// buffers are covered by the grid-stride loop.
constexpr uint64_t kMaxBlocks = 2048;

int BlocksFor(uint64_t count) {
  const uint64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    FillInputKernel(PatternSpec spec, uint64_t first, uint64_t count, T* dst) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    dst[i] = FromDouble<T>(InputValue(spec, first + i));
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    CountWrongKernel(PatternSpec spec, uint64_t first, uint64_t count, const T* got,
                     unsigned long long* wrong) {
  __shared__ unsigned long long warp_sums[kWarps];
  unsigned long long mine = 0;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    mine += IsWrongElement<T>(spec, first + i, got[i]) ? 1 : 0;
  }
  for (int offset = 16; offset > 0; offset >>= 1)
    mine += __shfl_down_sync(0xffffffffu, mine, offset);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = mine;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long block_sum = 0;
    for (int w = 0; w < kWarps; ++w) block_sum += warp_sums[w];
    if (block_sum != 0) atomicAdd(wrong, block_sum);
  }
}

}  // namespace

int LaunchFillInput(const PatternSpec& spec, uint64_t first, uint64_t count, void* dst,
                    void* stream) {
  if (count == 0) return 0;
  cudaError_t err = cudaSuccess;
  WithDataType(spec.type, [&](auto zero) {
    using T = decltype(zero);
    PatternSpec s = spec;
    T* d = static_cast<T*>(dst);
    void* args[] = {&s, &first, &count, &d};
    err = cudaLaunchKernel(FillInputKernel<T>, dim3(BlocksFor(count)), dim3(kThreads), args, 0,
                           static_cast<cudaStream_t>(stream));
  });
  return static_cast<int>(err);
}

int LaunchCountWrong(const PatternSpec& spec, uint64_t first, uint64_t count, const void* got,
                     unsigned long long* wrong, void* stream) {
  if (count == 0) return 0;
  cudaError_t err = cudaSuccess;
  WithDataType(spec.type, [&](auto zero) {
    using T = decltype(zero);
    PatternSpec s = spec;
    const T* g = static_cast<const T*>(got);
    void* args[] = {&s, &first, &count, &g, &wrong};
    err = cudaLaunchKernel(CountWrongKernel<T>, dim3(BlocksFor(count)), dim3(kThreads), args, 0,
                           static_cast<cudaStream_t>(stream));
  });
  return static_cast<int>(err);
}

int LoadVerifyKernels() {
  cudaError_t err = cudaSuccess;
  for (int t = 0; t < kPerfDataTypes && err == cudaSuccess; ++t) {
    WithDataType(static_cast<base::DataType>(t), [&](auto zero) {
      using T = decltype(zero);
      cudaFuncAttributes attr;
      err = cudaFuncGetAttributes(&attr, FillInputKernel<T>);
      if (err == cudaSuccess) err = cudaFuncGetAttributes(&attr, CountWrongKernel<T>);
    });
  }
  return static_cast<int>(err);
}

}  // namespace ringo::perf::gpu
