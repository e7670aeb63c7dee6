// GPU communicators whose ranks are forked processes on CUDA device 0, joined
// by ringoCommInitRankConfig and connected through CUDA IPC
// (transport/cuda/gpu_fifo.h): 2 and 4 ranks, every collective, a few datatypes and
// ops, counts {0, 1, 7, chunk-1, chunk, chunk+1, 4*chunk+3, about 256 KiB}
// (most not a multiple of the 16-byte vector width), misaligned and in-place
// buffers, Simple and LL with small slots and the planner's choice with
// default slots; a peer's abort reaching a waiting kernel in another process,
// a timeout naming the missing peer, and AUTO / RINGO_DEVICE across
// processes.
//
// A CUDA context does not survive fork(), so the parent never initialises
// CUDA: it asks a probe child whether a GPU is visible, and every rank
// initialises CUDA itself. Where no GPU is visible every case skips with a
// message. Several processes on one GPU without MPS take turns on it (time
// slices), so a ring step can wait for a context switch: correct, but slow;
// the sweep is kept small for that reason. Not yet run on a GPU.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/config.h"
#include "base/cuda.h"
#include "base/gpu_test.h"
#include "collectives/plan/planner.h"
#include "ringo/ringo.h"
#include "tests/collective_case.h"
#include "tests/gpu_case.h"
#include "tests/harness.h"
#include "tests/reference.h"

#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#define RINGO_TEST_HAVE_CUDART 1
#else
#define RINGO_TEST_HAVE_CUDART 0
#endif

