// What the CUDA runtime (linked statically) says about this machine, asked
// once. A missing driver or device is not an error: Ringo then uses host
// memory, and says so in the log.
#ifndef RINGO_BASE_CUDA_H_
#define RINGO_BASE_CUDA_H_

#include <string>

namespace ringo::base {

struct CudaProbe {
  int device_count = 0;  // 0 when there is no usable GPU
  std::string reason;    // why there is none (driver missing, no device, ...)
};

// Thread-safe; the answer is computed once per process.
const CudaProbe& ProbeCuda();

// Whether `ptr` is device (or managed) memory; false when CUDA is unusable.
bool IsDevicePointer(const void* ptr);

}  // namespace ringo::base

#endif  // RINGO_BASE_CUDA_H_
