#include "base/cuda_calls.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

namespace ringo::base {
namespace {
thread_local CudaCallCounts t_counts;

constexpr const char* kNames[kNumCudaCalls] = {
    "cudaPointerGetAttributes", "cudaGetDevice",         "cudaSetDevice",     "cudaStreamGetFlags", "cudaStreamGetId",
    "cudaStreamIsCapturing",    "cudaStreamGetCaptureInfo", "cudaStreamWaitEvent", "cudaEventRecord",
    "cudaEventQuery",           "cudaEventSynchronize",  "cudaEventElapsedTime", "cudaStreamSynchronize",
    "cudaLaunchKernel",         "cudaMemcpyAsync",       "cudaGetLastError",  "other",
};
}  // namespace

const char* CudaCallName(CudaCall call) {
  const int i = static_cast<int>(call);
  return i >= 0 && i < kNumCudaCalls ? kNames[i] : "?";
}

uint64_t CudaCallCounts::Total() const {
  uint64_t t = 0;
  for (uint64_t v : n) t += v;
  return t;
}

CudaCallCounts CudaCallCounts::Since(const CudaCallCounts& earlier) const {
  CudaCallCounts d;
  for (int i = 0; i < kNumCudaCalls; ++i) d.n[i] = n[i] - earlier.n[i];
  return d;
}

void CountCudaCall(CudaCall call) { ++t_counts.n[static_cast<int>(call)]; }

CudaCallCounts ThreadCudaCalls() { return t_counts; }

std::string DescribeCudaCalls(const CudaCallCounts& counts, uint64_t calls) {
  const double per = calls > 0 ? 1.0 / static_cast<double>(calls) : 0.0;
  std::vector<std::pair<uint64_t, int>> made;
  for (int i = 0; i < kNumCudaCalls; ++i) {
    if (counts.n[i] > 0) made.emplace_back(counts.n[i], i);
  }
  std::stable_sort(made.begin(), made.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f per call", static_cast<double>(counts.Total()) * per);
  std::string s = buf;
  for (size_t k = 0; k < made.size(); ++k) {
    std::snprintf(buf, sizeof(buf), "%s%s %.2f", k == 0 ? ": " : ", ", kNames[made[k].second],
                  static_cast<double>(made[k].first) * per);
    s += buf;
  }
  return s;
}

}  // namespace ringo::base
