// Elastic communicators through the C API: the survivors of a killed or
// stopped rank agree on who failed and shrink, twice in a row, on 2 to 8
// ranks with one and two ranks lost; a rank excluded while stopped hears
// so when it resumes; a healthy shrink leaves parent and child usable; a
// revoke stops what runs on every rank; the non-blocking shrink; split
// children go on on their own; grow by one and by two ranks.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "ringo/ringo.h"
#include "tests/harness.h"

namespace ringo::tests {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr int kCount = 1024;

std::string Msg(const char* what, ringoResult_t r, ringoComm_t comm = nullptr) {
  return std::string(what) + ": " + ResultName(r) + " (" + ringoGetLastError(comm) + ")";
}

// One all-reduce of kCount floats of `value` on `comm`; "" when every
// element is `want`.
std::string AllReduceIs(ringoComm_t comm, float value, float want) {
  std::vector<float> buf(kCount, value);
  const ringoResult_t r = ringoAllReduce(buf.data(), buf.data(), kCount, ringoFloat, ringoSum, comm, nullptr);
  if (r != ringoSuccess) return Msg("ringoAllReduce", r, comm);
  for (int i = 0; i < kCount; ++i) {
    if (buf[i] != want) return "element " + std::to_string(i) + " is " + std::to_string(buf[i]) + ", expected " +
                               std::to_string(want);
  }
  return "";
}

// All-reduces `value` until one fails; the failing result (or success
// after `limit` rounds).
ringoResult_t AllReduceUntilFailure(ringoComm_t comm, float value, int limit) {
  std::vector<float> buf(kCount);
  for (int i = 0; i < limit; ++i) {
    std::fill(buf.begin(), buf.end(), value);
    const ringoResult_t r = ringoAllReduce(buf.data(), buf.data(), kCount, ringoFloat, ringoSum, comm, nullptr);
    if (r != ringoSuccess) return r;
  }
  return ringoSuccess;
}

std::string Join(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return "[" + s + "]";
}

// The survivors of `victims` (original ranks) agree, shrink with the abort
// flag, and check the child: its size, this rank's place, a sum over the
// survivors. *child is the new communicator; *ranks maps child ranks to
// original ones.
std::string AgreeAndShrink(ringoComm_t comm, const std::vector<int>& ranks_in_comm, int me_original,
                           const std::vector<int>& victims_original, ringoComm_t* child, std::vector<int>* ranks) {
  int n = 0;
  ringoCommCount(comm, &n);
  std::vector<int> failed(n, -1);
  int nfailed = -1;
  ringoResult_t r = ringoCommAgreeFailed(comm, failed.data(), &nfailed);
  if (r != ringoSuccess) return Msg("ringoCommAgreeFailed", r, comm);
  failed.resize(nfailed);
  std::vector<int> want;
  for (size_t i = 0; i < ranks_in_comm.size(); ++i) {
    for (int v : victims_original) {
      if (ranks_in_comm[i] == v) want.push_back(static_cast<int>(i));
    }
  }
  if (failed != want) return "agreed failed ranks " + Join(failed) + ", expected " + Join(want);
  r = ringoCommShrink(comm, failed.data(), nfailed, child, nullptr, RINGO_SHRINK_ABORT);
  if (r != ringoSuccess) return Msg("ringoCommShrink", r, comm);
  ranks->clear();
  for (size_t i = 0; i < ranks_in_comm.size(); ++i) {
    if (std::find(failed.begin(), failed.end(), static_cast<int>(i)) == failed.end()) ranks->push_back(ranks_in_comm[i]);
  }
  int count = 0, rank = -1;
  ringoCommCount(*child, &count);
  ringoCommUserRank(*child, &rank);
  if (count != static_cast<int>(ranks->size())) return "the child has " + std::to_string(count) + " ranks";
  if ((*ranks)[rank] != me_original) return "this rank is " + std::to_string(rank) + " in the child, out of order";
  float want_sum = 0;
  for (int o : *ranks) want_sum += static_cast<float>(o + 1);
  return AllReduceIs(*child, static_cast<float>(me_original + 1), want_sum);
}

struct KillCase {
  int nranks;
  std::vector<int> first;   // original ranks killed in the first failure
  std::vector<int> second;  // then in the second (on the shrunk communicator)
};

class ShrinkAfterKill : public ::testing::TestWithParam<KillCase> {};

// Ranks all-reduce until the victims kill themselves mid-loop; the
// survivors agree and shrink; then the second victims die too and the
// survivors do it again on the child.
TEST_P(ShrinkAfterKill, SurvivorsAgreeShrinkAndGoOnTwice) {
  const KillCase c = GetParam();
  std::map<int, RankExpectation> expected;
  for (int v : c.first) expected[v] = RankExpectation::KilledBy(SIGKILL);
  for (int v : c.second) expected[v] = RankExpectation::KilledBy(SIGKILL);
  auto body = [&](int rank, int n, const ringoUniqueId& id) -> std::string {
    SetEnvAndReload("RINGO_TIMEOUT_MS", "20000");
    SetEnvAndReload("RINGO_CONTROL_TIMEOUT_MS", "1000");
    ringoComm_t comm = nullptr;
    ringoResult_t r = ringoCommInitRank(&comm, n, id, rank);
    if (r != ringoSuccess) return Msg("ringoCommInitRank", r);
    const bool first_victim = std::find(c.first.begin(), c.first.end(), rank) != c.first.end();
    for (int i = 0; i < 5; ++i) {
      if (first_victim && i == 3) KillSelf(SIGKILL);
      std::string e = AllReduceIs(comm, 1.0f, static_cast<float>(n));
      if (!e.empty()) {
        if (i < 3) return "round " + std::to_string(i) + ": " + e;
        break;  // the victims are gone
      }
      if (i >= 3) return "the all-reduce after the kill succeeded";
    }
    std::vector<int> all;
    for (int k = 0; k < n; ++k) all.push_back(k);
    ringoComm_t child = nullptr;
    std::vector<int> ranks;
    std::string e = AgreeAndShrink(comm, all, rank, c.first, &child, &ranks);
    if (!e.empty()) return "first shrink: " + e;
    if (c.second.empty()) return "";
    // The second failure, on the child.
    const bool second_victim = std::find(c.second.begin(), c.second.end(), rank) != c.second.end();
    if (second_victim) {
      (void)AllReduceIs(child, 1.0f, 0.0f);  // one more, so that the others are mid-loop
      KillSelf(SIGKILL);
    }
    const ringoResult_t failed = AllReduceUntilFailure(child, 1.0f, 50);
    if (failed == ringoSuccess) return "the child's all-reduces went on after the second kill";
    ringoComm_t grandchild = nullptr;
    std::vector<int> ranks2;
    e = AgreeAndShrink(child, ranks, rank, c.second, &grandchild, &ranks2);
    if (!e.empty()) return "second shrink: " + e;
    return "";
  };
  auto results = RunRanks(c.nranks, RankMode::kProcesses, milliseconds(120000), body);
  EXPECT_TRUE(RanksMatch(results, expected));
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShrinkAfterKill,
                         ::testing::Values(KillCase{2, {1}, {}}, KillCase{3, {2}, {0}}, KillCase{4, {2}, {3}},
                                           KillCase{4, {0, 3}, {}}, KillCase{5, {1, 3}, {0}},
                                           KillCase{8, {5}, {0, 7}}),
                         [](const ::testing::TestParamInfo<KillCase>& info) {
                           std::string s = "N" + std::to_string(info.param.nranks) + "_kill";
                           for (int v : info.param.first) s += "_" + std::to_string(v);
                           if (!info.param.second.empty()) s += "_then";
                           for (int v : info.param.second) s += "_" + std::to_string(v);
                           return s;
                         });

// A stopped rank is counted failed once it does not answer; the survivors
// shrink; resumed, it hears it was excluded, in every call.
TEST(Elastic, AStoppedRankIsExcludedAndHearsSoWhenResumed) {
  char dir[] = "/tmp/ringo-elastic-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string pid_file = std::string(dir) + "/victim.pid";
  constexpr int kVictim = 2;
  auto body = [&](int rank, int n, const ringoUniqueId& id) -> std::string {
    SetEnvAndReload("RINGO_TIMEOUT_MS", "2000");
    SetEnvAndReload("RINGO_CONTROL_TIMEOUT_MS", "1000");
    SetEnvAndReload("RINGO_STALL_MS", "0");
    ringoComm_t comm = nullptr;
    ringoResult_t r = ringoCommInitRank(&comm, n, id, rank);
    if (r != ringoSuccess) return Msg("ringoCommInitRank", r);
    if (rank == kVictim) {
      std::ofstream(pid_file) << getpid() << "\n";
      std::string e = AllReduceIs(comm, 1.0f, static_cast<float>(n));
      if (!e.empty()) return e;
      raise(SIGSTOP);  // stopped before the next all-reduce; resumed by rank 0
      // Resumed after the survivors shrank: what they told it while it was
      // stopped is read by its control thread within moments (until then a
      // call may fail otherwise: its peers are gone), and then every call
      // says so.
      const auto resumed = std::chrono::steady_clock::now();
      while (true) {
        std::vector<float> buf(kCount, 1.0f);
        r = ringoAllReduce(buf.data(), buf.data(), kCount, ringoFloat, ringoSum, comm, nullptr);
        if (r == ringoInvalidUsage && std::string(ringoGetLastError(comm)).find("excluded") != std::string::npos) break;
        if (std::chrono::steady_clock::now() - resumed > std::chrono::seconds(10)) {
          return "not told it was excluded within 10 s of resuming: " + Msg("ringoAllReduce", r, comm);
        }
        std::this_thread::sleep_for(milliseconds(20));
      }
      for (int i = 0; i < 3; ++i) {
        std::vector<float> buf(kCount, 1.0f);
        r = ringoAllReduce(buf.data(), buf.data(), kCount, ringoFloat, ringoSum, comm, nullptr);
        const std::string why = ringoGetLastError(comm);
        if (r != ringoInvalidUsage || why.find("excluded") == std::string::npos) {
          return "call " + std::to_string(i) + " after resuming: " + Msg("ringoAllReduce", r, comm);
        }
      }
      return "";
    }
    std::string e = AllReduceIs(comm, 1.0f, static_cast<float>(n));
    if (!e.empty()) return e;
    if (AllReduceUntilFailure(comm, 1.0f, 1) == ringoSuccess) return "the all-reduce with a stopped rank succeeded";
    std::vector<int> all{0, 1, 2, 3};
    ringoComm_t child = nullptr;
    std::vector<int> ranks;
    e = AgreeAndShrink(comm, all, rank, {kVictim}, &child, &ranks);
    if (!e.empty()) return e;
    e = AllReduceIs(child, 1.0f, 3.0f);
    if (!e.empty()) return "on the child: " + e;
    if (rank == 0) {
      int pid = 0;
      std::ifstream(pid_file) >> pid;
      if (pid <= 0 || kill(pid, SIGCONT) != 0) return "could not resume the victim";
    }
    // The resumed rank cannot disturb the child.
    std::this_thread::sleep_for(milliseconds(300));
    e = AllReduceIs(child, 2.0f, 6.0f);
    return e.empty() ? "" : "on the child after the victim resumed: " + e;
  };
  auto results = RunRanks(4, RankMode::kProcesses, milliseconds(60000), body);
  EXPECT_ALL_RANKS_OK(results);
  std::remove(pid_file.c_str());
  rmdir(dir);
}

// Ranks 0-2 shrink a healthy communicator (rank 3 alive, left out, not
// calling); then all four use the parent and the three the child.
TEST(Elastic, AHealthyShrinkLeavesParentAndChildUsable) {
  for (RankMode mode : {RankMode::kProcesses, RankMode::kThreads}) {
    auto body = [&](int rank, int n, const ringoUniqueId& id) -> std::string {
      ringoComm_t comm = nullptr;
      ringoResult_t r = ringoCommInitRank(&comm, n, id, rank);
      if (r != ringoSuccess) return Msg("ringoCommInitRank", r);
      ringoComm_t child = nullptr;
      if (rank != 3) {
        int out = 3;
        r = ringoCommShrink(comm, &out, 1, &child, nullptr, RINGO_SHRINK_DEFAULT);
        if (r != ringoSuccess) return Msg("ringoCommShrink", r, comm);
      }
      std::string e = AllReduceIs(comm, static_cast<float>(rank), 6.0f);
      if (!e.empty()) return "parent: " + e;
      if (rank != 3) {
        e = AllReduceIs(child, static_cast<float>(rank), 3.0f);
        if (!e.empty()) return "child: " + e;
        // Bad calls are refused before anything happens.
        int self = 0;
        ringoComm_t none = nullptr;
        ringoCommUserRank(comm, &self);
        if (ringoCommShrink(comm, &self, 1, &none, nullptr, RINGO_SHRINK_DEFAULT) != ringoInvalidUsage) {
          return "excluding oneself was not refused";
        }
        int bad = 9;
        if (ringoCommShrink(comm, &bad, 1, &none, nullptr, RINGO_SHRINK_DEFAULT) != ringoInvalidArgument) {
          return "excluding rank 9 of 4 was not refused";
        }
        if (ringoCommShrink(comm, nullptr, 0, &none, nullptr, 7) != ringoInvalidArgument) {
          return "flags 7 were not refused";
        }
        ringoCommDestroy(child);
      }
      ringoCommDestroy(comm);
      return "";
    };
    auto results = RunRanks(4, mode, milliseconds(60000), body);
    EXPECT_ALL_RANKS_OK(results) << (mode == RankMode::kThreads ? "threads" : "processes");
  }
}

// Every rank blocks in a receive nobody sends; rank 0 revokes from another
// thread: every rank's call fails at once (naming rank 0), and later
// collectives on rank 0 are InvalidUsage; the ranks then shrink to all of
// them (nothing excluded) and go on.
TEST(Elastic, RevokeStopsWhatRunsOnEveryRank) {
  auto body = [&](int rank, int n, const ringoUniqueId& id) -> std::string {
    SetEnvAndReload("RINGO_TIMEOUT_MS", "30000");
    ringoComm_t comm = nullptr;
    ringoResult_t r = ringoCommInitRank(&comm, n, id, rank);
    if (r != ringoSuccess) return Msg("ringoCommInitRank", r);
    // Connect every rank to its neighbours first (a send and a receive each).
    float out = static_cast<float>(rank), in = -1;
    ringoGroupStart();
    ringoSend(&out, 1, ringoFloat, (rank + 1) % n, comm, nullptr);
    ringoRecv(&in, 1, ringoFloat, (rank + n - 1) % n, comm, nullptr);
    r = ringoGroupEnd();
    if (r != ringoSuccess) return Msg("the first exchange", r, comm);
    std::thread revoker;
    if (rank == 0) {
      revoker = std::thread([comm] {
        std::this_thread::sleep_for(milliseconds(500));
        (void)ringoCommRevoke(comm, RINGO_REVOKE_DEFAULT);
      });
    }
    const auto start = Clock::now();
    float x = 0;
    r = ringoRecv(&x, 1, ringoFloat, (rank + n - 1) % n, comm, nullptr);  // nobody sends it
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    const std::string why = ringoGetLastError(comm);
    if (revoker.joinable()) revoker.join();
    if (r == ringoSuccess) return "the receive succeeded";
    if (s > 10) return "the receive returned only after " + std::to_string(s) + " s";
    if (why.find("rank 0") == std::string::npos) return "the error does not name rank 0: " + why;
    if (rank == 0) {
      std::vector<float> buf(4, 1.0f);
      r = ringoAllReduce(buf.data(), buf.data(), 4, ringoFloat, ringoSum, comm, nullptr);
      if (r != ringoInvalidUsage) return "an all-reduce after the revoke: " + Msg("ringoAllReduce", r, comm);
      if (ringoCommRevoke(comm, RINGO_REVOKE_DEFAULT) == ringoSuccess) return "a second revoke succeeded";
    }
    ringoComm_t child = nullptr;
    r = ringoCommShrink(comm, nullptr, 0, &child, nullptr, RINGO_SHRINK_ABORT);
    if (r != ringoSuccess) return Msg("ringoCommShrink", r, comm);
    return AllReduceIs(child, 1.0f, static_cast<float>(n));
  };
  auto results = RunRanks(3, RankMode::kProcesses, milliseconds(60000), body);
  EXPECT_ALL_RANKS_OK(results);
}

// config.blocking = 0: the shrink returns ringoInProgress and the child is
// ready once ringoCommGetAsyncError says so.
TEST(Elastic, ANonBlockingShrinkIsInProgressUntilReady) {
  auto body = [&](int rank, int n, const ringoUniqueId& id) -> std::string {
    ringoComm_t comm = nullptr;
    ringoResult_t r = ringoCommInitRank(&comm, n, id, rank);
    if (r != ringoSuccess) return Msg("ringoCommInitRank", r);
    ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
    config.blocking = 0;
    ringoComm_t child = nullptr;
    r = ringoCommShrink(comm, nullptr, 0, &child, &config, RINGO_SHRINK_DEFAULT);
    if (r != ringoInProgress && r != ringoSuccess) return Msg("ringoCommShrink", r, comm);
    ringoResult_t state = ringoInProgress;
    const auto give_up = Clock::now() + std::chrono::seconds(20);
    while (state == ringoInProgress && Clock::now() < give_up) {
      if (ringoCommGetAsyncError(child, &state) != ringoSuccess) return "ringoCommGetAsyncError failed";
      if (state == ringoInProgress) std::this_thread::sleep_for(milliseconds(2));
    }
    if (state != ringoSuccess) return "the shrink ended with " + ResultName(state);
    return AllReduceIs(child, 1.0f, static_cast<float>(n));
  };
  EXPECT_ALL_RANKS_OK(RunRanks(3, RankMode::kProcesses, milliseconds(60000), body));
}

// A split's children are communicators of their own: {0,1} goes on when
// rank 3 dies; {2,3} fails on rank 2, naming rank 3.
TEST(Elastic, SplitChildrenGoOnOrFailOnTheirOwn) {
  std::map<int, RankExpectation> expected{{3, RankExpectation::KilledBy(SIGKILL)}};
  auto body = [&](int rank, int n, const ringoUniqueId& id) -> std::string {
    SetEnvAndReload("RINGO_TIMEOUT_MS", "20000");
    ringoComm_t comm = nullptr;
    ringoResult_t r = ringoCommInitRank(&comm, n, id, rank);
    if (r != ringoSuccess) return Msg("ringoCommInitRank", r);
    ringoComm_t half = nullptr;
    r = ringoCommSplit(comm, rank / 2, rank, &half, nullptr);
    if (r != ringoSuccess) return Msg("ringoCommSplit", r, comm);
    std::string e = AllReduceIs(half, 1.0f, 2.0f);
    if (!e.empty()) return e;
    if (rank == 3) KillSelf(SIGKILL);
    if (rank < 2) {
      std::this_thread::sleep_for(milliseconds(500));  // rank 3 is gone by now
      for (int i = 0; i < 20; ++i) {
        e = AllReduceIs(half, 1.0f, 2.0f);
        if (!e.empty()) return "the {0,1} child after rank 3 died: " + e;
      }
      return "";
    }
    const ringoResult_t failed = AllReduceUntilFailure(half, 1.0f, 50);
    const std::string why = ringoGetLastError(half);
    if (failed == ringoSuccess) return "the {2,3} child went on without rank 3";
    // The child names its own rank 1 (parent rank 3).
    if (why.find("rank 1") == std::string::npos) return "the error does not name the child's rank 1: " + why;
    return "";
  };
  auto results = RunRanks(4, RankMode::kProcesses, milliseconds(60000), body);
  EXPECT_TRUE(RanksMatch(results, expected));
}

// Grow by one and by two ranks: the existing ranks keep theirs, the new
// ones get theirs from the old rank count up; the id goes through a file.
TEST(Elastic, GrowByOneAndByTwo) {
  for (int added : {1, 2}) {
    char dir[] = "/tmp/ringo-grow-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    const std::string id_file = std::string(dir) + "/grow.id";
    constexpr int kOld = 3;
    const int total = kOld + added;
    auto body = [&](int rank, int, const ringoUniqueId& id) -> std::string {
      ringoComm_t grown = nullptr;
      ringoResult_t r;
      if (rank < kOld) {
        ringoComm_t comm = nullptr;
        r = ringoCommInitRank(&comm, kOld, id, rank);
        if (r != ringoSuccess) return Msg("ringoCommInitRank", r);
        std::string e = AllReduceIs(comm, 1.0f, 3.0f);
        if (!e.empty()) return e;
        ringoUniqueId gid;
        const ringoUniqueId* pass = nullptr;
        if (rank == 0) {
          r = ringoCommGetUniqueId(comm, &gid);
          if (r != ringoSuccess) return Msg("ringoCommGetUniqueId", r, comm);
          const std::string tmp = id_file + ".tmp";
          FILE* f = std::fopen(tmp.c_str(), "wb");
          if (f == nullptr || std::fwrite(&gid, sizeof(gid), 1, f) != 1 || std::fclose(f) != 0) return "write the id";
          std::rename(tmp.c_str(), id_file.c_str());
          pass = &gid;
        }
        r = ringoCommGrow(comm, total, pass, -1, &grown, nullptr);
        if (r != ringoSuccess) return Msg("ringoCommGrow (existing)", r, comm);
        e = AllReduceIs(comm, 1.0f, 3.0f);  // the parent stays usable
        if (!e.empty()) return "the parent after growing: " + e;
        ringoCommDestroy(comm);
      } else {
        ringoUniqueId gid;
        const auto give_up = Clock::now() + std::chrono::seconds(30);
        FILE* f = nullptr;
        while ((f = std::fopen(id_file.c_str(), "rb")) == nullptr && Clock::now() < give_up) {
          std::this_thread::sleep_for(milliseconds(10));
        }
        if (f == nullptr) return "no grow id appeared";
        const bool read = std::fread(&gid, sizeof(gid), 1, f) == 1;
        std::fclose(f);
        if (!read) return "a short grow id";
        r = ringoCommGrow(nullptr, total, &gid, rank, &grown, nullptr);
        if (r != ringoSuccess) return Msg("ringoCommGrow (new)", r);
      }
      int count = 0, me = -1;
      ringoCommCount(grown, &count);
      ringoCommUserRank(grown, &me);
      if (count != total || me != rank) {
        return "grown: rank " + std::to_string(me) + " of " + std::to_string(count);
      }
      float want = 0;
      for (int k = 0; k < total; ++k) want += static_cast<float>(k + 1);
      std::string e = AllReduceIs(grown, static_cast<float>(rank + 1), want);
      ringoCommDestroy(grown);
      return e;
    };
    auto results = RunRanks(total, RankMode::kProcesses, milliseconds(60000), body);
    EXPECT_ALL_RANKS_OK(results) << "grow by " << added;
    std::remove(id_file.c_str());
    rmdir(dir);
  }
}

}  // namespace
}  // namespace ringo::tests
