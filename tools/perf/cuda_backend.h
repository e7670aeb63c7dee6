// ringo-perf's Backend for GPU communicators: buffers from cudaMalloc on the
// communicator's device, one non-blocking stream per rank on which every
// collective, fill and copy is issued, timing by CUDA events recorded on that
// stream, and inputs written and results checked by kernels on the device
// (verify_cuda.h). Host communicators get the host backend (backend.h).
// Without the CUDA toolkit at build time it refuses devices, with a message.
//
// Thread safety: one backend per rank, used by that rank's thread only.
#ifndef RINGO_TOOLS_PERF_CUDA_BACKEND_H_
#define RINGO_TOOLS_PERF_CUDA_BACKEND_H_

#include <memory>

#include "base/status.h"
#include "tools/perf/backend.h"

namespace ringo::perf {

// A BackendFactory: MakeBackend's host backend for cuda_device < 0;
// otherwise a CUDA backend on `cuda_device`, which it makes the calling
// thread's current device. InvalidUsage when `allocator` is given with a
// device (-R 1 hands out host memory) or the build has no CUDA; a CUDA error
// names the failing call.
base::StatusOr<std::unique_ptr<Backend>> MakeCudaOrHostBackend(int cuda_device,
                                                               const HostAllocator* allocator);

// Makes `device` the calling thread's current CUDA device (ringoCommInitRank
// puts a GPU rank on it) and creates its context now, so that the time it
// takes is not spent inside the communicator's init.
base::Status UseCudaDevice(int device);

}  // namespace ringo::perf

#endif  // RINGO_TOOLS_PERF_CUDA_BACKEND_H_
