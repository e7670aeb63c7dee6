// The flight record of GPU communicators: after all-reduces and a send/recv
// batch on two ranks sharing CUDA device 0, a dump shows every operation
// "done", with the GPU's start no later than its finish and the enqueue
// time kept (collectives/control/gpu_times.h). Skips where no GPU is
// visible (fails instead under RINGO_REQUIRE_GPU=1).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "base/cuda.h"
#include "base/gpu_test.h"
#include "ringo/ringo.h"

#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#define RINGO_TEST_HAVE_CUDART 1
#else
#define RINGO_TEST_HAVE_CUDART 0
#endif

namespace ringo::tests {
namespace {

bool GpuVisible() { return base::ProbeCuda().device_count > 0; }

// The operation lines of a dump (the header skipped).
std::vector<std::string> OpLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (!header) lines.push_back(line);
    header = false;
  }
  return lines;
}

int64_t Field(const std::string& line, const std::string& key) {
  const size_t at = line.find("\"" + key + "\":");
  if (at == std::string::npos) return -1;
  return std::stoll(line.substr(at + key.size() + 3));
}

TEST(GpuTrace, OperationsTimedOnTheGpu) {
  RINGO_SKIP_WITHOUT_GPU(GpuVisible(), "no CUDA device visible (" + base::ProbeCuda().reason + ")");
#if RINGO_TEST_HAVE_CUDART
  constexpr int kRanks = 2;
  constexpr size_t kCount = 1 << 20;
  std::vector<ringoComm_t> comms(kRanks, nullptr);
  std::vector<int> devlist(kRanks, 0);
  ASSERT_EQ(ringoCommInitAll(comms.data(), kRanks, devlist.data()), ringoSuccess) << ringoGetLastError(nullptr);
  std::vector<cudaStream_t> streams(kRanks);
  std::vector<float*> bufs(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&bufs[r]), kCount * sizeof(float) * 2), cudaSuccess);
  }
  ASSERT_EQ(ringoGroupStart(), ringoSuccess);
  for (int r = 0; r < kRanks; ++r) {
    for (int k = 0; k < 3; ++k) {
      ASSERT_EQ(ringoAllReduce(bufs[r], bufs[r], kCount, ringoFloat32, ringoSum, comms[r], streams[r]), ringoSuccess);
    }
  }
  ASSERT_EQ(ringoGroupEnd(), ringoSuccess);
  ASSERT_EQ(ringoGroupStart(), ringoSuccess);
  for (int r = 0; r < kRanks; ++r) {
    const int peer = 1 - r;
    ASSERT_EQ(ringoSend(bufs[r], kCount, ringoFloat32, peer, comms[r], streams[r]), ringoSuccess);
    ASSERT_EQ(ringoRecv(bufs[r] + kCount, kCount, ringoFloat32, peer, comms[r], streams[r]), ringoSuccess);
  }
  ASSERT_EQ(ringoGroupEnd(), ringoSuccess);
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(cudaStreamSynchronize(streams[r]), cudaSuccess);

  char dir[] = "/tmp/ringo-gpu-trace-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  ASSERT_EQ(ringoCommDumpTrace(comms[0], dir), ringoSuccess) << ringoGetLastError(comms[0]);
  std::string path;
  {
    FILE* ls = popen((std::string("ls ") + dir + "/*.jsonl").c_str(), "r");
    char name[512] = {};
    if (ls != nullptr && fgets(name, sizeof(name), ls) != nullptr) path = name;
    if (ls != nullptr) pclose(ls);
    while (!path.empty() && (path.back() == '\n')) path.pop_back();
  }
  ASSERT_FALSE(path.empty()) << "no dump in " << dir;
  const std::vector<std::string> ops = OpLines(path);
  ASSERT_EQ(ops.size(), 5u);  // three all-reduces, a send and a receive
  for (const std::string& line : ops) {
    EXPECT_NE(line.find("\"state\":\"done\""), std::string::npos) << line;
    const int64_t started = Field(line, "started_ns"), finished = Field(line, "finished_ns");
    const int64_t enqueued = Field(line, "enqueued_ns"), called = Field(line, "called_ns");
    EXPECT_GT(enqueued, 0) << line;
    EXPECT_LE(started, finished) << line;
    EXPECT_LE(called, enqueued) << line;
    // The GPU ran it after the call began (clocks anchored within a few us).
    EXPECT_GE(started + 100000, called) << line;
  }
  for (int r = 0; r < kRanks; ++r) {
    cudaFree(bufs[r]);
    cudaStreamDestroy(streams[r]);
    ringoCommDestroy(comms[r]);
  }
#endif
}

}  // namespace
}  // namespace ringo::tests
