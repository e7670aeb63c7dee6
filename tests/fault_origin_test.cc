// Every fault names its culprit on every rank: when a rank dies, stops, or
// never arrives, every survivor's error (not only the neighbours') names
// that rank, the collective and its sequence number; a dead process is
// noticed within a second whether or not its parent has reaped it. Ranks
// are forked processes.
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "ringo/ringo.h"
#include "tests/api_test_util.h"
#include "tests/harness.h"

namespace ringo::tests {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kDeadline{60000};

int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::string InitHost(int nranks, const ringoUniqueId& id, int rank, ringoComm_t* comm) {
  ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
  config.device_kind = RINGO_DEVICE_HOST;
  ringoResult_t rc = ringoCommInitRankConfig(comm, nranks, id, rank, &config);
  if (rc == ringoSuccess) return "";
  return "init returned " + ResultName(rc) + ": " + ringoGetLastError(nullptr);
}

// Memory every forked rank shares with the test (made before the fork).
struct Shared {
  std::atomic<int64_t> killed_at_ns{0};
};

Shared* MapShared() {
  void* p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : new (p) Shared();
}

// What a survivor's error must say about the victim.
std::string CheckNamesVictim(int rank, int victim, ringoResult_t rc, const std::string& msg, ringoComm_t comm) {
  std::fprintf(stderr, "rank %d: %s: %s\n", rank, ResultName(rc).c_str(), msg.c_str());
  std::string problems;
  if (rc != ringoRemoteError && rc != ringoTimeout) problems += "returned " + ResultName(rc) + "; ";
  const std::string v = "rank " + std::to_string(victim);
  const bool names = msg.find("failure started at " + v) != std::string::npos ||
                     msg.find("peer " + v + " ") != std::string::npos;
  if (!names) problems += "the error does not name " + v + " as the origin: " + msg + "; ";
  if (msg.find("AllReduce #") == std::string::npos && msg.find("collective #") == std::string::npos) {
    problems += "the error names no collective and sequence number: " + msg + "; ";
  }
  ringoResult_t async = ringoSuccess;
  if (ringoCommGetAsyncError(comm, &async) != ringoSuccess || async != rc) {
    problems += "ringoCommGetAsyncError reports " + ResultName(async) + "; ";
  }
  return problems;
}

struct VictimCase {
  const char* name;
  const char* algo;  // RINGO_ALGO
  size_t count;
  int nranks;
  int victim;
  int signo;  // SIGKILL or SIGSTOP
};

class FaultOrigin : public ::testing::TestWithParam<VictimCase> {};

// The victim runs collectives and signals itself mid-stream; every survivor
// runs collectives until one fails and checks what it says.
TEST_P(FaultOrigin, EverySurvivorNamesTheVictim) {
  const VictimCase p = GetParam();
  ScopedEnv env({{"RINGO_ALGO", p.algo}, {"RINGO_TIMEOUT_MS", "3000"}, {"RINGO_COMM_ID", std::nullopt}});
  HarnessOptions options;
  if (p.signo == SIGSTOP) options.expendable_ranks = {p.victim};
  auto results = RunRanks(
      p.nranks, RankMode::kProcesses, kDeadline,
      [&](int rank, int nranks, const ringoUniqueId& id) -> std::string {
        ringoComm_t comm = nullptr;
        std::string problem = InitHost(nranks, id, rank, &comm);
        if (!problem.empty()) return problem;
        std::vector<float> in(p.count, 1.0f), out(p.count);
        if (rank == p.victim) {
          SignalSelfAfter(milliseconds(200), p.signo);
          while (true) ringoAllReduce(in.data(), out.data(), p.count, ringoFloat32, ringoSum, comm, nullptr);
        }
        const Clock::time_point start = Clock::now();
        while (std::chrono::duration<double>(Clock::now() - start).count() < 30) {
          ringoResult_t rc = ringoAllReduce(in.data(), out.data(), p.count, ringoFloat32, ringoSum, comm, nullptr);
          if (rc == ringoSuccess) continue;
          std::string problems = CheckNamesVictim(rank, p.victim, rc, ringoGetLastError(comm), comm);
          ringoCommAbort(comm);
          return problems;
        }
        return "no error within 30 s";
      },
      options);
  const RankExpectation victim =
      p.signo == SIGSTOP ? RankExpectation::Expendable() : RankExpectation::KilledBy(p.signo);
  EXPECT_TRUE(RanksMatch(results, {{p.victim, victim}}));
}

INSTANTIATE_TEST_SUITE_P(
    Faults, FaultOrigin,
    ::testing::Values(
        // Ring 0 -> 1 -> 2 -> 3 -> 0: rank 0 is no neighbour of rank 2.
        VictimCase{"KilledNonNeighbourRing4", "ring", 64 << 10, 4, 2, SIGKILL},
        VictimCase{"KilledNeighbourRing3", "ring", 64 << 10, 3, 1, SIGKILL},
        VictimCase{"KilledOneShot4", "oneshot", 16, 4, 2, SIGKILL},
        VictimCase{"StoppedNonNeighbourRing4", "ring", 64 << 10, 4, 2, SIGSTOP},
        VictimCase{"StoppedNeighbourRing3", "ring", 64 << 10, 3, 1, SIGSTOP},
        VictimCase{"StoppedOneShot4", "oneshot", 16, 4, 2, SIGSTOP}),
    [](const ::testing::TestParamInfo<VictimCase>& info) { return std::string(info.param.name); });

// A rank killed while its parent does not reap it (a zombie) is dead: the
// survivors notice within a second, not at the timeout.
TEST(FaultOrigin, UnreapedDeadRankIsNoticedWithinASecond) {
  for (const char* algo : {"ring", "oneshot"}) {
    Shared* shared = MapShared();
    ASSERT_NE(shared, nullptr);
    ScopedEnv env({{"RINGO_ALGO", algo}, {"RINGO_TIMEOUT_MS", "60000"}, {"RINGO_COMM_ID", std::nullopt}});
    constexpr int kVictim = 1;
    auto results = RunRanks(3, RankMode::kProcesses, kDeadline, [&](int rank, int nranks, const ringoUniqueId& id) {
      const size_t count = std::string(algo) == "ring" ? 64 << 10 : 16;
      if (rank == kVictim) {
        // The rank runs in a child this process never reaps while the
        // others wait: once killed, it stays a zombie.
        const pid_t child = fork();
        if (child == 0) {
          ringoComm_t comm = nullptr;
          if (!InitHost(nranks, id, rank, &comm).empty()) _exit(1);
          std::vector<float> in(count, 1.0f), out(count);
          for (int i = 0; i < 50; ++i) ringoAllReduce(in.data(), out.data(), count, ringoFloat32, ringoSum, comm, nullptr);
          shared->killed_at_ns.store(MonotonicNs());
          kill(getpid(), SIGKILL);
        }
        std::this_thread::sleep_for(milliseconds(8000));
        waitpid(child, nullptr, 0);
        return std::string();
      }
      ringoComm_t comm = nullptr;
      std::string problem = InitHost(nranks, id, rank, &comm);
      if (!problem.empty()) return problem;
      std::vector<float> in(count, 1.0f), out(count);
      while (true) {
        ringoResult_t rc = ringoAllReduce(in.data(), out.data(), count, ringoFloat32, ringoSum, comm, nullptr);
        if (rc == ringoSuccess) continue;
        const double seconds = (MonotonicNs() - shared->killed_at_ns.load()) / 1e9;
        std::string problems = CheckNamesVictim(rank, kVictim, rc, ringoGetLastError(comm), comm);
        if (shared->killed_at_ns.load() == 0) problems += "failed before the victim died; ";
        if (seconds > 1.0) problems += "noticed " + std::to_string(seconds) + " s after the death; ";
        ringoCommAbort(comm);
        return problems;
      }
    });
    EXPECT_ALL_RANKS_OK(results) << algo;
    munmap(shared, sizeof(Shared));
  }
}

// A rank that never arrives at init is named on every rank that did.
TEST(FaultOrigin, MissingRankAtInitIsNamedOnEveryRank) {
  ScopedEnv env({{"RINGO_TIMEOUT_MS", "1500"}, {"RINGO_COMM_ID", std::nullopt}});
  for (int trial = 0; trial < 4; ++trial) {
    constexpr int kMissing = 2;
    auto results = RunRanks(4, RankMode::kProcesses, kDeadline, [&](int rank, int nranks, const ringoUniqueId& id) {
      if (rank == kMissing) return std::string();
      ringoComm_t comm = nullptr;
      ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
      config.device_kind = RINGO_DEVICE_HOST;
      const ringoResult_t rc = ringoCommInitRankConfig(&comm, nranks, id, rank, &config);
      const std::string msg = ringoGetLastError(nullptr);
      std::fprintf(stderr, "rank %d: %s: %s\n", rank, ResultName(rc).c_str(), msg.c_str());
      if (rc == ringoSuccess) return std::string("init succeeded without rank 2");
      return NamesAbsentRank(msg, kMissing);
    });
    EXPECT_ALL_RANKS_OK(results) << "trial " << trial;
  }
}

// A rank that arrives after the root gave up learns why, instead of finding
// nobody listening.
TEST(FaultOrigin, LateRankLearnsWhyTheRootGaveUp) {
  // The root gives up after RINGO_TIMEOUT_MS and lingers as long again.
  ScopedEnv env({{"RINGO_TIMEOUT_MS", "2000"}, {"RINGO_COMM_ID", std::nullopt}});
  Flag gave_up;  // rank 0 heard the root give up
  auto results = RunRanks(3, RankMode::kProcesses, kDeadline, [&](int rank, int nranks, const ringoUniqueId& id) {
    // Past the root's deadline, while it lingers.
    if (rank == 2 && !gave_up.Wait(milliseconds(30000))) return std::string("rank 0's init did not fail");
    ringoComm_t comm = nullptr;
    ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
    config.device_kind = RINGO_DEVICE_HOST;
    const ringoResult_t rc = ringoCommInitRankConfig(&comm, nranks, id, rank, &config);
    if (rank == 0) gave_up.Raise();
    const std::string msg = ringoGetLastError(nullptr);
    std::fprintf(stderr, "rank %d: %s: %s\n", rank, ResultName(rc).c_str(), msg.c_str());
    if (rc == ringoSuccess) return std::string("init succeeded");
    return NamesAbsentRank(msg, 2);
  });
  EXPECT_ALL_RANKS_OK(results);
}

}  // namespace
}  // namespace ringo::tests
