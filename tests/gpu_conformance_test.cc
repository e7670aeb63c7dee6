// GPU communicators through the public API: ranks as communicators of one
// process on CUDA device 0 (ringoCommInitAll with a repeated device list),
// one stream each, every collective x datatype x op x count {0, 1, 7,
// chunk-1, chunk, chunk+1, about 2 MiB} with misaligned and in-place
// buffers, both protocols (RINGO_PROTO), default and small slots, compared
// with the host reference (tests/reference.h). Also the buffer checks (host
// pointers on a GPU communicator and the reverse), a single-rank GPU
// communicator from ringoCommInitRankConfig, and abort of a waiting kernel.
// Ranks that are processes (CUDA IPC): tests/gpu_process_test.cc.
// Where no GPU is visible the GPU cases skip with a message; the refusals
// that need no GPU run everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
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

bool GpuVisible() { return base::ProbeCuda().device_count > 0; }

std::string SkipMessage() {
  return "no CUDA device visible (" + base::ProbeCuda().reason +
         "): GPU communicator tests skipped";
}

#define SKIP_WITHOUT_GPU() RINGO_SKIP_WITHOUT_GPU(GpuVisible(), SkipMessage())

// ringoCommInitRankConfig with RINGO_DEVICE_CUDA and `nranks` ranks fails
// with ringoInvalidUsage and a message containing `why`.
void ExpectCudaInitRefused(int nranks, const std::string& why) {
  ringoUniqueId id;
  std::memset(&id, 0, sizeof(id));
  ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
  config.device_kind = RINGO_DEVICE_CUDA;
  ringoComm_t comm = nullptr;
  EXPECT_EQ(ringoCommInitRankConfig(&comm, nranks, id, 0, &config), ringoInvalidUsage);
  const std::string msg = ringoGetLastError(nullptr);
  EXPECT_NE(msg.find(why), std::string::npos) << msg;
}

// ---- Refusals that need no GPU ----

TEST(GpuComm, CudaKindWithoutGpuSaysWhy) {
  if (GpuVisible()) GTEST_SKIP() << "a GPU is visible: the no-GPU refusal is not reachable";
  ExpectCudaInitRefused(1, "no GPU is visible");
}

TEST(GpuComm, InitAllWithoutGpuStaysOnHost) {
  if (GpuVisible()) GTEST_SKIP() << "a GPU is visible: InitAll makes GPU communicators";
  ringoComm_t comms[2] = {nullptr, nullptr};
  const int devlist[2] = {0, 0};
  ASSERT_EQ(ringoCommInitAll(comms, 2, devlist), ringoSuccess) << ringoGetLastError(nullptr);
  for (ringoComm_t c : comms) {
    int device = 0;
    EXPECT_EQ(ringoCommCuDevice(c, &device), ringoSuccess);
    EXPECT_EQ(device, -1);
    EXPECT_EQ(ringoCommDestroy(c), ringoSuccess);
  }
}

#if !RINGO_TEST_HAVE_CUDART

TEST(GpuConformance, Skipped) {
  RINGO_SKIP_WITHOUT_GPU(false, SkipMessage() << " (built without the CUDA toolkit)");
}

#else

void Cuda(cudaError_t err, const char* what) {
  ASSERT_EQ(err, cudaSuccess) << what << ": " << cudaGetErrorString(err);
}
#define CUDA(call) Cuda((call), #call)

// ---- Fixtures ----

// `nranks` GPU communicators on device 0 and a stream each.
class GpuRanks {
 public:
  explicit GpuRanks(int nranks) : comms_(nranks, nullptr), streams_(nranks, nullptr) {
    const std::vector<int> devlist(nranks, 0);
    rc_ = ringoCommInitAll(comms_.data(), nranks, devlist.data());
    if (rc_ != ringoSuccess) error_ = ringoGetLastError(nullptr);
    for (auto& s : streams_) cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  }
  ~GpuRanks() {
    for (ringoComm_t c : comms_) {
      if (c != nullptr) ringoCommDestroy(c);
    }
    for (auto s : streams_) cudaStreamDestroy(s);
  }
  bool ok() const { return rc_ == ringoSuccess; }
  const std::string& error() const { return error_; }
  int size() const { return static_cast<int>(comms_.size()); }
  ringoComm_t comm(int r) const { return comms_[r]; }
  cudaStream_t stream(int r) const { return streams_[r]; }

 private:
  ringoResult_t rc_ = ringoSuccess;
  std::string error_;
  std::vector<ringoComm_t> comms_;
  std::vector<cudaStream_t> streams_;
};

