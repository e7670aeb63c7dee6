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
#include "launch/fork.h"
#include "tools/perf/ringo_comm.h"

namespace ringo::perf {
namespace {

using base::Status;
using base::StatusOr;
StatusOr<ringoUniqueId> NewUniqueId() {
  ringoUniqueId id;
  RETURN_IF_ERROR(RingoStatus(ringoGetUniqueId(&id), "ringoGetUniqueId", nullptr));
  return id;
}

}  // namespace

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

int RunForked(int nranks, const std::function<int(int, const ringoUniqueId&)>& rank_main, bool bind_to_core) {
  auto id = NewUniqueId();
  if (!id.ok()) {
    std::fprintf(stderr, "ringo-perf: %s\n", id.status().message().c_str());
    return 1;
  }
  return launch::RunForkedRanks(
      "ringo-perf", nranks, [&](int rank) { return rank_main(rank, *id); }, bind_to_core);
}

}  // namespace ringo::perf
