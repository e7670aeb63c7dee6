// Multi-rank test harness: runs N ranks of a test body as threads of this
// process or as forked child processes, under a deadline, and reports every
// rank's outcome (not only the first failure).
//
// Thread safety: RunRanks may be called from one thread at a time (it forks in
// process mode). Bodies must not use gtest assertions: in process mode they run
// in a child whose gtest state is thrown away. A body reports by returning ""
// (success) or a description of what went wrong.
#ifndef RINGO_TESTS_HARNESS_H_
#define RINGO_TESTS_HARNESS_H_

#include <chrono>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ringo/ringo.h"

namespace ringo::tests {

enum class RankMode { kThreads, kProcesses };

// How one rank ended. `ok` means the body returned "" (and, for a process,
// exited normally with status 0).
struct RankResult {
  int rank = -1;
  bool ok = false;
  std::string message;             // the body's message, or what the harness saw
  int exit_code = -1;              // process mode: exit status when it exited normally
  int term_signal = 0;             // process mode: the signal that ended it, 0 if none
  bool timed_out = false;          // still running at the deadline (killed in process mode)
  bool expendable_killed = false;  // killed by the harness after the others finished
  double seconds = 0;              // wall time from start until the rank finished
};

using RankBody = std::function<std::string(int rank, int nranks, const ringoUniqueId& id)>;

struct HarnessOptions {
  // Call ringoGetUniqueId once in the caller before starting ranks and give
  // the id to every body. Off for bodies that use ringoCommInitAll, so that
  // no rendezvous listener is left waiting for ranks that never come.
  bool make_unique_id = true;
  // Process mode: ranks the harness does not wait for. Once every other rank
  // has finished they are SIGKILLed (and SIGCONTed first, in case they were
  // stopped) and reported with expendable_killed set. Used by fault tests
  // whose victim never returns (a stopped or hung rank).
  std::vector<int> expendable_ranks;
};

// Runs `body` for ranks 0..nranks-1 and returns one result per rank, in rank
// order. Thread mode: threads cannot be killed, so if the deadline passes the
// harness prints every rank's state to stderr and aborts the test process
// (a hang must not look like a pass, nor block CI forever). Process mode:
// stragglers are SIGKILLed at the deadline and reported as timed out; a child
// that dies (signal, nonzero exit) is reported with what ended it.
std::vector<RankResult> RunRanks(int nranks, RankMode mode, std::chrono::milliseconds deadline,
                                 const RankBody& body, const HarnessOptions& options = {});

// One line per rank that did not pass, "rank R: ..."; "" when all passed.
std::string DescribeFailures(const std::vector<RankResult>& results);

// gtest helpers: success when every rank passed; otherwise one message with
// every failing rank. Use as EXPECT_TRUE(AllRanksOk(results)).
::testing::AssertionResult AllRanksOk(const std::vector<RankResult>& results);

// What a fault test expects of a rank that is not meant to pass.
struct RankExpectation {
  enum class Kind { kPass, kKilledBySignal, kExpendable };
  Kind kind = Kind::kPass;
  int signal = 0;
  static RankExpectation Pass() { return {Kind::kPass, 0}; }
  static RankExpectation KilledBy(int signo) { return {Kind::kKilledBySignal, signo}; }
  // Ended by the harness because it was listed in expendable_ranks (or died
  // of any signal before that).
  static RankExpectation Expendable() { return {Kind::kExpendable, 0}; }
};

// Success when every rank listed in `expected` ended as stated and every
// other rank passed; otherwise one message naming each rank that did not.
::testing::AssertionResult RanksMatch(const std::vector<RankResult>& results,
                                      const std::map<int, RankExpectation>& expected);

#define EXPECT_ALL_RANKS_OK(results) EXPECT_TRUE(::ringo::tests::AllRanksOk(results))
#define ASSERT_ALL_RANKS_OK(results) ASSERT_TRUE(::ringo::tests::AllRanksOk(results))

// ---- Fault injection, for bodies run in process mode ----

// True inside a body that the harness runs in a forked child.
bool InForkedRank();

// Ends this rank's process at once with `signo` (default SIGKILL), as a crash
// would: no destructors, no message. Aborts the test with a message if called
// outside a forked rank, where it would kill the whole test binary.
[[noreturn]] void KillSelf(int signo);

// Starts a detached thread that, after `delay`, sends `signo` to this rank's
// process (SIGKILL to die mid-collective, SIGSTOP to hang mid-collective).
// Same restriction as KillSelf.
void SignalSelfAfter(std::chrono::milliseconds delay, int signo);

// ---- Small utilities shared by the suites ----

// Sets (value) or unsets (nullopt) environment variables for its lifetime and
// re-reads Ringo's configuration; restores the previous values on
// destruction. Not thread-safe (setenv): use only while no rank runs.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, std::optional<std::string>>> vars);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// A one-shot signal between ranks, threads or forked processes alike (a
// pipe made before RunRanks): one rank raises it once it has reached a
// state, another waits for that instead of sleeping and hoping. Make it in
// the test, before RunRanks; any rank may raise it, several may wait.
class Flag {
 public:
  Flag();
  ~Flag();
  Flag(const Flag&) = delete;
  Flag& operator=(const Flag&) = delete;
  void Raise();
  // True once raised (by any rank, before or during the wait); false when
  // `limit` passed first.
  bool Wait(std::chrono::milliseconds limit) const;

 private:
  int fds_[2] = {-1, -1};
};

// Sets one variable and re-reads the configuration (inside a forked rank,
// where nothing needs restoring).
void SetEnvAndReload(const char* name, const std::string& value);

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read it,
// close). Racy by nature; good enough for tests on one host.
int PickFreePort();

// A TCP port on 127.0.0.1 below the kernel's ephemeral range (so no
// program's bind to port 0, and no outgoing connection, can be given it),
// held by a bound socket that does not listen until Release(): while held,
// a connect to it is refused and nothing else can bind it. port() is -1
// where none could be found.
class ReservedPort {
 public:
  ReservedPort();
  ~ReservedPort();
  ReservedPort(const ReservedPort&) = delete;
  ReservedPort& operator=(const ReservedPort&) = delete;
  int port() const { return port_; }
  // Frees the port for the program meant to listen on it.
  void Release();

 private:
  int fd_ = -1;
  int port_ = -1;
};

// "ringoTimeout (8)" etc., for messages.
std::string ResultName(ringoResult_t r);

}  // namespace ringo::tests

#endif  // RINGO_TESTS_HARNESS_H_
