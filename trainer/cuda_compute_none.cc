// A build without the CUDA toolkit: no GPU backend.
#include "trainer/compute.h"

namespace ringo::train {

int CudaDeviceCount() { return 0; }

base::StatusOr<std::unique_ptr<Compute>> MakeCudaCompute(int, GemmKind) {
  return base::InvalidUsage("this ringo-train was built without the CUDA toolkit: no GPU backend (--host trains on the CPU)");
}

}  // namespace ringo::train
