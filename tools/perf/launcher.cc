#include "tools/perf/launcher.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/cuda.h"
#include "tools/perf/fork.h"
#include "tools/perf/ringo_comm.h"

namespace ringo::perf {
namespace {

using base::Status;
using base::StatusOr;
using Clock = std::chrono::steady_clock;

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

GpuCount ProbeGpusInChild() {
  GpuCount count;
  int fds[2];
  if (pipe(fds) != 0) {
    count.reason = std::string("pipe: ") + std::strerror(errno);
    return count;
  }
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const base::CudaProbe& probe = base::ProbeCuda();
    const std::string message = std::to_string(probe.device_count) + " " + probe.reason;
    const ssize_t written = write(fds[1], message.data(), message.size());
    _exit(written == static_cast<ssize_t>(message.size()) ? 0 : 1);
  }
  close(fds[1]);
  std::string message;
  char buf[256];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) message.append(buf, n);
  close(fds[0]);
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  const size_t space = message.find(' ');
  if (pid < 0 || space == std::string::npos) {
    count.reason = "the GPU probe process failed";
    return count;
  }
  count.devices = std::atoi(message.substr(0, space).c_str());
  count.reason = message.substr(space + 1);
  return count;
}

int RunForked(int nranks, const std::function<int(int, const ringoUniqueId&)>& rank_main) {
  auto id = NewUniqueId();
  if (!id.ok()) {
    std::fprintf(stderr, "ringo-perf: %s\n", id.status().message().c_str());
    return 1;
  }
  return RunForkedRanks("ringo-perf", nranks, [&](int rank) { return rank_main(rank, *id); });
}

}  // namespace ringo::perf
