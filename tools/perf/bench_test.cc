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

#include "tools/perf/backend.h"
#include "tools/perf/communicator.h"
#include "tools/perf/options.h"
#include "tools/perf/report.h"

namespace ringo::perf {
namespace {

std::vector<std::string>* g_events = nullptr;

// The host backend, recording each allocation and free.
class RecordingBackend final : public Backend {
 public:
  explicit RecordingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
  base::StatusOr<void*> Alloc(size_t bytes) override {
    g_events->push_back("alloc");
    return inner_->Alloc(bytes);
  }
  void Free(void* ptr) override {
    g_events->push_back("free");
    inner_->Free(ptr);
  }
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

}  // namespace
}  // namespace ringo::perf
