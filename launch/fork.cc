#include "launch/fork.h"

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

namespace ringo::launch {
namespace {

using Clock = std::chrono::steady_clock;

// After one child fails, how long the others get to notice (a library reports
// a dead peer as an error) before they are killed.
constexpr std::chrono::seconds kForkGrace{15};
constexpr std::chrono::milliseconds kPollInterval{50};

// Waits for every child; see RunForkedRanks.
int WaitForChildren(const char* program, std::vector<pid_t> pids, bool survivors_go_on) {
  int result = 0;
  bool any_ok = false;  // some child exited 0 (survivors_go_on: the run's result is theirs)
  bool grace = false;  // a child failed: the others are given until kill_at
  Clock::time_point kill_at;
  for (size_t left = pids.size(); left > 0;) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, grace ? WNOHANG : 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "%s: waitpid: %s\n", program, std::strerror(errno));
      return result != 0 ? result : 1;
    }
    if (pid == 0) {  // children still running during the grace period
      if (Clock::now() < kill_at) {
        std::this_thread::sleep_for(kPollInterval);
        continue;
      }
      for (size_t r = 0; r < pids.size(); ++r) {
        if (pids[r] <= 0) continue;
        std::fprintf(stderr,
                     "%s: killing rank %zu (pid %d), still running %lld s after another rank "
                     "failed\n",
                     program, r, static_cast<int>(pids[r]),
                     static_cast<long long>(kForkGrace.count()));
        kill(pids[r], SIGKILL);
      }
      grace = false;
      continue;
    }
    size_t rank = 0;
    while (rank < pids.size() && pids[rank] != pid) ++rank;
    if (rank == pids.size()) continue;  // not ours
    pids[rank] = 0;
    --left;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    any_ok = any_ok || ok;
    if (ok) continue;
    // A plain nonzero exit has printed its reason already; a signal has not.
    if (WIFSIGNALED(status)) {
      std::fprintf(stderr, "%s: rank %zu (pid %d) was killed by signal %d (%s)%s\n", program, rank,
                   static_cast<int>(pid), WTERMSIG(status), strsignal(WTERMSIG(status)),
                   survivors_go_on ? "; the others go on" : "");
      if (survivors_go_on) continue;
    }
    if (result == 0) {
      result = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
      grace = true;
      kill_at = Clock::now() + kForkGrace;
    }
  }
  if (survivors_go_on && result == 0 && !any_ok) {
    std::fprintf(stderr, "%s: no rank survived\n", program);
    return 1;
  }
  return result;
}

// The CPUs this process may run on, in order.
std::vector<int> AllowedCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

}  // namespace

int RunForkedRanks(const char* program, int nranks, const std::function<int(int)>& rank_main, bool bind_to_core,
                   bool survivors_go_on) {
  std::vector<int> cpus;
  if (bind_to_core) {
    cpus = AllowedCpus();
    if (static_cast<int>(cpus.size()) < nranks) {
      std::fprintf(stderr, "%s: %d ranks on %zu CPUs: not binding them\n", program, nranks, cpus.size());
      cpus.clear();
    }
  }
  std::fflush(nullptr);  // or children would print the parent's buffered output again
  std::vector<pid_t> pids;
  for (int rank = 0; rank < nranks; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      if (!cpus.empty()) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[rank], &one);
        if (sched_setaffinity(0, sizeof(one), &one) != 0) {
          std::fprintf(stderr, "%s: rank %d: binding to CPU %d: %s\n", program, rank, cpus[rank],
                       std::strerror(errno));
        }
      }
      const int rc = rank_main(rank);
      std::fflush(nullptr);
      // _exit: the parent's atexit handlers and static destructors (threads
      // it started, such as a rendezvous listener) are not ours to run.
      _exit(rc);
    }
    if (pid < 0) {
      std::fprintf(stderr, "%s: fork: %s\n", program, std::strerror(errno));
      for (pid_t started : pids) kill(started, SIGKILL);
      WaitForChildren(program, pids, survivors_go_on);
      return 1;
    }
    pids.push_back(pid);
  }
  return WaitForChildren(program, pids, survivors_go_on);
}

}  // namespace ringo::launch
