// The direct AllReduce (kernels/direct_executor.h) as users reach it: buffers
// from ringoMemAlloc in forked ranks, ranks as threads of one process, and
// the cases where it must not run (heap buffers across processes, a mix,
// small messages, RINGO_ALGO=ring). Whether it ran is read from the INFO log
// each rank writes once ("run directly" / "through the ring"), the line
// a user sees with RINGO_DEBUG=INFO. Also ringoMemAlloc's argument checks.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ringo/ringo.h"
#include "tests/harness.h"

namespace ringo::tests {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kDeadline{60000};
constexpr char kDirectLine[] = "run directly on every rank's buffers";
constexpr char kRingLine[] = "collective through the ring: ";

enum class Alloc { kHeap, kRingo };

struct DirectCase {
  int nranks = 2;
  size_t count = size_t{1} << 20;  // floats: 4 MiB, past the planner's direct threshold
  bool in_place = false;
  size_t offset_bytes = 0;  // buffers start this far into their allocation
  std::vector<Alloc> alloc;  // per rank; empty: ringoMemAlloc everywhere
  const char* algo = nullptr;  // RINGO_ALGO; nullptr: unset
  bool expect_direct = true;
  bool expect_ring_line = false;
};

// One buffer of `bytes` at `offset` into an allocation of the given kind.
class Buf {
 public:
  Buf(Alloc kind, size_t bytes, size_t offset) : kind_(kind) {
    const size_t total = bytes + offset + 64;
    if (kind == Alloc::kRingo) {
      if (ringoMemAlloc(&base_, total) != ringoSuccess) base_ = nullptr;
    } else {
      base_ = std::malloc(total);
    }
    data_ = base_ == nullptr ? nullptr : static_cast<char*>(base_) + offset;
  }
  ~Buf() {
    if (kind_ == Alloc::kRingo && base_ != nullptr) ringoMemFree(base_);
    if (kind_ == Alloc::kHeap) std::free(base_);
  }
  float* data() const { return reinterpret_cast<float*>(data_); }

