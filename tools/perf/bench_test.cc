// RunBenchmark's use of its backend: every buffer is made before the first
// collective and none is freed before the last. Freeing device memory waits
// for the whole device, so a free between collectives deadlocks a process
// whose ranks share a GPU (a rank waits in cudaFree for ring kernels that
// wait for that rank's next launch).
#include "tools/perf/bench.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/cuda_calls.h"
#include "tools/perf/backend.h"
#include "tools/perf/communicator.h"
#include "tools/perf/options.h"
#include "tools/perf/report.h"

namespace ringo::perf {
namespace {

std::vector<std::string>* g_events = nullptr;

// The host backend behind another, which tests override in part.
class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
  base::StatusOr<void*> Alloc(size_t bytes) override { return inner_->Alloc(bytes); }
  void Free(void* ptr) override { inner_->Free(ptr); }
  base::Status CopyToBackend(void* d, const void* s, size_t n) override { return inner_->CopyToBackend(d, s, n); }
  base::Status CopyToHost(void* d, const void* s, size_t n) override { return inner_->CopyToHost(d, s, n); }
  base::Status Fill(void* d, uint8_t b, size_t n) override { return inner_->Fill(d, b, n); }
  void* stream() const override { return inner_->stream(); }
  base::Status Synchronize() override { return inner_->Synchronize(); }
  base::Status StartTimer() override { return inner_->StartTimer(); }
  base::StatusOr<double> StopTimer() override { return inner_->StopTimer(); }

 private:
  std::unique_ptr<Backend> inner_;
};

// Records each allocation and free.
class RecordingBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  base::StatusOr<void*> Alloc(size_t bytes) override {
    g_events->push_back("alloc");
    return ForwardingBackend::Alloc(bytes);
  }
  void Free(void* ptr) override {
    g_events->push_back("free");
    ForwardingBackend::Free(ptr);
  }
};

// One rank: every collective copies its input to its output.
class OneRank final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string Library() const override { return "one-rank test"; }
  base::Status Supports(Collective, base::DataType, base::RedOp) const override { return base::Status(); }
  base::Status Issue(Collective, const void* send, void* recv, size_t count, base::DataType type,
                     base::RedOp, int, void*) override {
    g_events->push_back("issue");
    if (send != recv && count > 0) std::memmove(recv, send, count * base::DataTypeSize(type));
    return base::Status();
  }
  void Abort() override {}
};

TEST(RunBenchmark, AllocatesBeforeTheFirstCollectiveAndFreesAfterTheLast) {
  std::vector<std::string> events;
  g_events = &events;
  auto options = ParseOptions({"allreduce", "-b", "8", "-e", "64K", "-f", "8", "-n", "3", "-w", "1", "-c", "1"});
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  auto host = MakeBackend(-1, nullptr);
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  RecordingBackend backend(std::move(*host));
  OneRank comm;
  Reporter reporter(false, nullptr);
  auto totals = RunBenchmark(*options, "bench_test", &comm, &backend, &reporter);
  ASSERT_TRUE(totals.ok()) << totals.status().ToString();
  EXPECT_EQ(totals->wrong, 0);
  size_t first_issue = events.size(), last_issue = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i] != "issue") continue;
    first_issue = std::min(first_issue, i);
    last_issue = i;
  }
  ASSERT_LT(first_issue, events.size()) << "no collective was issued";
  for (size_t i = first_issue; i < last_issue; ++i) {
    EXPECT_NE(events[i], "alloc") << "event " << i << " allocates between collectives";
    EXPECT_NE(events[i], "free") << "event " << i << " frees between collectives";
  }
  g_events = nullptr;
}

// A timer that makes CUDA calls of its own (as the CUDA backend's events do),
// and a communicator whose collective makes one kernel launch: --cuda-calls
// counts the collective's calls only, not the timer's nor those of the
// times' agreement between ranks.
class CountedTimerBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  base::Status StartTimer() override {
    base::CountCudaCall(base::CudaCall::kEventRecord);
    return ForwardingBackend::StartTimer();
  }
  base::StatusOr<double> StopTimer() override {
    base::CountCudaCall(base::CudaCall::kEventRecord);
    base::CountCudaCall(base::CudaCall::kEventSynchronize);
    return ForwardingBackend::StopTimer();
  }
};

class OneLaunchRank final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string Library() const override { return "one-launch test"; }
  base::Status Supports(Collective, base::DataType, base::RedOp) const override { return base::Status(); }
  base::Status Issue(Collective, const void* send, void* recv, size_t count, base::DataType type,
                     base::RedOp, int, void*) override {
    base::CountCudaCall(base::CudaCall::kLaunchKernel);
    if (send != recv && count > 0) std::memmove(recv, send, count * base::DataTypeSize(type));
    return base::Status();
  }
  bool CudaCalls(base::CudaCallCounts* counts) const override {
    *counts = base::ThreadCudaCalls();
    return true;
  }
  void Abort() override {}
};

void ExpectOneLaunchPerCall(const std::vector<std::string>& timing_args) {
  std::vector<std::string> args = {"allreduce", "-b", "8", "-e", "64", "-f", "8", "-n", "20", "-w", "2", "--cuda-calls"};
  args.insert(args.end(), timing_args.begin(), timing_args.end());
  auto options = ParseOptions(args);
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  auto host = MakeBackend(-1, nullptr);
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  CountedTimerBackend backend(std::move(*host));
  OneLaunchRank comm;
  Reporter reporter(/*is_main=*/true, nullptr);
  testing::internal::CaptureStdout();
  auto totals = RunBenchmark(*options, "bench_test", &comm, &backend, &reporter);
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(totals.ok()) << totals.status().ToString();
  // Two sizes, in place and out of place: four rows of counts, each exact.
  size_t rows = 0;
  for (size_t at = out.find("CUDA runtime calls"); at != std::string::npos;
       at = out.find("CUDA runtime calls", at + 1)) {
    const std::string line = out.substr(at, out.find('\n', at) - at);
    EXPECT_NE(line.find(": 1.00 per call: cudaLaunchKernel 1.00"), std::string::npos) << line;
    EXPECT_EQ(line.find("cudaEvent"), std::string::npos) << line;
    ++rows;
  }
  EXPECT_EQ(rows, 4u) << out;
}

TEST(RunBenchmark, CudaCallsCountTheCollectivesCallsOnly) { ExpectOneLaunchPerCall({}); }

TEST(RunBenchmark, CudaCallsCountTheCollectivesCallsOnlyWhenEachIterationIsTimed) {
  ExpectOneLaunchPerCall({"--median"});
}

}  // namespace
}  // namespace ringo::perf
