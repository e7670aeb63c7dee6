// Multi-rank test harness: threads or forked processes under a deadline.
#include "tests/harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "base/config.h"

namespace ringo::tests {
namespace {

using Clock = std::chrono::steady_clock;

// Set in a forked child only; the child is its own process, so a plain global
// cannot be seen by the parent or by other ranks.
bool g_in_forked_rank = false;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string RunBodyCatching(const RankBody& body, int rank, int nranks, const ringoUniqueId& id) {
  try {
    return body(rank, nranks, id);
  } catch (const std::exception& e) {
    return std::string("body threw: ") + e.what();
  } catch (...) {
    return "body threw a non-std exception";
  }
}

// ---- Thread mode ----

struct ThreadState {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<RankResult> results;  // guarded by mu
  std::vector<bool> done;           // guarded by mu
  int remaining = 0;                // guarded by mu
};

std::vector<RankResult> RunThreads(int nranks, std::chrono::milliseconds deadline,
                                   const RankBody& body, const ringoUniqueId& id) {
  // Shared with the rank threads by shared_ptr so that the state outlives this
  // frame in the (fatal) deadline case while we print it.
  auto state = std::make_shared<ThreadState>();
  state->results.resize(nranks);
  state->done.assign(nranks, false);
  state->remaining = nranks;
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  threads.reserve(nranks);
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([state, &body, r, nranks, id, start] {
      std::string message = RunBodyCatching(body, r, nranks, id);
      std::lock_guard<std::mutex> lock(state->mu);
      RankResult& result = state->results[r];
      result.rank = r;
      result.ok = message.empty();
      result.message = std::move(message);
      result.seconds = SecondsSince(start);
      state->done[r] = true;
      if (--state->remaining == 0) state->cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(state->mu);
    if (!state->cv.wait_until(lock, start + deadline, [&] { return state->remaining == 0; })) {
      // Threads cannot be killed and may still touch the caller's buffers, so
      // the only safe end is to stop the process, after saying why.
      const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
      std::fprintf(stderr, "\nRunRanks(threads): deadline of %lld ms expired in %s.%s\n",
                   static_cast<long long>(deadline.count()), info ? info->test_suite_name() : "?",
                   info ? info->name() : "?");
      for (int r = 0; r < nranks; ++r) {
        if (!state->done[r]) {
          std::fprintf(stderr, "  rank %d: still running (hung)\n", r);
        } else {
          std::fprintf(stderr, "  rank %d: finished after %.2f s: %s\n", r,
                       state->results[r].seconds,
                       state->results[r].ok ? "ok" : state->results[r].message.c_str());
        }
      }
      std::fprintf(stderr, "Aborting: threads cannot be killed.\n");
      std::fflush(stderr);
      std::abort();
    }
  }
  for (auto& t : threads) t.join();
  return state->results;
}

// ---- Process mode ----

void WriteAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

[[noreturn]] void RunChild(int rank, int nranks, const ringoUniqueId& id, const RankBody& body,
                           int write_fd, pid_t parent) {
  // Die with the test binary rather than linger as an orphan holding ports.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(125);
  g_in_forked_rank = true;
  std::string message = RunBodyCatching(body, rank, nranks, id);
  WriteAll(write_fd, message);
  ::close(write_fd);
  std::fflush(stdout);
  std::fflush(stderr);
  // _exit: the child must not run the parent's static destructors or gtest.
  ::_exit(message.empty() ? 0 : 1);
}

struct Child {
  pid_t pid = -1;
  int fd = -1;  // read end of the message pipe; -1 once at EOF
  bool reaped = false;
  int status = 0;
  bool killed_at_deadline = false;
  bool expendable = false;
  bool expendable_killed = false;
  std::string message;
  double seconds = 0;
};

// Reads what is available; closes the fd at EOF.
void Drain(Child& c) {
  char buf[4096];
  while (c.fd >= 0) {
    ssize_t n = ::read(c.fd, buf, sizeof(buf));
    if (n > 0) {
      c.message.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      ::close(c.fd);
      c.fd = -1;
    } else if (errno == EINTR) {
      continue;
    } else {
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        ::close(c.fd);
        c.fd = -1;
      }
      return;
    }
  }
}

void Reap(Child& c, bool block, Clock::time_point start) {
  if (c.reaped) return;
  int status = 0;
  pid_t got;
  do {
    got = ::waitpid(c.pid, &status, block ? 0 : WNOHANG);
  } while (got < 0 && errno == EINTR);
  if (got == c.pid) {
    c.reaped = true;
    c.status = status;
    c.seconds = SecondsSince(start);
  }
}

RankResult Summarize(int rank, Child& c, std::chrono::milliseconds deadline) {
  RankResult r;
  r.rank = rank;
  r.seconds = c.seconds;
  r.timed_out = c.killed_at_deadline;
  r.expendable_killed = c.expendable_killed;
  std::ostringstream msg;
  if (WIFEXITED(c.status)) {
    r.exit_code = WEXITSTATUS(c.status);
  } else if (WIFSIGNALED(c.status)) {
    r.term_signal = WTERMSIG(c.status);
  }
  if (c.killed_at_deadline) {
    msg << "still running at the deadline of " << deadline.count() << " ms; killed";
  } else if (c.expendable_killed) {
    msg << "expendable rank killed by the harness after the others finished";
  } else if (r.term_signal != 0) {
    msg << "killed by signal " << r.term_signal << " (" << ::strsignal(r.term_signal) << ")";
  } else if (r.exit_code != 0 && r.exit_code != 1) {
    msg << "exited with status " << r.exit_code;
  } else if (r.exit_code == 1 && c.message.empty()) {
    msg << "exited with status 1 and no message";
  }
  if (!c.message.empty()) {
    if (msg.tellp() > 0) msg << "; ";
    msg << c.message;
  }
  r.message = msg.str();
  r.ok = !c.killed_at_deadline && !c.expendable_killed && r.term_signal == 0 && r.exit_code == 0 &&
         c.message.empty();
  return r;
}

std::vector<RankResult> RunProcesses(int nranks, std::chrono::milliseconds deadline,
                                     const RankBody& body, const ringoUniqueId& id,
                                     const HarnessOptions& options) {
  std::vector<Child> children(nranks);
  for (int r : options.expendable_ranks) {
    if (r >= 0 && r < nranks) children[r].expendable = true;
  }
  // Buffered output would otherwise be written once by every child too.
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = ::getpid();
  const Clock::time_point start = Clock::now();
  for (int r = 0; r < nranks; ++r) {
    int fds[2];
    if (::pipe(fds) != 0) {
      std::perror("RunRanks: pipe");
      std::abort();
    }
    pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("RunRanks: fork");
      std::abort();
    }
    if (pid == 0) {
      ::close(fds[0]);
      for (int k = 0; k < r; ++k) {
        if (children[k].fd >= 0) ::close(children[k].fd);
      }
      RunChild(r, nranks, id, body, fds[1], parent);
    }
    ::close(fds[1]);
    ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    children[r].pid = pid;
    children[r].fd = fds[0];
  }