 private:
  Alloc kind_;
  void* base_ = nullptr;
  char* data_ = nullptr;
};

float Input(int rank, size_t i) { return static_cast<float>((rank + 1) * (i % 7 + 1)); }

// Runs the case's AllReduce twice (a second call reuses the mapped regions)
// and checks every element; "" when right.
std::string RunOnComm(const DirectCase& c, int rank, ringoComm_t comm) {
  const Alloc kind = c.alloc.empty() ? Alloc::kRingo : c.alloc[rank];
  Buf send(kind, c.count * sizeof(float), c.offset_bytes);
  Buf recv(kind, c.count * sizeof(float), c.offset_bytes);
  if (send.data() == nullptr || recv.data() == nullptr) {
    return std::string("allocation failed: ") + ringoGetLastError(nullptr);
  }
  const float ranks_sum = static_cast<float>(c.nranks * (c.nranks + 1) / 2);
  for (int round = 0; round < 2; ++round) {
    float* in = c.in_place ? recv.data() : send.data();
    for (size_t i = 0; i < c.count; ++i) in[i] = Input(rank, i) + static_cast<float>(round);
    ringoResult_t rc = ringoAllReduce(in, recv.data(), c.count, ringoFloat32, ringoSum, comm, nullptr);
    if (rc != ringoSuccess) return std::string("ringoAllReduce: ") + ringoGetLastError(comm);
    for (size_t i = 0; i < c.count; ++i) {
      const float want = ranks_sum * static_cast<float>(i % 7 + 1) + static_cast<float>(round * c.nranks);
      if (recv.data()[i] != want) {
        return "round " + std::to_string(round) + " element " + std::to_string(i) + ": " +
               std::to_string(recv.data()[i]) + ", want " + std::to_string(want);
      }
    }
  }
  return "";
}

// What the rank logged at INFO level, with stderr sent to a file meanwhile.
class CapturedStderr {
 public:
  CapturedStderr() {
    const char* dir = std::getenv("TEST_TMPDIR");
    path_ = std::string(dir != nullptr ? dir : "/tmp") + "/ringo-direct-log-XXXXXX";
    fd_ = mkstemp(path_.data());
    std::fflush(stderr);
    saved_ = dup(2);
    dup2(fd_, 2);
  }
  ~CapturedStderr() {
    Restore();
    close(fd_);
    unlink(path_.c_str());
  }
  std::string Text() {
    Restore();
    std::ifstream in(path_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  void Restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    saved_ = -1;
  }
  std::string path_;
  int fd_ = -1;
  int saved_ = -1;
};

std::string CheckLog(const DirectCase& c, const std::string& log) {
  const bool direct = log.find(kDirectLine) != std::string::npos;
  const bool ring = log.find(kRingLine) != std::string::npos;
  if (direct != c.expect_direct) {
    return std::string("the direct path ") + (direct ? "ran" : "did not run") + "; log:\n" + log;
  }
  if (ring != c.expect_ring_line) {
    return std::string("the ring fallback was ") + (ring ? "" : "not ") + "reported; log:\n" + log;
  }
  return "";
}

// Forked ranks, each with a host communicator and its INFO log captured:
// `body` runs on the communicator (then destroyed), `check_log` reads what
// the rank logged if the body passed. `algo`: RINGO_ALGO, nullptr unset.
void RunLoggedProcesses(int nranks, const char* algo,
                        const std::function<std::string(int rank, ringoComm_t comm)>& body,
                        const std::function<std::string(const std::string& log)>& check_log) {
  auto results = RunRanks(nranks, RankMode::kProcesses, kDeadline,
                          [&](int rank, int n, const ringoUniqueId& id) -> std::string {
                            SetEnvAndReload("RINGO_DEBUG", "INFO");
                            if (algo != nullptr) SetEnvAndReload("RINGO_ALGO", algo);
                            CapturedStderr log;
                            ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
                            config.device_kind = RINGO_DEVICE_HOST;
                            ringoComm_t comm = nullptr;
                            if (ringoCommInitRankConfig(&comm, n, id, rank, &config) != ringoSuccess) {
                              return std::string("init: ") + ringoGetLastError(nullptr);
                            }
                            std::string problem = body(rank, comm);
                            ringoCommDestroy(comm);
                            if (!problem.empty()) return problem;
                            return check_log(log.Text());
                          });
  EXPECT_ALL_RANKS_OK(results);
}

void RunInProcesses(const DirectCase& c) {
  RunLoggedProcesses(
      c.nranks, c.algo, [&](int rank, ringoComm_t comm) { return RunOnComm(c, rank, comm); },
      [&](const std::string& log) { return CheckLog(c, log); });
}

TEST(DirectProcesses, TwoRanksRingoMemAlloc) { RunInProcesses(DirectCase{}); }

TEST(DirectProcesses, FourRanksInPlace) {
  DirectCase c;
  c.nranks = 4;
  c.in_place = true;
  c.count = (size_t{3} << 20) / sizeof(float) + 5;
  RunInProcesses(c);
}

TEST(DirectProcesses, MisalignedInsideARegion) {
  DirectCase c;
  c.nranks = 3;
  c.offset_bytes = 4;  // 4-byte aligned only: the vector loop's unaligned loads and scalar tail
  c.count = 300001;
  RunInProcesses(c);
}

TEST(DirectProcesses, HeapBuffersTakeTheRing) {
  DirectCase c;
  c.alloc = std::vector<Alloc>{Alloc::kHeap, Alloc::kHeap};
  c.expect_direct = false;
  c.expect_ring_line = true;
  RunInProcesses(c);
}

TEST(DirectProcesses, OneHeapRankTakesTheRingForAll) {
  DirectCase c;
  c.nranks = 3;
  c.alloc = std::vector<Alloc>{Alloc::kRingo, Alloc::kHeap, Alloc::kRingo};
  c.expect_direct = false;
  c.expect_ring_line = true;
  RunInProcesses(c);
}

TEST(DirectProcesses, SmallMessagesDoNotTry) {
  DirectCase c;
  c.count = 1000;  // 4 KB: below the planner's direct threshold
  c.expect_direct = false;
  RunInProcesses(c);
}

TEST(DirectProcesses, ForcedForSmallMessages) {
  DirectCase c;
  c.count = 1000;
  c.algo = "direct";
  RunInProcesses(c);
}

TEST(DirectProcesses, RingoAlgoRingDisablesIt) {
  DirectCase c;
  c.algo = "ring";
  c.expect_direct = false;
  RunInProcesses(c);
}

// Broadcast reads only the root's input: heap buffers on the other ranks do
// not keep it off the direct path.
TEST(DirectProcesses, BroadcastNeedsOnlyTheRootsBuffer) {
  const int nranks = 3, root = 2;
  const size_t count = size_t{2} << 20;  // 8 MB of floats: past Broadcast's threshold
  RunLoggedProcesses(
      nranks, nullptr,
      [&](int rank, ringoComm_t comm) -> std::string {
        Buf send(rank == root ? Alloc::kRingo : Alloc::kHeap, count * sizeof(float), 0);
        Buf recv(Alloc::kHeap, count * sizeof(float), 0);
        for (size_t i = 0; i < count; ++i) send.data()[i] = Input(rank, i);
        if (ringoBroadcast(send.data(), recv.data(), count, ringoFloat32, root, comm, nullptr) != ringoSuccess) {
          return std::string("ringoBroadcast: ") + ringoGetLastError(comm);
        }
        for (size_t i = 0; i < count; ++i) {
          if (recv.data()[i] != Input(root, i)) return "element " + std::to_string(i) + " wrong";
        }
        return "";
      },
      [](const std::string& log) -> std::string {
        return log.find(kDirectLine) == std::string::npos ? "not run directly; log:\n" + log : "";
      });
}

// A message the board holds: heap buffers fall back to the one-shot, not the ring.
TEST(DirectProcesses, HeapBuffersOfASmallMessageTakeTheOneShot) {
  DirectCase c;
  c.count = 8192;  // 32 KiB: direct-planned, and it fits the one-shot board
  c.alloc = std::vector<Alloc>{Alloc::kHeap, Alloc::kHeap};
  c.expect_direct = false;
  RunLoggedProcesses(
      c.nranks, nullptr, [&](int rank, ringoComm_t comm) { return RunOnComm(c, rank, comm); },
      [&](const std::string& log) -> std::string {
        if (log.find("collective through the one-shot board: ") == std::string::npos) {
          return "the one-shot fallback was not reported; log:\n" + log;
        }
        return CheckLog(c, log);
      });
}

// After fallbacks the ranks skip direct attempts for a while (all alike),
// then try again: buffers that became shared go direct within a few calls,
// and every result on the way is right.
TEST(DirectProcesses, BackOffThenGoDirectOnceBuffersAreShared) {
  const size_t count = size_t{1} << 16;  // 256 KiB: direct-planned, beyond the board
  RunLoggedProcesses(
      2, nullptr,
      [&](int rank, ringoComm_t comm) -> std::string {
        for (int call = 0; call < 12; ++call) {
          const Alloc kind = call < 3 ? Alloc::kHeap : Alloc::kRingo;  // 3 calls on heap buffers, then shared
          Buf send(kind, count * sizeof(float), 0);
          Buf recv(kind, count * sizeof(float), 0);
          for (size_t i = 0; i < count; ++i) send.data()[i] = Input(rank, i) + static_cast<float>(call);
          if (ringoAllReduce(send.data(), recv.data(), count, ringoFloat32, ringoSum, comm, nullptr) != ringoSuccess) {
            return std::string("ringoAllReduce: ") + ringoGetLastError(comm);
          }
          for (size_t i = 0; i < count; ++i) {
            const float want = 3.0f * static_cast<float>(i % 7 + 1) + 2.0f * static_cast<float>(call);
            if (recv.data()[i] != want) return "call " + std::to_string(call) + " element " + std::to_string(i);
          }
        }
        return "";
      },
      [](const std::string& log) -> std::string {
        if (log.find(kRingLine) == std::string::npos || log.find("back off") == std::string::npos) {
          return "the heap calls' fallback was not reported; log:\n" + log;
        }
        return log.find(kDirectLine) == std::string::npos ? "never went direct; log:\n" + log : "";
      });
}

TEST(DirectThreads, HeapBuffersOfOneProcess) {
  ScopedEnv env({{"RINGO_DEBUG", std::string("INFO")}, {"RINGO_ALGO", std::nullopt}});
  DirectCase c;
  c.nranks = 3;
  c.alloc = std::vector<Alloc>{Alloc::kHeap, Alloc::kHeap, Alloc::kHeap};
  std::vector<ringoComm_t> comms(c.nranks);
  CapturedStderr log;
  ASSERT_EQ(ringoCommInitAll(comms.data(), c.nranks, nullptr), ringoSuccess) << ringoGetLastError(nullptr);
  int device = 0;
  ASSERT_EQ(ringoCommCuDevice(comms[0], &device), ringoSuccess);
  if (device != -1) {
    for (ringoComm_t comm : comms) ringoCommDestroy(comm);
    GTEST_SKIP() << "ringoCommInitAll chose a CUDA device; this test is about host communicators";
  }
  HarnessOptions options;
  options.make_unique_id = false;
  auto results = RunRanks(
      c.nranks, RankMode::kThreads, kDeadline,
      [&](int rank, int, const ringoUniqueId&) { return RunOnComm(c, rank, comms[rank]); }, options);
  for (ringoComm_t comm : comms) ringoCommDestroy(comm);
  EXPECT_ALL_RANKS_OK(results);
  EXPECT_EQ(CheckLog(c, log.Text()), "");
}

TEST(RingoMemAlloc, Arguments) {
  void* p = reinterpret_cast<void*>(1);
  EXPECT_EQ(ringoMemAlloc(nullptr, 64), ringoInvalidArgument);
  EXPECT_EQ(ringoMemAlloc(&p, 0), ringoInvalidArgument);
  EXPECT_EQ(p, nullptr) << "a failed allocation leaves NULL";
  EXPECT_EQ(ringoMemFree(nullptr), ringoInvalidArgument);
  int local = 0;
  EXPECT_EQ(ringoMemFree(&local), ringoInvalidArgument);
  EXPECT_NE(std::string(ringoGetLastError(nullptr)).find("ringoMemAlloc"), std::string::npos)
      << ringoGetLastError(nullptr);

  ASSERT_EQ(ringoMemAlloc(&p, 10000), ringoSuccess) << ringoGetLastError(nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u) << "page-aligned";
  const auto* bytes = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < 10000; ++i) ASSERT_EQ(bytes[i], 0) << "zeroed, byte " << i;
  std::memset(p, 0x5a, 10000);
  EXPECT_EQ(ringoMemFree(p), ringoSuccess);
  EXPECT_EQ(ringoMemFree(p), ringoInvalidArgument) << "a second free is refused";
}

}  // namespace
}  // namespace ringo::tests