namespace ringo::tests {
namespace {

using std::chrono::milliseconds;

struct GpuProbe {
  int device_count = 0;
  std::string reason;
};

// Whether a GPU is visible, asked in a child process so that this one keeps
// no CUDA state across the forks that follow. Computed once.
const GpuProbe& ProbeInChild() {
  static const GpuProbe probe = [] {
    GpuProbe p;
    int fds[2];
    if (::pipe(fds) != 0) {
      p.reason = "pipe failed";
      return p;
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      const base::CudaProbe& c = base::ProbeCuda();
      const std::string msg = std::to_string(c.device_count) + " " + c.reason;
      ssize_t written = ::write(fds[1], msg.data(), msg.size());
      (void)written;
      ::_exit(0);
    }
    ::close(fds[1]);
    std::string msg;
    char buf[256];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;)
      msg.append(buf, static_cast<size_t>(n));
    ::close(fds[0]);
    int status = 0;
    if (pid > 0) ::waitpid(pid, &status, 0);
    const size_t space = msg.find(' ');
    if (pid < 0 || space == std::string::npos) {
      p.reason = "the GPU probe child failed";
      return p;
    }
    p.device_count = std::atoi(msg.substr(0, space).c_str());
    p.reason = msg.substr(space + 1);
    return p;
  }();
  return probe;
}

#define SKIP_WITHOUT_GPU()                                                                      \
  RINGO_SKIP_WITHOUT_GPU(ProbeInChild().device_count > 0,                                       \
                         "no CUDA device visible (" << ProbeInChild().reason                    \
                                                    << "): GPU communicators across processes " \
                                                       "(CUDA IPC) not tested")

#if !RINGO_TEST_HAVE_CUDART

TEST(GpuProcesses, Skipped) {
  RINGO_SKIP_WITHOUT_GPU(false, "built without the CUDA toolkit: CUDA IPC not tested");
}

#else

constexpr milliseconds kDeadline{600000};
constexpr size_t kPad = 256;  // guard bytes around every output
constexpr unsigned char kSentinel = GuardedBuffer::kSentinel;  // what CheckOutput expects untouched

std::string CudaError(cudaError_t err, const char* what) {
  return std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
}
#define CHILD_CUDA(call)                                    \
  do {                                                      \
    const cudaError_t err_ = (call);                        \
    if (err_ != cudaSuccess) return CudaError(err_, #call); \
  } while (0)

// One rank's communicator on device 0, a stream and device buffers of
// `bytes` each (plus guards), released on destruction.
class RankGpu {
 public:
  std::string Init(int rank, int nranks, const ringoUniqueId& id, size_t bytes, int device_kind) {
    CHILD_CUDA(cudaSetDevice(0));
    CHILD_CUDA(cudaFree(nullptr));  // the context first: init then waits on no one's CUDA start-up
    ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
    config.device_kind = device_kind;
    const ringoResult_t rc = ringoCommInitRankConfig(&comm_, nranks, id, rank, &config);
    if (rc != ringoSuccess) {
      comm_ = nullptr;
      return "ringoCommInitRankConfig returned " + ResultName(rc) + ": " +
             ringoGetLastError(nullptr);
    }
    CHILD_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    bytes_ = bytes + 2 * kPad + 64;
    void* s = nullptr;
    void* r = nullptr;
    CHILD_CUDA(cudaMalloc(&s, bytes_));
    send_ = static_cast<unsigned char*>(s);
    CHILD_CUDA(cudaMalloc(&r, bytes_));
    recv_ = static_cast<unsigned char*>(r);
    return "";
  }
  ~RankGpu() {
    if (comm_ != nullptr) ringoCommDestroy(comm_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    cudaFree(send_);
    cudaFree(recv_);
  }
  ringoComm_t comm() const { return comm_; }
  cudaStream_t stream() const { return stream_; }
  unsigned char* send() const { return send_; }
  unsigned char* recv() const { return recv_; }
  void Forget() { comm_ = nullptr; }  // destroyed or aborted by the caller

 private:
  ringoComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  size_t bytes_ = 0;
  unsigned char* send_ = nullptr;
  unsigned char* recv_ = nullptr;
};

// Runs `c` as `rank` (buffers offset by send_off / recv_off elements from a
// 256-byte boundary) and checks the output, the guards and, for Reduce, that
// a non-root's recvbuff is untouched. "" or what went wrong. *call_failed:
// the ring may be out of step, stop.
std::string RunCaseOnGpuRank(const RankGpu& g, const Case& c, const Expected& expected, int r,
                             int send_off, int recv_off, bool* call_failed) {
  const size_t es = DataTypeSize(c.dtype);
  const size_t send_bytes = SendElems(c) * es;
  const size_t recv_bytes = (c.in_place ? InPlaceBufferElems(c) : RecvElems(c)) * es;
  std::vector<unsigned char> input(send_bytes);
  FillInput(c.dtype, c.op, c.seed, r, input.data(), SendElems(c));
  unsigned char* rb = g.recv() + kPad + recv_off * es;
  CHILD_CUDA(cudaMemset(g.recv(), kSentinel, kPad + recv_off * es + recv_bytes + kPad));
  unsigned char* sp = g.send() + kPad + send_off * es;
  unsigned char* rp = rb;
  if (c.in_place) {
    sp = rb + InPlaceSendOffset(c, r) * es;
    rp = rb + InPlaceRecvOffset(c, r) * es;
  }
  const bool copy_input = !(c.in_place && c.collective == Collective::kBroadcast && r != c.root);
  if (copy_input && send_bytes > 0)
    CHILD_CUDA(cudaMemcpy(sp, input.data(), send_bytes, cudaMemcpyHostToDevice));
  // Legacy-stream setup (a pageable copy may still be in flight when
  // cudaMemcpy returns) before the rank's non-blocking stream reads it.
  CHILD_CUDA(cudaDeviceSynchronize());
  const ringoResult_t rc = CallCollective(c, sp, rp, g.comm(), g.stream());
  if (rc != ringoSuccess) {
    *call_failed = true;
    return c.Describe() + ": returned " + ResultName(rc) + ": " + ringoGetLastError(g.comm());
  }
  const cudaError_t synced = cudaStreamSynchronize(g.stream());
  ringoResult_t async = ringoInternalError;
  ringoCommGetAsyncError(g.comm(), &async);
  if (synced != cudaSuccess || async != ringoSuccess) {
    *call_failed = true;
    return c.Describe() + ": stream " + cudaGetErrorString(synced) + ", async error " +
           ResultName(async) + ": " + ringoGetLastError(g.comm());
  }
  const size_t lead = kPad + recv_off * es;
  std::vector<unsigned char> host(lead + recv_bytes + kPad);
  CHILD_CUDA(cudaMemcpy(host.data(), g.recv(), host.size(), cudaMemcpyDeviceToHost));
  for (size_t b = 0; b < host.size(); ++b) {
    if ((b < lead || b >= lead + recv_bytes) && host[b] != kSentinel) {
      return c.Describe() + ": wrote guard byte " + std::to_string(b);
    }
  }
  const unsigned char* out = host.data() + lead + (c.in_place ? InPlaceRecvOffset(c, r) * es : 0);
  const std::string problem = CheckOutput(c, expected, r, out, input.data());
  return problem.empty() ? "" : c.Describe() + ": " + problem;
}

constexpr ringoDataType_t kTypes[] = {ringoFloat32, ringoFloat16, ringoBfloat16,
                                      ringoInt32,   ringoUint8,   ringoFloat64};
constexpr ringoRedOp_t kOps[] = {ringoSum, ringoMax, ringoAvg};
constexpr size_t kBigBytes = 256 << 10;

std::vector<Case> BuildCases(int n) {
  std::vector<Case> cases;
  int index = 0;
  for (Collective coll : kAllCollectives) {
    for (ringoDataType_t dt : kTypes) {
      const size_t chunk = ChunkElems(dt, n);
      std::vector<size_t> counts = {0,
                                    1,
                                    7,
                                    chunk - 1,
                                    chunk,
                                    chunk + 1,
                                    4 * chunk + 3,
                                    kBigBytes / DataTypeSize(dt) / n + 3};
      std::sort(counts.begin(), counts.end());
      counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
      for (ringoRedOp_t op : kOps) {
        if (!HasOp(coll) && op != ringoSum) continue;
        for (size_t count : counts) {
          Case c;
          c.collective = coll;
          c.dtype = dt;
          c.op = op;
          c.nranks = n;
          c.count = count;
          c.in_place = index % 3 == 2;
          c.root = static_cast<int>((count + index) % n);
          c.seed = static_cast<uint32_t>(index);
          ++index;
          cases.push_back(c);
        }
      }
    }
  }
  return cases;
}

struct Sweep {
  const char* proto;       // RINGO_PROTO; "" : unset (the planner's choice)
  const char* slot_bytes;  // RINGO_SLOT_BYTES; nullptr: the planner's
};

class GpuProcesses : public ::testing::TestWithParam<std::tuple<Sweep, int> > {};

TEST_P(GpuProcesses, EveryCollectiveOnOneGpu) {
  SKIP_WITHOUT_GPU();
  const Sweep sweep = std::get<0>(GetParam());
  const int n = std::get<1>(GetParam());
  ScopedEnv env(
      {{"RINGO_PROTO", *sweep.proto ? std::optional<std::string>(sweep.proto) : std::nullopt},
       {"RINGO_SLOT_BYTES",
        sweep.slot_bytes ? std::optional<std::string>(sweep.slot_bytes) : std::nullopt},
       {"RINGO_DEVICE", std::nullopt},
       {"RINGO_TIMEOUT_MS", std::string("30000")}});
  const std::vector<Case> cases = BuildCases(n);  // inherited by the ranks
  std::vector<Expected> expected;
  for (const Case& c : cases) expected.push_back(BuildExpected(c));
  size_t max_bytes = 0;
  for (const Case& c : cases) {
    max_bytes = std::max(max_bytes, std::max(SendElems(c), RecvElems(c)) * DataTypeSize(c.dtype));
  }
  auto results = RunRanks(
      n, RankMode::kProcesses, kDeadline, [&](int rank, int nranks, const ringoUniqueId& id) {
        RankGpu g;
        std::string error = g.Init(rank, nranks, id, max_bytes + 64, RINGO_DEVICE_CUDA);
        if (!error.empty()) return error;
        int device = -1;
        if (ringoCommCuDevice(g.comm(), &device) != ringoSuccess || device != 0) {
          return "ringoCommCuDevice: " + std::to_string(device) + ", not 0";
        }
        std::string report;
        int failures = 0;
        for (size_t i = 0; i < cases.size(); ++i) {
          bool call_failed = false;
          const int send_off = static_cast<int>(i % 3);
          const int recv_off = static_cast<int>((i + 1) % 3);
          const std::string problem =
              RunCaseOnGpuRank(g, cases[i], expected[i], rank, send_off, recv_off, &call_failed);
          if (problem.empty()) continue;
          report += "\n    " + problem;
          if (call_failed || ++failures >= 5) break;  // a failed rank leaves the ring out of step
        }
        return report;
      });
  EXPECT_ALL_RANKS_OK(results) << cases.size() << " cases per rank, proto '" << sweep.proto << "'";
}

constexpr Sweep kSweeps[] = {{"", nullptr}, {"simple", "1024"}, {"ll", "1024"}};

INSTANTIATE_TEST_SUITE_P(Sweep, GpuProcesses,
                         ::testing::Combine(::testing::ValuesIn(kSweeps), ::testing::Values(2, 4)),
                         [](const ::testing::TestParamInfo<GpuProcesses::ParamType>& info) {
                           const Sweep s = std::get<0>(info.param);
                           return std::string(*s.proto ? s.proto : "auto") +
                                  (s.slot_bytes ? std::string("_slot") + s.slot_bytes : "") + "_" +
                                  std::to_string(std::get<1>(info.param)) + "ranks";
                         });

// Rank 0 enqueues an all-reduce that rank 1 never joins; rank 1 aborts its
// communicator. The abort word it writes into rank 0's connector (another
// process's device memory) stops rank 0's kernel long before the timeout.
TEST(GpuProcessFaults, PeerAbortStopsAWaitingKernel) {
  SKIP_WITHOUT_GPU();
  ScopedEnv env({{"RINGO_TIMEOUT_MS", std::string("60000")}, {"RINGO_DEVICE", std::nullopt}});
  Flag enqueued;  // rank 0's all-reduce is on its stream
  auto results = RunRanks(
      2, RankMode::kProcesses, milliseconds(120000),
      [&](int rank, int nranks, const ringoUniqueId& id) -> std::string {
        RankGpu g;
        std::string error = g.Init(rank, nranks, id, 1 << 20, RINGO_DEVICE_CUDA);
        if (!error.empty()) return error;
        if (rank == 1) {
          // Rank 0's kernel is enqueued (and soon waiting) before the abort.
          if (!enqueued.Wait(milliseconds(60000))) return "rank 0 did not enqueue its all-reduce";
          const ringoResult_t rc =
              ringoCommAbort(g.comm());  // returns once rank 0 has released (destroyed)
          g.Forget();
          return rc == ringoSuccess ? "" : "ringoCommAbort returned " + ResultName(rc);
        }
        const auto start = std::chrono::steady_clock::now();
        const ringoResult_t rc = ringoAllReduce(g.send(), g.recv(), 1 << 18, ringoFloat32, ringoSum,
                                                g.comm(), g.stream());
        enqueued.Raise();
        if (rc != ringoSuccess) return "ringoAllReduce returned " + ResultName(rc);
        CHILD_CUDA(cudaStreamSynchronize(g.stream()));
        const auto waited = std::chrono::steady_clock::now() - start;
        ringoResult_t async = ringoSuccess;
        ringoCommGetAsyncError(g.comm(), &async);
        if (async != ringoRemoteError) {
          return "async error " + ResultName(async) + " (" + ringoGetLastError(g.comm()) +
                 "), not ringoRemoteError";
        }
        if (waited > std::chrono::seconds(20))
          return "the kernel took more than 20 s to see the peer's abort";
        return "";
      });
  EXPECT_ALL_RANKS_OK(results);
}

// Rank 1 never calls the collective: rank 0's kernel gives up at
// RINGO_TIMEOUT_MS and says which peer it waited for.
TEST(GpuProcessFaults, MissingPeerTimesOutNamingIt) {
  SKIP_WITHOUT_GPU();
  ScopedEnv env({{"RINGO_TIMEOUT_MS", std::string("5000")}, {"RINGO_DEVICE", std::nullopt}});
  Flag timed_out;  // rank 0's stream finished (its kernel gave up)
  auto results =
      RunRanks(2, RankMode::kProcesses, milliseconds(120000),
               [&](int rank, int nranks, const ringoUniqueId& id) -> std::string {
                 RankGpu g;
                 std::string error = g.Init(rank, nranks, id, 1 << 20, RINGO_DEVICE_CUDA);
                 if (!error.empty()) return error;
                 if (rank == 1) {
                   // Until rank 0's kernel gave up at its 5 s timeout, then destroy (rank
                   // 0's destroy waits for this rank to release its memory).
                   if (!timed_out.Wait(milliseconds(60000))) return std::string("rank 0's kernel did not time out");
                   return std::string();
                 }
                 const ringoResult_t rc = ringoAllReduce(g.send(), g.recv(), 1 << 18, ringoFloat32,
                                                         ringoSum, g.comm(), g.stream());
                 if (rc != ringoSuccess) return "ringoAllReduce returned " + ResultName(rc);
                 const auto start = std::chrono::steady_clock::now();
                 const cudaError_t synced = cudaStreamSynchronize(g.stream());
                 timed_out.Raise();
                 CHILD_CUDA(synced);
                 if (std::chrono::steady_clock::now() - start > std::chrono::seconds(7)) {
                   return "the kernel outlived its 5 s timeout by far";
                 }
                 ringoResult_t async = ringoSuccess;
                 ringoCommGetAsyncError(g.comm(), &async);
                 if (async != ringoTimeout)
                   return "async error " + ResultName(async) + ", not ringoTimeout";
                 // The next call returns the kernel's error with its text.
                 const ringoResult_t again = ringoAllReduce(g.send(), g.recv(), 1, ringoFloat32,
                                                            ringoSum, g.comm(), g.stream());
                 const std::string msg = ringoGetLastError(g.comm());
                 if (again != ringoTimeout)
                   return "the call after the timeout returned " + ResultName(again) + ": " + msg;
                 if (msg.find("rank 1") == std::string::npos)
                   return "the timeout does not name rank 1: " + msg;
                 return "";
               });
  EXPECT_ALL_RANKS_OK(results);
}

// AUTO across processes takes the GPU when every rank sees one;
// RINGO_DEVICE=host keeps them on host memory.
TEST(GpuProcessChoice, AutoTakesTheGpuUnlessRingoDeviceSaysHost) {
  SKIP_WITHOUT_GPU();
  for (const char* device : {"auto", "host"}) {
    ScopedEnv env(
        {{"RINGO_DEVICE", std::string(device)}, {"RINGO_TIMEOUT_MS", std::string("30000")}});
    const int want = std::string(device) == "host" ? -1 : 0;
    auto results = RunRanks(2, RankMode::kProcesses, milliseconds(120000),
                            [&](int rank, int nranks, const ringoUniqueId& id) -> std::string {
                              RankGpu g;
                              std::string error = g.Init(rank, nranks, id, 4096, RINGO_DEVICE_AUTO);
                              if (!error.empty()) return error;
                              int got = -2;
                              ringoCommCuDevice(g.comm(), &got);
                              if (got != want)
                                return "RINGO_DEVICE=" + std::string(device) + ": device " +
                                       std::to_string(got);
                              return "";
                            });
    EXPECT_ALL_RANKS_OK(results) << "RINGO_DEVICE=" << device;
  }
}

#endif  // RINGO_TEST_HAVE_CUDART

}  // namespace
}  // namespace ringo::tests
