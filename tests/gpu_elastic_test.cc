// Elastic calls on GPU communicators: ranks that are threads of this
// process on CUDA device 0 (ringoCommInitRankConfig with RINGO_DEVICE_CUDA),
// each with its own non-blocking stream. A healthy shrink with the default
// flag leaves parent and child usable; a rank that aborts mid-loop is named
// by the survivors' agreement, and they shrink with the abort flag and go on;
// a revoke stops a kernel that waits for a rank that never launches. Every
// result is read back and checked. Skips where no GPU is visible (fails
// instead under RINGO_REQUIRE_GPU=1).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "base/cuda.h"
#include "base/gpu_test.h"
#include "ringo/ringo.h"
#include "tests/harness.h"

#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#define RINGO_TEST_HAVE_CUDART 1
#else
#define RINGO_TEST_HAVE_CUDART 0
#endif

namespace ringo::tests {
namespace {

using std::chrono::milliseconds;

bool GpuVisible() { return base::ProbeCuda().device_count > 0; }

#define SKIP_WITHOUT_GPU() \
  RINGO_SKIP_WITHOUT_GPU(GpuVisible(), "no CUDA device visible (" + base::ProbeCuda().reason + ")")

#if RINGO_TEST_HAVE_CUDART

constexpr int kCount = 4096;

std::string Msg(const char* what, ringoResult_t r, ringoComm_t comm = nullptr) {
  return std::string(what) + ": " + ResultName(r) + " (" + ringoGetLastError(comm) + ")";
}

// A rank's device buffer and stream.
struct GpuRankState {
  float* buf = nullptr;
  cudaStream_t stream = nullptr;
  GpuRankState() {
    cudaSetDevice(0);
    cudaMalloc(reinterpret_cast<void**>(&buf), kCount * sizeof(float));
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  }
  ~GpuRankState() {
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
    cudaFree(buf);
  }
};

// One all-reduce of `value` on `comm`, waited for; "" when every element is
// `want`, else what went wrong (the call's result, the communicator's
// asynchronous error, or a wrong element).
std::string AllReduceIs(ringoComm_t comm, GpuRankState& s, float value, float want) {
  std::vector<float> h(kCount, value);
  cudaMemcpyAsync(s.buf, h.data(), kCount * sizeof(float), cudaMemcpyHostToDevice, s.stream);
  ringoResult_t r = ringoAllReduce(s.buf, s.buf, kCount, ringoFloat, ringoSum, comm, s.stream);
  if (r != ringoSuccess) return Msg("ringoAllReduce", r, comm);
  cudaMemcpyAsync(h.data(), s.buf, kCount * sizeof(float), cudaMemcpyDeviceToHost, s.stream);
  cudaStreamSynchronize(s.stream);
  ringoResult_t async = ringoSuccess;
  ringoCommGetAsyncError(comm, &async);
  if (async != ringoSuccess) return Msg("async error", async, comm);
  for (int i = 0; i < kCount; i += 61) {
    if (h[i] != want) return "element " + std::to_string(i) + " is " + std::to_string(h[i]) + ", expected " +
                             std::to_string(want);
  }
  return "";
}

// Thread ranks meet here; counts up forever (call k waits for k * n).
class ThreadBarrier {
 public:
  explicit ThreadBarrier(int n) : n_(n) {}
  void Wait() {
    const int gen = arrived_.fetch_add(1) / n_;
    while (arrived_.load() < (gen + 1) * n_) std::this_thread::sleep_for(milliseconds(1));
  }