  auto finished = [](const Child& c) { return c.reaped && c.fd < 0; };
  while (true) {
    bool all_needed_done = true;
    bool all_done = true;
    for (const Child& c : children) {
      if (!finished(c)) {
        all_done = false;
        if (!c.expendable) all_needed_done = false;
      }
    }
    if (all_done) break;
    if (all_needed_done) {
      for (Child& c : children) {
        if (finished(c) || c.reaped) continue;
        ::kill(c.pid, SIGKILL);
        ::kill(c.pid, SIGCONT);
        c.expendable_killed = true;
      }
    }
    if (Clock::now() >= start + deadline) {
      for (Child& c : children) {
        if (c.reaped) continue;
        ::kill(c.pid, SIGKILL);
        c.killed_at_deadline = true;
      }
    }
    std::vector<pollfd> pfds;
    for (const Child& c : children) {
      if (c.fd >= 0) pfds.push_back({c.fd, POLLIN, 0});
    }
    // Short timeout: children are reaped by polling waitpid, and a child that
    // died may have left its pipe open in a grandchild.
    ::poll(pfds.data(), pfds.size(), 20);
    for (Child& c : children) {
      Drain(c);
      const bool was_reaped = c.reaped;
      Reap(c, /*block=*/c.killed_at_deadline || c.expendable_killed, start);
      if (c.reaped && !was_reaped) {
        Drain(c);
        // Whatever still holds the write end (a grandchild), stop listening.
        if (c.fd >= 0) {
          ::close(c.fd);
          c.fd = -1;
        }
      }
    }
  }
  std::vector<RankResult> results;
  results.reserve(nranks);
  for (int r = 0; r < nranks; ++r) results.push_back(Summarize(r, children[r], deadline));
  return results;
}

}  // namespace

