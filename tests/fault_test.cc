// Faults during collectives: a rank killed or stopped mid-collective, and
// ringoCommAbort from another thread while a collective is blocked. The
// survivors must get an error (ringoRemoteError or ringoTimeout) within
// RINGO_TIMEOUT_MS, never hang; abort must return promptly. Ranks are forked
// processes so that hangs can be killed and reported.
#include <signal.h>

#include <chrono>
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

constexpr int kTimeoutMs = 3000;  // RINGO_TIMEOUT_MS in these tests
// A survivor's failing call may wait the whole timeout; the slack covers a
// loaded 2-core machine.
constexpr double kMaxFailingCallSeconds = kTimeoutMs / 1000.0 + 4.0;
constexpr milliseconds kDeadline{60000};

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string InitHost(int nranks, const ringoUniqueId& id, int rank, ringoComm_t* comm) {
  ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
  config.device_kind = RINGO_DEVICE_HOST;
  ringoResult_t rc = ringoCommInitRankConfig(comm, nranks, id, rank, &config);
  if (rc == ringoSuccess) return "";
  return "init returned " + ResultName(rc) + ": " + ringoGetLastError(nullptr);
}

// A survivor: AllReduces until one fails. "" if the failure is a peer error
// that came within the timeout.
std::string SurviveUntilError(ringoComm_t comm, size_t count) {
  std::vector<float> in(count, 1.0f), out(count);
  const Clock::time_point start = Clock::now();
  while (SecondsSince(start) < 40) {
    const Clock::time_point call = Clock::now();
    ringoResult_t rc =
        ringoAllReduce(in.data(), out.data(), count, ringoFloat32, ringoSum, comm, nullptr);
    if (rc == ringoSuccess) continue;
    const double seconds = SecondsSince(call);
    std::string problems;
    if (rc != ringoRemoteError && rc != ringoTimeout) {
      problems += "failed with " + ResultName(rc) + ", want ringoRemoteError or ringoTimeout; ";
    }
    if (seconds > kMaxFailingCallSeconds) {
      problems += "the failing call took " + std::to_string(seconds) + " s; ";
    }
    if (std::string(ringoGetLastError(comm)).empty()) problems += "no ringoGetLastError; ";
    const Clock::time_point abort_start = Clock::now();
    ringoCommAbort(comm);
    if (SecondsSince(abort_start) > 5) problems += "ringoCommAbort after the error was slow; ";
    return problems;
  }
  return "no error within 40 s although a peer is gone";
}

// The victim: a few good collectives, then a signal to itself while in the
// middle of AllReduces it never stops issuing.
[[noreturn]] void BeVictim(ringoComm_t comm, size_t count, int signo, milliseconds delay) {
  std::vector<float> in(count, 1.0f), out(count);
  SignalSelfAfter(delay, signo);
  while (true) {
    ringoAllReduce(in.data(), out.data(), count, ringoFloat32, ringoSum, comm, nullptr);
  }
}

struct FaultParam {
  const char* name;
  int signo;
  int delay_ms;  // after the warm-up collectives
  size_t count;  // elements per AllReduce
};

class PeerFault : public ::testing::TestWithParam<FaultParam> {};

TEST_P(PeerFault, SurvivorsGetAnErrorWithinTimeout) {
  const FaultParam p = GetParam();
  constexpr int kRanks = 3;
  constexpr int kVictim = 2;
  ScopedEnv env(
      {{"RINGO_TIMEOUT_MS", std::to_string(kTimeoutMs)}, {"RINGO_COMM_ID", std::nullopt}});
  HarnessOptions options;
  // A stopped victim never ends by itself.
  if (p.signo == SIGSTOP) options.expendable_ranks = {kVictim};
  auto results = RunRanks(
      kRanks, RankMode::kProcesses, kDeadline,
      [&](int rank, int nranks, const ringoUniqueId& id) -> std::string {
        ringoComm_t comm = nullptr;
        std::string problem = InitHost(nranks, id, rank, &comm);
        if (!problem.empty()) return problem;
        // Warm-up: the communicator works before the fault.
        float in[5] = {1, 2, 3, 4, 5}, out[5];
        for (int i = 0; i < 3; ++i) {
          ringoResult_t rc = ringoAllReduce(in, out, 5, ringoFloat32, ringoSum, comm, nullptr);
          if (rc != ringoSuccess || out[4] != 5.0f * nranks) return "warm-up AllReduce failed";
        }
        if (rank == kVictim) BeVictim(comm, p.count, p.signo, milliseconds(p.delay_ms));
        return SurviveUntilError(comm, p.count);
      },
      options);
  const RankExpectation victim =
      p.signo == SIGSTOP ? RankExpectation::Expendable() : RankExpectation::KilledBy(p.signo);
  EXPECT_TRUE(RanksMatch(results, {{kVictim, victim}}));
}

INSTANTIATE_TEST_SUITE_P(
    Faults, PeerFault,
    ::testing::Values(
        // Dies before its next collective starts: the others wait for it.
        FaultParam{"KilledAtOnce", SIGKILL, 0, 1024},
        // Dies in the middle of a stream of 1 MiB AllReduces.
        FaultParam{"KilledMidCollective", SIGKILL, 150, 256 * 1024},
        // Stops (a hung process, its shared memory intact): only a timeout can tell.
        FaultParam{"StoppedMidCollective", SIGSTOP, 150, 256 * 1024}),
    [](const ::testing::TestParamInfo<FaultParam>& info) { return std::string(info.param.name); });

// ---- ringoCommAbort while a collective is blocked ----

