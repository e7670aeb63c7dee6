// ringo-perf's verification on the device: the CUDA kernels that write a
// rank's inputs and count its wrong results where the buffers are, from the
// arithmetic the host verifier uses (pattern_math.h), so a large buffer is
// never copied to the host to be checked. Host code includes this header
// without the CUDA toolkit's; the kernels live in verify_cuda.cu.
//
// Thread safety: the launchers may be called from any thread; each enqueues
// on the stream it is given and returns without waiting.
#ifndef RINGO_TOOLS_PERF_VERIFY_CUDA_H_
#define RINGO_TOOLS_PERF_VERIFY_CUDA_H_

#include <cstdint>

#include "tools/perf/pattern_math.h"

namespace ringo::perf::gpu {

// Enqueues on `stream` (a cudaStream_t) a kernel that writes
// FromDouble<T>(InputValue(spec, first + i)) to dst[i] for i < count, T being
// spec.type's C++ type; dst is memory of the current device. Returns the
// launch's cudaError_t (0: enqueued); count 0 launches nothing.
int LaunchFillInput(const PatternSpec& spec, uint64_t first, uint64_t count, void* dst,
                    void* stream);

// Enqueues on `stream` a kernel that adds to *wrong (device memory) the
// number of i < count for which IsWrongElement(spec, first + i, got[i]) holds.
// The caller zeroes *wrong first and reads it once the stream has passed the
// kernel. Returns the launch's cudaError_t; count 0 launches nothing.
int LaunchCountWrong(const PatternSpec& spec, uint64_t first, uint64_t count, const void* got,
                     unsigned long long* wrong, void* stream);

// Loads every verification kernel on the current device now. CUDA loads
// kernels lazily by default, and a first launch may synchronise the context,
// which would wait for ring kernels of other ranks of this process that wait
// for this rank (ringo-perf --threads). Returns a cudaError_t.
int LoadVerifyKernels();

}  // namespace ringo::perf::gpu

#endif  // RINGO_TOOLS_PERF_VERIFY_CUDA_H_