std::vector<RankResult> RunRanks(int nranks, RankMode mode, std::chrono::milliseconds deadline,
                                 const RankBody& body, const HarnessOptions& options) {
  ringoUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (options.make_unique_id) {
    ringoResult_t rc = ringoGetUniqueId(&id);
    if (rc != ringoSuccess) {
      std::vector<RankResult> results;
      for (int r = 0; r < nranks; ++r) {
        results.push_back({r, false,
                           "harness: ringoGetUniqueId failed: " + ResultName(rc) + ": " +
                               ringoGetLastError(nullptr)});
      }
      return results;
    }
  }
  if (mode == RankMode::kThreads) return RunThreads(nranks, deadline, body, id);
  return RunProcesses(nranks, deadline, body, id, options);
}

std::string DescribeFailures(const std::vector<RankResult>& results) {
  std::ostringstream out;
  for (const RankResult& r : results) {
    if (r.ok) continue;
    out << "rank " << r.rank << " (after " << r.seconds << " s): " << r.message << "\n";
  }
  return out.str();
}

::testing::AssertionResult AllRanksOk(const std::vector<RankResult>& results) {
  std::string failures = DescribeFailures(results);
  if (failures.empty()) return ::testing::AssertionSuccess();
  int failed = 0;
  for (const RankResult& r : results) failed += r.ok ? 0 : 1;
  return ::testing::AssertionFailure() << failed << " of " << results.size() << " ranks failed:\n"
                                       << failures;
}

