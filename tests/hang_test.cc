// The hang diagnosis and the flight recorder through the C API: a rank
// that sleeps before a collective is named by every rank (and says so
// itself) long before the timeout, with what it last finished and that it
// is outside Ringo; ranks that call two communicators in different orders
// are each shown inside the other call; a stopped rank is shown stopped; a
// killed rank leaves a record on every survivor; the timeout's error and
// RINGO_STALL_ABORT carry the diagnosis; ranks as threads and as processes.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
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

std::string Msg(const char* what, ringoResult_t r, ringoComm_t comm = nullptr) {
  return std::string(what) + ": " + ResultName(r) + " (" + ringoGetLastError(comm) + ")";
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class TempDir {
 public:
  TempDir() {
    char dir[] = "/tmp/ringo-hang-XXXXXX";
    path_ = mkdtemp(dir) != nullptr ? dir : "";
  }
  ~TempDir() {
    if (!path_.empty()) (void)!std::system(("rm -rf " + path_).c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// In a forked rank: this rank's log goes to `dir`/log.<rank>.
void LogTo(const std::string& dir, int rank) {
  SetEnvAndReload("RINGO_DEBUG_FILE", dir + "/log." + std::to_string(rank));
}

std::string AllReduce(ringoComm_t comm, int n) {
  std::vector<float> buf(256, 1.0f);
  const ringoResult_t r = ringoAllReduce(buf.data(), buf.data(), buf.size(), ringoFloat, ringoSum, comm, nullptr);
  if (r != ringoSuccess) return Msg("ringoAllReduce", r, comm);
  return buf[0] == static_cast<float>(n) ? "" : "a wrong sum";
}

// Rank 3 sleeps 3 s before its 5th all-reduce; the stall threshold is 1 s,
// the timeout 20 s. Every rank logs one diagnosis; the others' names rank 3
// as not having entered AllReduce #5, what it last finished, and that it is
// outside Ringo; rank 3's says the others wait for it. All then finish.
TEST(Hang, ASleepingRankIsNamedByEveryRankBeforeTheTimeout) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  auto body = [&](int rank, int n, const ringoUniqueId& id) -> std::string {
    LogTo(dir.path(), rank);
    SetEnvAndReload("RINGO_STALL_MS", "1000");
    SetEnvAndReload("RINGO_TIMEOUT_MS", "20000");
    ringoComm_t comm = nullptr;
    ringoResult_t r = ringoCommInitRank(&comm, n, id, rank);
    if (r != ringoSuccess) return Msg("ringoCommInitRank", r);
    for (int i = 1; i <= 6; ++i) {
      if (rank == 3 && i == 5) {
        // Away for 3 s at least, and until every other rank has logged its
        // diagnosis (on a loaded machine the stall threshold may pass late).
        const auto away = Clock::now();
        for (int r = 0; r < 3 && Clock::now() - away < milliseconds(30000); ++r) {
          while (ReadFile(dir.path() + "/log." + std::to_string(r)).find("Ringo hang diagnosis") == std::string::npos &&
                 Clock::now() - away < milliseconds(30000)) {
            std::this_thread::sleep_for(milliseconds(20));
          }
        }
        std::this_thread::sleep_until(away + milliseconds(3000));
      }
      const auto start = Clock::now();
      std::string e = AllReduce(comm, n);
      if (!e.empty()) return "all-reduce " + std::to_string(i) + ": " + e;
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      if (rank != 3 && i == 5 && s < 2.0) return "all-reduce 5 did not wait for rank 3 (" + std::to_string(s) + " s)";
    }
    ringoCommDestroy(comm);
    return "";
  };
  auto results = RunRanks(4, RankMode::kProcesses, milliseconds(60000), body);
  ASSERT_ALL_RANKS_OK(results);
  for (int r = 0; r < 3; ++r) {
    const std::string log = ReadFile(dir.path() + "/log." + std::to_string(r));
    EXPECT_EQ(Count(log, "Ringo hang diagnosis"), 1) << "rank " << r << ":\n" << log;
    EXPECT_NE(log.find("rank 3 has not entered AllReduce #5: it last finished AllReduce #4"), std::string::npos)
        << "rank " << r << ":\n" << log;
    EXPECT_NE(log.find("and is outside Ringo for"), std::string::npos) << "rank " << r << ":\n" << log;
    EXPECT_NE(log.find("waiting in it: ranks 0, 1, 2"), std::string::npos) << "rank " << r << ":\n" << log;
  }
  const std::string log3 = ReadFile(dir.path() + "/log.3");
  EXPECT_NE(log3.find("in AllReduce #5, which this rank has not entered"), std::string::npos) << log3;
  EXPECT_EQ(Count(log3, "which this rank has not entered"), 1) << log3;
}

// Rank 0 calls A then B, rank 1 calls B then A: with RINGO_STALL_ABORT each
// fails at the threshold, and its error shows the other inside the other
// communicator's all-reduce; both diagnoses run at the same moment, so the
// one made second may find the other rank already out of its call (its
// diagnosis aborted it): outside Ringo. At least one shows it inside.
TEST(Hang, TwoCommunicatorsInDifferentOrdersAreShownInsideTheOtherCall) {
  for (RankMode mode : {RankMode::kProcesses, RankMode::kThreads}) {
    TempDir dir;
    ASSERT_FALSE(dir.path().empty());
    ScopedEnv env({{"RINGO_STALL_MS", "800"}, {"RINGO_STALL_ABORT", "1"}, {"RINGO_TIMEOUT_MS", "20000"}});
    Flag done[2];  // each rank's crossed call returned
    auto body = [&](int rank, int n, const ringoUniqueId& id) -> std::string {
      ringoComm_t a = nullptr, b = nullptr;
      ringoResult_t r = ringoCommInitRank(&a, n, id, rank);
      if (r != ringoSuccess) return Msg("ringoCommInitRank", r);
      r = ringoCommSplit(a, 0, rank, &b, nullptr);
      if (r != ringoSuccess) return Msg("ringoCommSplit", r, a);
      std::vector<float> buf(16, 1.0f);
      ringoComm_t first = rank == 0 ? a : b;
      const auto start = Clock::now();
      r = ringoAllReduce(buf.data(), buf.data(), buf.size(), ringoFloat, ringoSum, first, nullptr);
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      const std::string why = ringoGetLastError(first);
      if (r == ringoSuccess) return "the crossed all-reduce succeeded";
      if (s > 10) return "it failed only after " + std::to_string(s) + " s";
      if (why.find("Ringo hang diagnosis") == std::string::npos) return "no diagnosis in the error: " + why;
      const bool inside = why.find("is inside ringoAllReduce on communicator") != std::string::npos;
      if (why.find(" has not entered AllReduce #1") == std::string::npos ||
          (!inside && why.find("is outside Ringo for") == std::string::npos)) {
        return "the diagnosis does not say where the other rank is: " + why;
      }
      std::ofstream(dir.path() + "/seen." + std::to_string(rank)) << (inside ? "inside" : "outside");
      done[rank].Raise();
      // The other rank may still be asking this one: stay until its call returned.
      if (!done[1 - rank].Wait(milliseconds(30000))) return "the other rank's call did not return";
      return "";
    };
    HarnessOptions options;
    auto results = RunRanks(2, mode, milliseconds(60000), body, options);
    EXPECT_ALL_RANKS_OK(results) << (mode == RankMode::kThreads ? "threads" : "processes");
    const std::string seen0 = ReadFile(dir.path() + "/seen.0"), seen1 = ReadFile(dir.path() + "/seen.1");
    EXPECT_TRUE(seen0 == "inside" || seen1 == "inside")
        << "neither rank's diagnosis showed the other inside the other call: " << seen0 << ", " << seen1;
  }
}

// A rank busy outside Ringo is shown so; the timeout's error carries the
// diagnosis too (no abort at the threshold).
TEST(Hang, ARankBusyOutsideRingoAndTheTimeoutsMessage) {
  Flag failed[3];  // ranks 0 and 2: their all-reduce returned
  auto body = [&](int rank, int n, const ringoUniqueId& id) -> std::string {
    SetEnvAndReload("RINGO_STALL_MS", "500");
    SetEnvAndReload("RINGO_TIMEOUT_MS", "2500");
    ringoComm_t comm = nullptr;
    ringoResult_t r = ringoCommInitRank(&comm, n, id, rank);
    if (r != ringoSuccess) return Msg("ringoCommInitRank", r);
    std::string e = AllReduce(comm, n);
    if (!e.empty()) return e;
    if (rank == 1) {
      // Busy outside Ringo (alive, never calling) until the others' calls returned.
      const auto until = Clock::now() + milliseconds(30000);
      volatile uint64_t x = 0;
      while (!(failed[0].Wait(milliseconds(0)) && failed[2].Wait(milliseconds(0)))) {
        for (int i = 0; i < 100000; ++i) x = x + 1;
        if (Clock::now() > until) return std::string("the others' all-reduce did not return");
      }
      return std::string();
    }
    std::vector<float> buf(16, 1.0f);
    r = ringoAllReduce(buf.data(), buf.data(), buf.size(), ringoFloat, ringoSum, comm, nullptr);
    failed[rank].Raise();
    const std::string why = ringoGetLastError(comm);
    if (r == ringoSuccess) return "the all-reduce succeeded without rank 1";
    if (why.find("rank 1 has not entered AllReduce #2") == std::string::npos ||
        why.find("outside Ringo") == std::string::npos) {
      return "the timeout's error lacks the diagnosis: " + why;
    }
    return "";
  };
  auto results = RunRanks(3, RankMode::kProcesses, milliseconds(60000), body);
  EXPECT_ALL_RANKS_OK(results);
}

// A stopped rank does not answer: it is shown silent, and stopped (it
// shares this host).
TEST(Hang, AStoppedRankIsShownStopped) {
  ScopedEnv env({{"RINGO_STALL_MS", "700"}, {"RINGO_STALL_ABORT", "1"}, {"RINGO_CONTROL_TIMEOUT_MS", "300"}});
  auto body = [&](int rank, int n, const ringoUniqueId& id) -> std::string {
    ringoComm_t comm = nullptr;
    ringoResult_t r = ringoCommInitRank(&comm, n, id, rank);
    if (r != ringoSuccess) return Msg("ringoCommInitRank", r);
    std::string e = AllReduce(comm, n);
    if (!e.empty()) return e;
    if (rank == 2) raise(SIGSTOP);
    std::vector<float> buf(16, 1.0f);
    r = ringoAllReduce(buf.data(), buf.data(), buf.size(), ringoFloat, ringoSum, comm, nullptr);
    const std::string why = ringoGetLastError(comm);
    if (r == ringoSuccess) return "the all-reduce succeeded without rank 2";
    if (why.find("rank 2 did not answer within 300 ms") == std::string::npos ||
        why.find("this host) is stopped") == std::string::npos) {
      return "the diagnosis does not show rank 2 stopped: " + why;
    }
    return "";
  };
  HarnessOptions options;
  options.expendable_ranks = {2};
  auto results = RunRanks(3, RankMode::kProcesses, milliseconds(60000), body, options);
  EXPECT_TRUE(RanksMatch(results, {{2, RankExpectation::Expendable()}}));
}

// A killed rank: every survivor writes its record (reason "fault"), whose
// last collective is the failed one; a record on request too.
TEST(Hang, AKilledRankLeavesARecordOnEverySurvivor) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  auto body = [&](int rank, int n, const ringoUniqueId& id) -> std::string {
    SetEnvAndReload("RINGO_TRACE_DIR", dir.path());
    SetEnvAndReload("RINGO_TIMEOUT_MS", "20000");
    ringoComm_t comm = nullptr;
    ringoResult_t r = ringoCommInitRank(&comm, n, id, rank);
    if (r != ringoSuccess) return Msg("ringoCommInitRank", r);
    if (ringoCommDumpTrace(comm, (dir.path() + "/asked").c_str()) != ringoSuccess) return "a record on request failed";
    for (int i = 1; i <= 10; ++i) {
      if (rank == 1 && i == 4) KillSelf(SIGKILL);
      std::string e = AllReduce(comm, n);
      if (!e.empty()) return i >= 4 ? "" : e;
    }
    return "no failure after the kill";
  };
  auto results = RunRanks(4, RankMode::kProcesses, milliseconds(60000), body);
  ASSERT_TRUE(RanksMatch(results, {{1, RankExpectation::KilledBy(SIGKILL)}}));
  int records = 0;
  for (const char* name : {"rank0", "rank2", "rank3"}) {
    std::string text;
    std::string found;
    // One file per rank: ringo-trace-<comm>-rankR.jsonl.
    FILE* ls = popen(("ls " + dir.path() + " | grep -- '-" + name + ".jsonl$'").c_str(), "r");
    char line[512] = {};
    if (ls != nullptr && std::fgets(line, sizeof(line), ls) != nullptr) found = line;
    if (ls != nullptr) pclose(ls);
    while (!found.empty() && (found.back() == '\n')) found.pop_back();
    ASSERT_FALSE(found.empty()) << "no record of " << name;
    text = ReadFile(dir.path() + "/" + found);
    EXPECT_NE(text.find("\"reason\":\"fault\""), std::string::npos) << text.substr(0, 400);
    EXPECT_NE(text.find("\"op\":\"AllReduce\",\"seq\":4"), std::string::npos) << text;
    EXPECT_NE(text.find("\"state\":\"failed\""), std::string::npos) << text;
    ++records;
  }
  EXPECT_EQ(records, 3);
  FILE* asked = popen(("ls " + dir.path() + "/asked | wc -l").c_str(), "r");
  char count[32] = {};
  ASSERT_NE(asked, nullptr);
  ASSERT_NE(std::fgets(count, sizeof(count), asked), nullptr);
  pclose(asked);
  EXPECT_EQ(std::atoi(count), 4) << "a record on request from every rank";
}

// Ranks that are threads of one process (ringoCommInitAll), driven by one
// thread each: after a first all-reduce, rank 2's thread sleeps; the
// others' errors name it, outside Ringo since it finished #1.
TEST(Hang, ThreadRanksAreDiagnosedToo) {
  ScopedEnv env({{"RINGO_STALL_MS", "500"}, {"RINGO_STALL_ABORT", "1"}});
  std::vector<ringoComm_t> comms(3, nullptr);
  ASSERT_EQ(ringoCommInitAll(comms.data(), 3, nullptr), ringoSuccess);
  std::vector<std::string> errors(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      std::vector<float> buf(16, 1.0f);
      ringoResult_t rc = ringoAllReduce(buf.data(), buf.data(), buf.size(), ringoFloat, ringoSum, comms[r], nullptr);
      if (rc != ringoSuccess) {
        errors[r] = std::string("first: ") + ringoGetLastError(comms[r]);
        return;
      }
      if (r == 2) std::this_thread::sleep_for(milliseconds(2500));
      rc = ringoAllReduce(buf.data(), buf.data(), buf.size(), ringoFloat, ringoSum, comms[r], nullptr);
      errors[r] = rc == ringoSuccess ? "" : ringoGetLastError(comms[r]);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("rank 2 has not entered AllReduce #2: it last finished AllReduce #1"),
              std::string::npos)
        << "rank " << r << ": " << errors[r];
    EXPECT_NE(errors[r].find("outside Ringo"), std::string::npos) << errors[r];
  }
  for (auto c : comms) ringoCommAbort(c);
}

}  // namespace
}  // namespace ringo::tests
