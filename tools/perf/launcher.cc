#include "tools/perf/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "tools/perf/bench.h"

namespace ringo::perf {
namespace {

using base::Status;
using base::StatusOr;
using Clock = std::chrono::steady_clock;

// After one -np child fails, how long the others get to notice (Ringo reports
// a dead peer as ringoRemoteError) before they are killed.
constexpr std::chrono::seconds kForkGrace{15};
constexpr std::chrono::milliseconds kPollInterval{10};

Status WriteIdFile(const std::string& path, const ringoUniqueId& id) {
  // Written whole under a private name, then renamed: a polling rank sees
  // either no file or all 128 bytes.
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return base::SystemError("cannot create " + tmp + ": " + std::strerror(errno));
  const ssize_t n = write(fd, &id, sizeof(id));
  const int write_errno = errno;
  close(fd);
  if (n != static_cast<ssize_t>(sizeof(id))) {
    unlink(tmp.c_str());
    return base::SystemError("cannot write " + tmp + ": " + std::strerror(write_errno));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return base::SystemError("cannot rename " + tmp + " to " + path + ": " + std::strerror(err));
  }
  return Status();
}

StatusOr<ringoUniqueId> ReadIdFile(const std::string& path, std::chrono::milliseconds deadline) {
  const auto give_up = Clock::now() + deadline;
  for (;;) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ringoUniqueId id;
      const ssize_t n = read(fd, &id, sizeof(id));
      close(fd);
      if (n == static_cast<ssize_t>(sizeof(id))) return id;
      return base::SystemError(path + " holds " + std::to_string(n) + " bytes, not a " +
                               std::to_string(sizeof(id)) + "-byte unique id");
    }
    if (errno != ENOENT) {
      return base::SystemError("cannot read " + path + ": " + std::strerror(errno));
    }
    if (Clock::now() >= give_up) {
      return base::Timeout("no unique id in " + path + " after " +
                           std::to_string(deadline.count() / 1000) +
                           " s: rank 0 writes it once it has started; did it fail? "
                           "(or set RINGO_COMM_ID=host:port)");
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

StatusOr<ringoUniqueId> NewUniqueId() {
  ringoUniqueId id;
  RETURN_IF_ERROR(RingoStatus(ringoGetUniqueId(&id), "ringoGetUniqueId", nullptr));
  return id;
}

// Waits for every child; see RunForked.
int WaitForChildren(std::vector<pid_t> pids) {
  int result = 0;
  bool grace = false;  // a child failed: the others are given until kill_at
  Clock::time_point kill_at;
  for (size_t left = pids.size(); left > 0;) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, grace ? WNOHANG : 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      std::perror("ringo-perf: waitpid");
      return result != 0 ? result : 1;
    }
    if (pid == 0) {  // children still running during the grace period
      if (Clock::now() < kill_at) {
        std::this_thread::sleep_for(kPollInterval * 5);
        continue;
      }
      for (size_t r = 0; r < pids.size(); ++r) {
        if (pids[r] <= 0) continue;
        std::fprintf(stderr,
                     "ringo-perf: killing rank %zu (pid %d), still running %lld s after "
                     "another rank failed\n",
                     r, static_cast<int>(pids[r]), static_cast<long long>(kForkGrace.count()));
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
    if (ok) continue;
    // A plain nonzero exit has printed its reason already; a signal has not.
    if (WIFSIGNALED(status)) {
      std::fprintf(stderr, "ringo-perf: rank %zu (pid %d) was killed by signal %d (%s)\n", rank,
                   static_cast<int>(pid), WTERMSIG(status), strsignal(WTERMSIG(status)));
    }
    if (result == 0) {
      result = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
      grace = true;
      kill_at = Clock::now() + kForkGrace;
    }
  }
  return result;
}

}  // namespace

StatusOr<ringoUniqueId> ObtainUniqueId(const LaunchEnv& env, std::chrono::milliseconds deadline) {
  switch (env.rendezvous) {
    case Rendezvous::kSingle:
    case Rendezvous::kCommId:
      // With RINGO_COMM_ID set, every rank derives the same id from it.
      return NewUniqueId();
    case Rendezvous::kMaster:
      // Not a test hook here: ReloadConfigForTesting re-reads the environment
      // into a new snapshot, which is how the library's ringoGetUniqueId and
      // rank 0's init come to see the RINGO_COMM_ID derived from MASTER_*.
      if (setenv("RINGO_COMM_ID", env.comm_id.c_str(), 1) != 0) {
        return base::SystemError(std::string("setenv(RINGO_COMM_ID) failed: ") +
                                 std::strerror(errno));
      }
      base::ReloadConfigForTesting();
      return NewUniqueId();
    case Rendezvous::kIdFile: {
      const std::string path = IdFilePath(env.job_name);
      if (env.rank != 0) return ReadIdFile(path, deadline);
      ASSIGN_OR_RETURN(ringoUniqueId id, NewUniqueId());
      RETURN_IF_ERROR(WriteIdFile(path, id));
      return id;
    }
  }
  return base::Internal("unknown rendezvous");
}

void ReleaseUniqueId(const LaunchEnv& env) {
  if (env.rendezvous == Rendezvous::kIdFile && env.rank == 0) {
    unlink(IdFilePath(env.job_name).c_str());
  }
}

int RunForked(int nranks, const std::function<int(int, const ringoUniqueId&)>& rank_main) {
  auto id = NewUniqueId();
  if (!id.ok()) {
    std::fprintf(stderr, "ringo-perf: %s\n", id.status().message().c_str());
    return 1;
  }
  std::fflush(nullptr);  // or children would print the parent's buffered output again
  std::vector<pid_t> pids;
  for (int rank = 0; rank < nranks; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      const int rc = rank_main(rank, *id);
      std::fflush(nullptr);
      // _exit: the parent's atexit handlers and static destructors (the
      // listener thread of ringoGetUniqueId lives only there) are not ours.
      _exit(rc);
    }
    if (pid < 0) {
      std::perror("ringo-perf: fork");
      for (pid_t started : pids) kill(started, SIGKILL);
      WaitForChildren(pids);
      return 1;
    }
    pids.push_back(pid);
  }
  return WaitForChildren(pids);
}

}  // namespace ringo::perf