constexpr size_t kPad = 256;  // guard bytes around every output
constexpr unsigned char kSentinel = GuardedBuffer::kSentinel;  // what CheckOutput expects untouched

// Per-rank device buffers large enough for every case of a sweep.
class DeviceBuffers {
 public:
  DeviceBuffers(int nranks, size_t bytes) : bytes_(bytes + 2 * kPad + 64) {
    for (int r = 0; r < nranks; ++r) {
      void* s = nullptr;
      void* d = nullptr;
      cudaMalloc(&s, bytes_);
      cudaMalloc(&d, bytes_);
      send_.push_back(static_cast<unsigned char*>(s));
      recv_.push_back(static_cast<unsigned char*>(d));
    }
  }
  ~DeviceBuffers() {
    for (auto* p : send_) cudaFree(p);
    for (auto* p : recv_) cudaFree(p);
  }
  unsigned char* send(int r) const { return send_[r]; }
  unsigned char* recv(int r) const { return recv_[r]; }

 private:
  size_t bytes_;
  std::vector<unsigned char*> send_;
  std::vector<unsigned char*> recv_;
};

// Runs `c` on every rank (buffers offset by send_off / recv_off elements
// from a 256-byte boundary) and returns "" or what went wrong.
std::string RunGpuCase(const GpuRanks& ranks, const DeviceBuffers& buf, const Case& c, int send_off,
                       int recv_off) {
  const int n = ranks.size();
  const size_t es = DataTypeSize(c.dtype);
  const Expected expected = BuildExpected(c);
  const size_t send_bytes = SendElems(c) * es;
  // The recv buffer as ringo.h lays it out (in place: the larger of the two).
  const size_t recv_bytes = (c.in_place ? InPlaceBufferElems(c) : RecvElems(c)) * es;
  std::vector<std::vector<unsigned char> > inputs(n);
  std::vector<unsigned char*> recv_base(n);
  std::vector<const void*> send_ptr(n);
  std::vector<void*> recv_ptr(n);
  for (int r = 0; r < n; ++r) {
    inputs[r].resize(send_bytes);
    FillInput(c.dtype, c.op, c.seed, r, inputs[r].data(), SendElems(c));
    unsigned char* rb = buf.recv(r) + kPad + recv_off * es;
    recv_base[r] = rb;
    if (cudaMemset(buf.recv(r), kSentinel, kPad + recv_off * es + recv_bytes + kPad) != cudaSuccess)
      return "memset";
    unsigned char* sp = buf.send(r) + kPad + send_off * es;
    unsigned char* rp = rb;
    if (c.in_place) {
      sp = rb + InPlaceSendOffset(c, r) * es;
      rp = rb + InPlaceRecvOffset(c, r) * es;
    }
    const bool copy_input = !(c.in_place && c.collective == Collective::kBroadcast && r != c.root);
    if (copy_input && send_bytes > 0 &&
        cudaMemcpy(sp, inputs[r].data(), send_bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
      return "memcpy";
    }
    send_ptr[r] = sp;
    recv_ptr[r] = rp;
  }
  // The memsets and copies ran on the legacy stream (a copy from pageable
  // memory may still be in flight when cudaMemcpy returns), which the ranks'
  // non-blocking streams do not wait for.
  if (cudaDeviceSynchronize() != cudaSuccess) return "synchronising after the setup";
  for (int r = 0; r < n; ++r) {
    const ringoResult_t rc = CallCollective(c, send_ptr[r], recv_ptr[r], ranks.comm(r), ranks.stream(r));
    if (rc != ringoSuccess) {
      // The ranks that launched wait for this one: abort them all (the caller drops the set).
      return c.Describe() + " rank " + std::to_string(r) + ": returned " + ResultName(rc) + ": " +
             ringoGetLastError(ranks.comm(r));
    }
  }
  std::string problems;
  for (int r = 0; r < n; ++r) {
    const cudaError_t err = cudaStreamSynchronize(ranks.stream(r));
    if (err != cudaSuccess)
      problems += "rank " + std::to_string(r) + " stream: " + cudaGetErrorString(err) + "; ";
    ringoResult_t async = ringoInternalError;
    ringoCommGetAsyncError(ranks.comm(r), &async);
    if (async != ringoSuccess) {
      problems += "rank " + std::to_string(r) + " async error " + ResultName(async) + ": " +
                  ringoGetLastError(ranks.comm(r)) + "; ";
    }
  }
  if (!problems.empty()) return c.Describe() + ": " + problems;
  for (int r = 0; r < n; ++r) {
    const size_t lead = kPad + recv_off * es;
    std::vector<unsigned char> host(lead + recv_bytes + kPad);
    if (cudaMemcpy(host.data(), buf.recv(r), host.size(), cudaMemcpyDeviceToHost) != cudaSuccess)
      return "copy back";
    for (size_t b = 0; b < host.size(); ++b) {
      if (b >= lead && b < lead + recv_bytes) continue;
      if (host[b] != kSentinel) {
        problems += "rank " + std::to_string(r) + " wrote guard byte " + std::to_string(b) + "; ";
        break;
      }
    }
    const unsigned char* out = host.data() + lead + (c.in_place ? InPlaceRecvOffset(c, r) * es : 0);
    problems += CheckOutput(c, expected, r, out, inputs[r].data());
    if (!problems.empty()) return c.Describe() + " rank " + std::to_string(r) + ": " + problems;
  }
  return "";
}

struct Sweep {
  const char* proto;       // RINGO_PROTO
  const char* slot_bytes;  // RINGO_SLOT_BYTES, nullptr: the planner's
};

class GpuConformance : public ::testing::TestWithParam<std::tuple<Sweep, int> > {};

TEST_P(GpuConformance, EveryCollectiveDatatypeOpAndCount) {
  SKIP_WITHOUT_GPU();
  const Sweep sweep = std::get<0>(GetParam());
  const int n = std::get<1>(GetParam());
  ScopedEnv env({{"RINGO_PROTO", std::string(sweep.proto)},
                 {"RINGO_SLOT_BYTES",
                  sweep.slot_bytes ? std::optional<std::string>(sweep.slot_bytes) : std::nullopt},
                 {"RINGO_TIMEOUT_MS", std::string("20000")}});
  const size_t kBigBytes = 2 << 20;
  GpuRanks ranks(n);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  for (int r = 0; r < n; ++r) {
    int device = -1;
    ASSERT_EQ(ringoCommCuDevice(ranks.comm(r), &device), ringoSuccess);
    ASSERT_EQ(device, 0);
  }
  DeviceBuffers buf(n, kBigBytes * n + 4096);
  int index = 0;
  int failures = 0;
  for (Collective coll : kAllCollectives) {
    for (ringoDataType_t dt : kAllDataTypes) {
      const size_t es = DataTypeSize(dt);
      const size_t chunk = ChunkElems(dt, n);
      std::vector<size_t> counts = {0, 1, 7, chunk - 1, chunk, chunk + 1, kBigBytes / es / n + 3};
      std::sort(counts.begin(), counts.end());
      counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
      for (ringoRedOp_t op : kAllOps) {
        if (!HasOp(coll) && op != ringoSum) continue;
        for (size_t count : counts) {
          Case c;
          c.collective = coll;
          c.dtype = dt;
          c.op = op;
          c.nranks = n;
          c.count = count;
          c.in_place = index % 3 == 2;
          c.root = static_cast<int>(count % n);
          c.seed = static_cast<uint32_t>(index);
          const int send_off = index % 3,
                    recv_off = (index + 1) % 3;  // elements past a 256-byte boundary
          ++index;
          const std::string problem = RunGpuCase(ranks, buf, c, send_off, recv_off);
          if (!problem.empty()) {
            ADD_FAILURE() << "proto " << sweep.proto << ": " << problem;
            // A failed rank leaves the ring out of step: stop this set.
            if (++failures >= 5 || problem.find("returned") != std::string::npos ||
                problem.find("async") != std::string::npos) {
              return;
            }
          }
        }
      }
    }
  }
}

constexpr Sweep kSweeps[] = {
    {"simple", nullptr}, {"ll", nullptr}, {"simple", "1024"}, {"ll", "1024"}};

INSTANTIATE_TEST_SUITE_P(Sweep, GpuConformance,
                         ::testing::Combine(::testing::ValuesIn(kSweeps),
                                            ::testing::Values(1, 2, 3, 4, 8)),
                         [](const ::testing::TestParamInfo<GpuConformance::ParamType>& info) {
                           const Sweep s = std::get<0>(info.param);
                           return std::string(s.proto) +
                                  (s.slot_bytes ? std::string("_slot") + s.slot_bytes : "") + "_" +
                                  std::to_string(std::get<1>(info.param)) + "ranks";
                         });

// ---- Buffer checks and lifecycle ----

TEST(GpuComm, HostPointersOnGpuCommunicatorAreRejected) {
  SKIP_WITHOUT_GPU();
  GpuRanks ranks(2);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  std::vector<float> host(16, 1.0f);
  void* dev = nullptr;
  CUDA(cudaMalloc(&dev, 64));
  EXPECT_EQ(
      ringoAllReduce(host.data(), dev, 16, ringoFloat32, ringoSum, ranks.comm(0), ranks.stream(0)),
      ringoInvalidArgument);
  std::string msg = ringoGetLastError(ranks.comm(0));
  EXPECT_NE(msg.find("sendbuff is host memory"), std::string::npos) << msg;
  EXPECT_EQ(
      ringoAllReduce(dev, host.data(), 16, ringoFloat32, ringoSum, ranks.comm(0), ranks.stream(0)),
      ringoInvalidArgument);
  msg = ringoGetLastError(ranks.comm(0));
  EXPECT_NE(msg.find("recvbuff is host memory"), std::string::npos) << msg;
  // The rejected calls left the communicators usable.
  ringoResult_t async = ringoInternalError;
  EXPECT_EQ(ringoCommGetAsyncError(ranks.comm(0), &async), ringoSuccess);
  EXPECT_EQ(async, ringoSuccess);
  CUDA(cudaFree(dev));
}

TEST(GpuComm, DevicePointersOnHostCommunicatorAreRejected) {
  SKIP_WITHOUT_GPU();
  ringoUniqueId id;
  ASSERT_EQ(ringoGetUniqueId(&id), ringoSuccess);
  ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
  config.device_kind = RINGO_DEVICE_HOST;
  ringoComm_t comm = nullptr;
  ASSERT_EQ(ringoCommInitRankConfig(&comm, 1, id, 0, &config), ringoSuccess)
      << ringoGetLastError(nullptr);
  void* dev = nullptr;
  CUDA(cudaMalloc(&dev, 64));
  std::vector<float> host(16, 1.0f);
  EXPECT_EQ(ringoAllReduce(dev, host.data(), 16, ringoFloat32, ringoSum, comm, nullptr),
            ringoInvalidArgument);
  const std::string msg = ringoGetLastError(comm);
  EXPECT_NE(msg.find("GPU memory"), std::string::npos) << msg;
  EXPECT_EQ(ringoCommDestroy(comm), ringoSuccess);
  CUDA(cudaFree(dev));
}

TEST(GpuComm, SingleRankFromInitRankUsesTheCurrentDevice) {
  SKIP_WITHOUT_GPU();
  CUDA(cudaSetDevice(0));
  ringoUniqueId id;
  ASSERT_EQ(ringoGetUniqueId(&id), ringoSuccess);
  ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
  config.device_kind = RINGO_DEVICE_CUDA;
  ringoComm_t comm = nullptr;
  ASSERT_EQ(ringoCommInitRankConfig(&comm, 1, id, 0, &config), ringoSuccess)
      << ringoGetLastError(nullptr);
  int device = -1;
  EXPECT_EQ(ringoCommCuDevice(comm, &device), ringoSuccess);
  EXPECT_EQ(device, 0);
  std::vector<int32_t> in(1000), out(1000, 0);
  for (int i = 0; i < 1000; ++i) in[i] = i * 3 - 7;
  void* d = nullptr;
  CUDA(cudaMalloc(&d, 8000));
  CUDA(cudaMemcpy(d, in.data(), 4000, cudaMemcpyHostToDevice));
  ASSERT_EQ(
      ringoAllReduce(d, static_cast<char*>(d) + 4000, 1000, ringoInt32, ringoSum, comm, nullptr),
      ringoSuccess)
      << ringoGetLastError(comm);
  CUDA(cudaDeviceSynchronize());
  CUDA(cudaMemcpy(out.data(), static_cast<char*>(d) + 4000, 4000, cudaMemcpyDeviceToHost));
  EXPECT_EQ(out, in);
  EXPECT_EQ(ringoCommDestroy(comm), ringoSuccess);
  CUDA(cudaFree(d));
}

// Ranks of one process on one GPU refuse the legacy default stream and
// blocking streams (their kernels would synchronise through the legacy
// stream), with a message, and stay usable.
TEST(GpuComm, RanksSharingAGpuRefuseLegacyAndBlockingStreams) {
  SKIP_WITHOUT_GPU();
  GpuRanks ranks(2);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  void* dev = nullptr;
  CUDA(cudaMalloc(&dev, 64));
  cudaStream_t blocking = nullptr;
  CUDA(cudaStreamCreate(&blocking));
  for (cudaStream_t s :
       {static_cast<cudaStream_t>(nullptr), cudaStreamLegacy, cudaStreamPerThread, blocking}) {
    EXPECT_EQ(ringoAllReduce(dev, dev, 16, ringoFloat32, ringoSum, ranks.comm(0), s),
              ringoInvalidUsage);
    const std::string msg = ringoGetLastError(ranks.comm(0));
    EXPECT_NE(msg.find("cudaStreamNonBlocking"), std::string::npos) << msg;
  }
  ringoResult_t async = ringoInternalError;
  EXPECT_EQ(ringoCommGetAsyncError(ranks.comm(0), &async), ringoSuccess);
  EXPECT_EQ(async, ringoSuccess);
  CUDA(cudaStreamDestroy(blocking));
  CUDA(cudaFree(dev));
}

// Collectives of one communicator on different streams run in call order:
// each rank alternates two streams without any synchronisation between the
// calls, and each in-place all-reduce reads the previous one's output (x,
// then 2x, 4x, ... on 2 ranks). Two ring kernels of one rank running at once
// would corrupt the FIFO counters (a hang or a timeout) or read stale data.
TEST(GpuComm, CallsOnDifferentStreamsRunInCallOrder) {
  SKIP_WITHOUT_GPU();
  ScopedEnv env({{"RINGO_TIMEOUT_MS", std::string("20000")}});
  constexpr int kRanks = 2;
  constexpr int kCalls = 8;
  constexpr size_t kCount = (4 << 20) / sizeof(float);  // Simple, several channels
  GpuRanks ranks(kRanks);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  std::vector<cudaStream_t> other(kRanks, nullptr);
  std::vector<float*> buf(kRanks, nullptr);
  std::vector<float> init(kCount);
  for (size_t i = 0; i < kCount; ++i) init[i] = static_cast<float>(i % 97) - 48.0f;
  for (int r = 0; r < kRanks; ++r) {
    CUDA(cudaStreamCreateWithFlags(&other[r], cudaStreamNonBlocking));
    CUDA(cudaMalloc(reinterpret_cast<void**>(&buf[r]), kCount * sizeof(float)));
    CUDA(cudaMemcpy(buf[r], init.data(), kCount * sizeof(float), cudaMemcpyHostToDevice));
  }
  CUDA(cudaDeviceSynchronize());
  for (int call = 0; call < kCalls; ++call) {
    for (int r = 0; r < kRanks; ++r) {
      const cudaStream_t s = call % 2 == 0 ? ranks.stream(r) : other[r];
      ASSERT_EQ(ringoAllReduce(buf[r], buf[r], kCount, ringoFloat32, ringoSum, ranks.comm(r), s),
                ringoSuccess)
          << ringoGetLastError(ranks.comm(r));
    }
  }
  for (int r = 0; r < kRanks; ++r) {
    CUDA(cudaStreamSynchronize(ranks.stream(r)));
    CUDA(cudaStreamSynchronize(other[r]));
    ringoResult_t async = ringoInternalError;
    ringoCommGetAsyncError(ranks.comm(r), &async);
    ASSERT_EQ(async, ringoSuccess) << ringoGetLastError(ranks.comm(r));
  }
  std::vector<float> got(kCount);
  for (int r = 0; r < kRanks; ++r) {
    CUDA(cudaMemcpy(got.data(), buf[r], kCount * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(got[i], init[i] * static_cast<float>(1 << kCalls))
          << "rank " << r << " element " << i;
    }
    CUDA(cudaStreamDestroy(other[r]));
    CUDA(cudaFree(buf[r]));
  }
}

// Rank 0 enqueues an all-reduce its peer never joins; aborting it stops the
// waiting kernel well before the timeout.
TEST(GpuComm, AbortStopsAWaitingKernel) {
  SKIP_WITHOUT_GPU();
  ScopedEnv env({{"RINGO_TIMEOUT_MS", std::string("60000")}});
  ringoComm_t comms[2] = {nullptr, nullptr};
  const int devlist[2] = {0, 0};
  ASSERT_EQ(ringoCommInitAll(comms, 2, devlist), ringoSuccess) << ringoGetLastError(nullptr);
  cudaStream_t stream = nullptr;
  CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void* d = nullptr;
  CUDA(cudaMalloc(&d, 1 << 20));
  ASSERT_EQ(ringoAllReduce(d, d, 1 << 18, ringoFloat32, ringoSum, comms[0], stream), ringoSuccess)
      << ringoGetLastError(comms[0]);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ringoCommAbort(comms[0]), ringoSuccess);  // returns once the kernel has stopped
  CUDA(cudaStreamSynchronize(stream));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_EQ(ringoCommDestroy(comms[1]), ringoSuccess);
  CUDA(cudaStreamDestroy(stream));
  CUDA(cudaFree(d));
}

#endif  // RINGO_TEST_HAVE_CUDART

}  // namespace
}  // namespace ringo::tests
