// Counts of the CUDA runtime calls Ringo makes, kept per thread by the
// wrappers that make them (base/cuda.cc, the kernel launches). The runtime is
// linked statically, so no outside tool sees these calls; the counts are how
// a caller learns what one collective costs on the host (ringo-perf
// --cuda-calls prints them per call). Counting is a plain increment of the
// calling thread's counter: always on, nothing shared between threads.
//
// Thread safety: each thread counts and reads its own counters only.
#ifndef RINGO_BASE_CUDA_CALLS_H_
#define RINGO_BASE_CUDA_CALLS_H_

#include <cstdint>
#include <string>

namespace ringo::base {

enum class CudaCall : int {
  kPointerGetAttributes,
  kGetDevice,
  kSetDevice,
  kStreamGetFlags,
  kStreamGetId,
  kStreamIsCapturing,
  kStreamGetCaptureInfo,
  kStreamWaitEvent,
  kEventRecord,
  kEventQuery,
  kEventSynchronize,
  kEventElapsedTime,
  kStreamSynchronize,
  kLaunchKernel,
  kMemcpyAsync,
  kGetLastError,
  kOther,  // the rest: allocations, setup, teardown
};
inline constexpr int kNumCudaCalls = static_cast<int>(CudaCall::kOther) + 1;

// The runtime function's name ("cudaLaunchKernel"); "other" for kOther.
const char* CudaCallName(CudaCall call);

struct CudaCallCounts {
  uint64_t n[kNumCudaCalls] = {};
  uint64_t Total() const;
  // this - earlier, call by call.
  CudaCallCounts Since(const CudaCallCounts& earlier) const;
};

// Counts one call made by the calling thread.
void CountCudaCall(CudaCall call);
// The calling thread's counts so far.
CudaCallCounts ThreadCudaCalls();

// "6.00 per call: cudaLaunchKernel 1.00, cudaEventRecord 1.00, ...": the
// counts divided by `calls`, the calls made at least once in total, largest
// first.
std::string DescribeCudaCalls(const CudaCallCounts& counts, uint64_t calls);

}  // namespace ringo::base

#endif  // RINGO_BASE_CUDA_CALLS_H_
