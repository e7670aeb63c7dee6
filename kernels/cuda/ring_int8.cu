// Ring, reduction and copy kernels for int8 and uint8 (uint8 also carries
// AllGather and Broadcast as bytes): the typed launchers launch.cc dispatches
// to. One .cu file per datatype family so nvcc builds them in parallel;
// launch shape and memory ordering: internal/ring.cuh.
#include "kernels/cuda/internal/ring.cuh"

RINGO_CUDA_INSTANTIATE(int8_t)
RINGO_CUDA_INSTANTIATE(uint8_t)

namespace ringo::kernels::gpu::internal {
namespace {

__global__ void __launch_bounds__(kReduceThreads) CopyKernel(const uint8_t* src, uint8_t* dst, int64_t n) {
  const auto f = ReduceFunc<uint8_t, base::RedOp::kSum>::Make(1);
  ReduceCopy<uint8_t, base::RedOp::kSum, Mode::kCopy>(f, static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x,
                                                      static_cast<int64_t>(gridDim.x) * blockDim.x, src, nullptr, dst,
                                                      nullptr, n);
}

}  // namespace

int LaunchCopyBytes(const void* src, void* dst, int64_t bytes, void* stream) {
  if (bytes == 0) return 0;
  int blocks = 0;
  const int err = GridFor(CopyKernel, bytes, 1, &blocks);
  if (err != 0) return err;
  const uint8_t* s = static_cast<const uint8_t*>(src);
  uint8_t* d = static_cast<uint8_t*>(dst);
  void* args[] = {&s, &d, &bytes};
  return static_cast<int>(cudaLaunchKernel(CopyKernel, dim3(blocks), dim3(kReduceThreads), args, 0,
                                           static_cast<cudaStream_t>(stream)));
}

int LoadCopyKernel() { return LoadKernel(CopyKernel, kReduceThreads, nullptr); }

}  // namespace ringo::kernels::gpu::internal
