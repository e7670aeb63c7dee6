#include "launch/rendezvous.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "base/config.h"

namespace ringo::launch {
namespace {

using base::Status;
using base::StatusOr;
using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kPollInterval{10};

Status RingoStatus(ringoResult_t r, const char* call) {
  if (r == ringoSuccess) return Status();
  return Status(static_cast<base::Code>(r), std::string(call) + ": " + ringoGetLastError(nullptr));
}

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
    if (errno != ENOENT) return base::SystemError("cannot read " + path + ": " + std::strerror(errno));
    if (Clock::now() >= give_up) {
      return base::Timeout("no unique id in " + path + " after " + std::to_string(deadline.count() / 1000) +
                           " s: rank 0 writes it once it has started; did it fail? "
                           "(or set RINGO_COMM_ID=host:port)");
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

StatusOr<ringoUniqueId> NewUniqueId() {
  ringoUniqueId id;
  RETURN_IF_ERROR(RingoStatus(ringoGetUniqueId(&id), "ringoGetUniqueId"));
  return id;
}

}  // namespace

StatusOr<ringoUniqueId> ObtainUniqueId(const LaunchEnv& env, const std::string& program,
                                       std::chrono::milliseconds deadline) {
  switch (env.rendezvous) {
    case Rendezvous::kSingle:
    case Rendezvous::kCommId:
      // With RINGO_COMM_ID set, every rank derives the same id from it.
      return NewUniqueId();
    case Rendezvous::kMaster: {
      ringoUniqueId id;
      RETURN_IF_ERROR(
          RingoStatus(ringoGetUniqueIdForAddress(env.comm_id.c_str(), &id), "ringoGetUniqueIdForAddress"));
      return id;
    }
    case Rendezvous::kIdFile: {
      const std::string path = IdFilePath(env.job_name, program);
      if (env.rank != 0) return ReadIdFile(path, deadline);
      ASSIGN_OR_RETURN(ringoUniqueId id, NewUniqueId());
      RETURN_IF_ERROR(WriteIdFile(path, id));
      return id;
    }
  }
  return base::Internal("unknown rendezvous");
}

void ReleaseUniqueId(const LaunchEnv& env, const std::string& program) {
  if (env.rendezvous == Rendezvous::kIdFile && env.rank == 0) unlink(IdFilePath(env.job_name, program).c_str());
}

std::chrono::milliseconds RendezvousTimeout() { return std::chrono::milliseconds(base::GetConfig().timeout_ms); }

}  // namespace ringo::launch