 private:
  const int n_;
  std::atomic<int> arrived_{0};
};

// Every rank's init returns before any rank launches a kernel: on one GPU a
// rank's waiting kernel would stall another's setup (allocations that wait
// for the device; docs/gpu.md's hazards).
ringoResult_t InitGpu(ringoComm_t* comm, int n, const ringoUniqueId& id, int rank, ThreadBarrier* after) {
  cudaSetDevice(0);
  ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
  config.device_kind = RINGO_DEVICE_CUDA;
  const ringoResult_t r = ringoCommInitRankConfig(comm, n, id, rank, &config);
  after->Wait();
  return r;
}

// Ranks 0..2 of 4 shrink a healthy communicator with the default flag,
// leaving rank 3 out; the child sums over its three ranks, then all four
// use the parent again.
TEST(GpuElastic, AHealthyShrinkLeavesParentAndChildUsable) {
  SKIP_WITHOUT_GPU();
  // No rank launches its next parent all-reduce before the others are done
  // with their child (made and destroyed): on one GPU a waiting kernel would
  // stall that setup and teardown (docs/gpu.md's hazards).
  ThreadBarrier init(4), children(4);
  auto body = [&](int rank, int n, const ringoUniqueId& id) -> std::string {
    GpuRankState s;
    ringoComm_t comm = nullptr;
    ringoResult_t r = InitGpu(&comm, n, id, rank, &init);
    if (r != ringoSuccess) return Msg("ringoCommInitRankConfig", r);
    std::string e = AllReduceIs(comm, s, static_cast<float>(rank + 1), 10.0f);
    if (!e.empty()) return "parent: " + e;
    if (rank != 3) {
      int out = 3;
      ringoComm_t child = nullptr;
      r = ringoCommShrink(comm, &out, 1, &child, nullptr, RINGO_SHRINK_DEFAULT);
      if (r != ringoSuccess) return Msg("ringoCommShrink", r, comm);
      int device = -1, count = 0;
      ringoCommCuDevice(child, &device);
      ringoCommCount(child, &count);
      if (device != 0 || count != 3) return "the child is on device " + std::to_string(device) + " with " +
                                            std::to_string(count) + " ranks";
      e = AllReduceIs(child, s, static_cast<float>(rank + 1), 6.0f);
      if (!e.empty()) return "child: " + e;
      ringoCommDestroy(child);
    }
    children.Wait();
    e = AllReduceIs(comm, s, 1.0f, 4.0f);
    if (!e.empty()) return "parent after the shrink: " + e;
    ringoCommDestroy(comm);
    return "";
  };
  EXPECT_TRUE(AllRanksOk(RunRanks(4, RankMode::kThreads, milliseconds(120000), body)));
}

// Rank 2 of 4 aborts its communicator in the fourth round (as a dead
// process would stop answering); the survivors' next all-reduce fails, they
// agree that rank 2 failed, shrink with the abort flag and sum over the
// three of them.
TEST(GpuElastic, SurvivorsOfAnAbortedRankAgreeAndShrink) {
  SKIP_WITHOUT_GPU();
  ThreadBarrier init(4);
  auto body = [&](int rank, int n, const ringoUniqueId& id) -> std::string {
    GpuRankState s;
    ringoComm_t comm = nullptr;
    ringoResult_t r = InitGpu(&comm, n, id, rank, &init);
    if (r != ringoSuccess) return Msg("ringoCommInitRankConfig", r);
    for (int i = 0; i < 3; ++i) {
      std::string e = AllReduceIs(comm, s, 1.0f, 4.0f);
      if (!e.empty()) return "round " + std::to_string(i) + ": " + e;
    }
    if (rank == 2) {
      ringoCommAbort(comm);
      return "";
    }
    bool failed = false;
    for (int i = 0; i < 20 && !failed; ++i) failed = !AllReduceIs(comm, s, 1.0f, 4.0f).empty();
    if (!failed) return "the all-reduces went on after rank 2 aborted";
    std::vector<int> dead(n, -1);
    int ndead = -1;
    r = ringoCommAgreeFailed(comm, dead.data(), &ndead);
    if (r != ringoSuccess) return Msg("ringoCommAgreeFailed", r, comm);
    if (ndead != 1 || dead[0] != 2) return "agreed on " + std::to_string(ndead) + " failed rank(s), first " +
                                          std::to_string(dead[0]);
    ringoComm_t child = nullptr;
    r = ringoCommShrink(comm, dead.data(), ndead, &child, nullptr, RINGO_SHRINK_ABORT);
    if (r != ringoSuccess) return Msg("ringoCommShrink", r, comm);
    std::string e = AllReduceIs(child, s, static_cast<float>(rank + 1), 1.0f + 2.0f + 4.0f);
    if (!e.empty()) return "child: " + e;
    ringoCommDestroy(child);
    ringoCommDestroy(comm);
    return "";
  };
  EXPECT_TRUE(AllRanksOk(RunRanks(4, RankMode::kThreads, milliseconds(120000), body)));
}

// Rank 1 of 2 never launches its all-reduce; rank 0's kernel waits for it
// until rank 1 revokes the communicator from its thread: rank 0's stream
// completes with an error, and later calls are refused.
TEST(GpuElastic, RevokeStopsAWaitingKernel) {
  SKIP_WITHOUT_GPU();
  ThreadBarrier init(2);
  auto body = [&](int rank, int n, const ringoUniqueId& id) -> std::string {
    GpuRankState s;
    ringoComm_t comm = nullptr;
    ringoResult_t r = InitGpu(&comm, n, id, rank, &init);
    if (r != ringoSuccess) return Msg("ringoCommInitRankConfig", r);
    std::string e = AllReduceIs(comm, s, 1.0f, 2.0f);
    if (!e.empty()) return "round 0: " + e;
    if (rank == 1) {
      std::this_thread::sleep_for(milliseconds(500));  // rank 0's kernel is waiting by now
      r = ringoCommRevoke(comm, RINGO_REVOKE_DEFAULT);
      if (r != ringoSuccess && r != ringoInProgress) return Msg("ringoCommRevoke", r, comm);
    } else {
      const auto t0 = std::chrono::steady_clock::now();
      e = AllReduceIs(comm, s, 1.0f, 2.0f);
      const double s_waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (e.empty()) return "the all-reduce without rank 1 succeeded";
      if (s_waited > 10) return "the kernel stopped only after " + std::to_string(s_waited) + " s";
    }
    r = ringoAllReduce(s.buf, s.buf, 4, ringoFloat, ringoSum, comm, s.stream);
    if (r != ringoInvalidUsage) return "a collective on the revoked communicator: " + std::string(ResultName(r));
    ringoCommDestroy(comm);
    return "";
  };
  EXPECT_TRUE(AllRanksOk(RunRanks(2, RankMode::kThreads, milliseconds(120000), body)));
}

#else

TEST(GpuElastic, NeedsCudaRuntime) { GTEST_SKIP() << "built without the CUDA runtime headers"; }

#endif  // RINGO_TEST_HAVE_CUDART

}  // namespace
}  // namespace ringo::tests
