#include "base/cuda.h"

#include <string>

#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#define RINGO_HAVE_CUDART 1
#else
#define RINGO_HAVE_CUDART 0
#endif

namespace ringo::base {

#if !RINGO_HAVE_CUDART
const CudaProbe& ProbeCuda() {
  static const CudaProbe* const kProbe = new CudaProbe{0, "Ringo was built without the CUDA toolkit"};
  return *kProbe;
}

bool IsDevicePointer(const void*) { return false; }
#else

const CudaProbe& ProbeCuda() {
  static const CudaProbe* const kProbe = [] {
    auto* p = new CudaProbe();
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      p->reason = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
      cudaGetLastError();  // clear the sticky-free error so later calls start clean
    } else if (count == 0) {
      p->reason = "no CUDA device is visible";
    } else {
      p->device_count = count;
    }
    return p;
  }();
  return *kProbe;
}

bool IsDevicePointer(const void* ptr) {
  if (ptr == nullptr || ProbeCuda().device_count == 0) return false;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}
#endif  // RINGO_HAVE_CUDART

}  // namespace ringo::base