::testing::AssertionResult RanksMatch(const std::vector<RankResult>& results,
                                      const std::map<int, RankExpectation>& expected) {
  std::ostringstream out;
  for (const RankResult& r : results) {
    auto it = expected.find(r.rank);
    RankExpectation want = it == expected.end() ? RankExpectation::Pass() : it->second;
    bool matched = false;
    std::string wanted;
    switch (want.kind) {
      case RankExpectation::Kind::kPass:
        matched = r.ok;
        wanted = "to pass";
        break;
      case RankExpectation::Kind::kKilledBySignal:
        matched = r.term_signal == want.signal && !r.timed_out && !r.expendable_killed;
        wanted = "to die of signal " + std::to_string(want.signal);
        break;
      case RankExpectation::Kind::kExpendable:
        matched = !r.timed_out && (r.expendable_killed || r.term_signal != 0);
        wanted = "to be killed as expendable";
        break;
    }
    if (!matched) {
      out << "rank " << r.rank << " expected " << wanted << ", got (after " << r.seconds
          << " s): " << (r.ok ? "passed" : r.message) << "\n";
    }
  }
  std::string failures = out.str();
  if (failures.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << failures;
}

bool InForkedRank() { return g_in_forked_rank; }

void KillSelf(int signo) {
  if (!g_in_forked_rank) {
    std::fprintf(stderr, "KillSelf called outside a forked rank; it would kill the test\n");
    std::abort();
  }
  ::kill(::getpid(), signo);
  // A signal that does not end the process (caught, or SIGSTOP then SIGCONT).
  ::_exit(128 + signo);
}

void SignalSelfAfter(std::chrono::milliseconds delay, int signo) {
  if (!g_in_forked_rank) {
    std::fprintf(stderr, "SignalSelfAfter called outside a forked rank\n");
    std::abort();
  }
  std::thread([delay, signo] {
    std::this_thread::sleep_for(delay);
    ::kill(::getpid(), signo);
  }).detach();
}

ScopedEnv::ScopedEnv(
    std::initializer_list<std::pair<const char*, std::optional<std::string>>> vars) {
  for (const auto& [name, value] : vars) {
    const char* old = std::getenv(name);
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ringo::base::ReloadConfigForTesting();
}

ScopedEnv::~ScopedEnv() {
  for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
    if (it->second) {
      ::setenv(it->first.c_str(), it->second->c_str(), 1);
    } else {
      ::unsetenv(it->first.c_str());
    }
  }
  ringo::base::ReloadConfigForTesting();
}

void SetEnvAndReload(const char* name, const std::string& value) {
  ::setenv(name, value.c_str(), 1);
  ringo::base::ReloadConfigForTesting();
}

Flag::Flag() {
  if (::pipe2(fds_, O_CLOEXEC) != 0) {
    std::fprintf(stderr, "harness: pipe for a Flag: %s\n", std::strerror(errno));
    std::abort();
  }
}

Flag::~Flag() {
  ::close(fds_[0]);
  ::close(fds_[1]);
}

void Flag::Raise() {
  const char c = 1;
  while (::write(fds_[1], &c, 1) < 0 && errno == EINTR) {
  }
}

bool Flag::Wait(std::chrono::milliseconds limit) const {
  // The byte stays in the pipe: every waiter sees it, however many wait.
  pollfd p{fds_[0], POLLIN, 0};
  const auto until = std::chrono::steady_clock::now() + limit;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    const int rc = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
    if (rc > 0) return true;
    if (rc == 0 || errno != EINTR) return false;
  }
}

int PickFreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  int port = -1;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

ReservedPort::ReservedPort() {
  int low = 32768;  // Linux's default ip_local_port_range starts there
  if (std::FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    int lo = 0, hi = 0;
    if (std::fscanf(f, "%d %d", &lo, &hi) == 2 && lo > 2048) low = lo;
    std::fclose(f);
  }
  const int first = low > 12000 ? low - 10000 : 1024;  // [first, low): outside the ephemeral range
  static std::atomic<unsigned> salt{static_cast<unsigned>(::getpid()) * 2654435761u};
  for (int attempt = 0; attempt < 200 && port_ < 0; ++attempt) {
    const int candidate = first + static_cast<int>(salt.fetch_add(7919) % static_cast<unsigned>(low - first));
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(candidate));
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      fd_ = fd;
      port_ = candidate;
    } else {
      ::close(fd);
    }
  }
}

ReservedPort::~ReservedPort() { Release(); }

void ReservedPort::Release() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string ResultName(ringoResult_t r) {
  const char* name = "unknown";
  switch (r) {
    case ringoSuccess:
      name = "ringoSuccess";
      break;
    case ringoUnhandledCudaError:
      name = "ringoUnhandledCudaError";
      break;
    case ringoSystemError:
      name = "ringoSystemError";
      break;
    case ringoInternalError:
      name = "ringoInternalError";
      break;
    case ringoInvalidArgument:
      name = "ringoInvalidArgument";
      break;
    case ringoInvalidUsage:
      name = "ringoInvalidUsage";
      break;
    case ringoRemoteError:
      name = "ringoRemoteError";
      break;
    case ringoInProgress:
      name = "ringoInProgress";
      break;
    case ringoTimeout:
      name = "ringoTimeout";
      break;
    default:
      break;
  }
  return std::string(name) + " (" + std::to_string(static_cast<int>(r)) + ")";
}

}  // namespace ringo::tests