// One process, two ranks as threads (run in a forked child so a hang is
// killed): `blocked_rank` calls AllReduce, the other never does; after a
// moment `aborted_rank` is aborted from the main thread. The blocked call
// must return an error promptly: itself aborted, or its peer aborted
// (ringoRemoteError). RINGO_TIMEOUT_MS is large so only the abort can end it.
std::string AbortScenario(int blocked_rank, int aborted_rank) {
  std::vector<ringoComm_t> comms = MakeHostComms(2);
  if (comms.size() != 2) return "could not create 2 communicators";
  ringoResult_t blocked_rc = ringoSuccess;
  Clock::time_point returned_at;
  std::thread blocked([&] {
    float in[16] = {}, out[16];
    blocked_rc = ringoAllReduce(in, out, 16, ringoFloat32, ringoSum, comms[blocked_rank], nullptr);
    returned_at = Clock::now();
  });
  std::this_thread::sleep_for(milliseconds(300));
  const Clock::time_point abort_start = Clock::now();
  ringoResult_t abort_rc = ringoCommAbort(comms[aborted_rank]);
  const double abort_seconds = SecondsSince(abort_start);
  blocked.join();
  const double return_seconds = std::chrono::duration<double>(returned_at - abort_start).count();
  std::string problems;
  if (abort_rc != ringoSuccess)
    problems += "ringoCommAbort returned " + ResultName(abort_rc) + "; ";
  if (abort_seconds > 2)
    problems += "ringoCommAbort took " + std::to_string(abort_seconds) + " s; ";
  if (blocked_rc == ringoSuccess) problems += "the blocked AllReduce succeeded; ";
  if (blocked_rank != aborted_rank && blocked_rc != ringoRemoteError) {
    problems += "the peer's blocked AllReduce returned " + ResultName(blocked_rc) +
                ", want ringoRemoteError; ";
  }
  if (return_seconds > 2) {
    problems +=
        "the blocked AllReduce returned " + std::to_string(return_seconds) + " s after the abort; ";
  }
  const int survivor = 1 - aborted_rank;
  if (blocked_rank == aborted_rank) {
    // The surviving peer, calling afterwards, sees that its peer is gone.
    float in[16] = {}, out[16];
    const Clock::time_point start = Clock::now();
    ringoResult_t rc =
        ringoAllReduce(in, out, 16, ringoFloat32, ringoSum, comms[survivor], nullptr);
    if (rc != ringoRemoteError) {
      problems +=
          "the aborted rank's peer then got " + ResultName(rc) + ", want ringoRemoteError; ";
    }
    if (SecondsSince(start) > 5)
      problems += "and waited " + std::to_string(SecondsSince(start)) + " s; ";
  }
  ringoCommAbort(comms[survivor]);
  return problems;
}

TEST(Abort, UnblocksCollectiveOnTheAbortedComm) {
  ScopedEnv env({{"RINGO_TIMEOUT_MS", "60000"}});
  EXPECT_EQ(InChild([] { return AbortScenario(/*blocked_rank=*/0, /*aborted_rank=*/0); }), "");
}

TEST(Abort, PeerBlockedInCollectiveGetsRemoteError) {
  ScopedEnv env({{"RINGO_TIMEOUT_MS", "60000"}});
  EXPECT_EQ(InChild([] { return AbortScenario(/*blocked_rank=*/1, /*aborted_rank=*/0); }), "");
}

// Across processes: rank 0 blocks in AllReduce and is aborted from another
// of its threads; rank 1 joins later and must see ringoRemoteError, not wait.
TEST(Abort, AcrossProcesses) {
  ScopedEnv env({{"RINGO_TIMEOUT_MS", "60000"}, {"RINGO_COMM_ID", std::nullopt}});
  Flag aborted;  // rank 0's ringoCommAbort returned
  auto results = RunRanks(
      2, RankMode::kProcesses, kDeadline,
      [&aborted](int rank, int nranks, const ringoUniqueId& id) -> std::string {
        ringoComm_t comm = nullptr;
        std::string problem = InitHost(nranks, id, rank, &comm);
        if (!problem.empty()) return problem;
        float in[16] = {}, out[16];
        if (rank == 1) {
          if (!aborted.Wait(milliseconds(30000))) return "rank 0 did not abort";
          const Clock::time_point start = Clock::now();
          ringoResult_t rc = ringoAllReduce(in, out, 16, ringoFloat32, ringoSum, comm, nullptr);
          const double seconds = SecondsSince(start);
          ringoCommAbort(comm);
          if (rc != ringoRemoteError)
            return "peer got " + ResultName(rc) + ", want ringoRemoteError";
          if (seconds > 5) return "peer waited " + std::to_string(seconds) + " s";
          return "";
        }
        ringoResult_t rc = ringoSuccess;
        std::thread blocked(
            [&] { rc = ringoAllReduce(in, out, 16, ringoFloat32, ringoSum, comm, nullptr); });
        std::this_thread::sleep_for(milliseconds(300));
        const Clock::time_point start = Clock::now();
        ringoResult_t abort_rc = ringoCommAbort(comm);
        aborted.Raise();
        blocked.join();
        const double seconds = SecondsSince(start);
        if (abort_rc != ringoSuccess) return "ringoCommAbort returned " + ResultName(abort_rc);
        if (rc == ringoSuccess) return "the blocked AllReduce succeeded";
        if (seconds > 2) return "abort took " + std::to_string(seconds) + " s to unblock";
        return "";
      });
  EXPECT_ALL_RANKS_OK(results);
}

}  // namespace
}  // namespace ringo::tests
