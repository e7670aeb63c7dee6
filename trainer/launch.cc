#include "trainer/launch.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "base/config.h"
#include "tools/perf/fork.h"
#include "tools/perf/launch_env.h"
#include "trainer/comm.h"

namespace ringo::train {
namespace {

using base::Status;
using base::StatusOr;
using perf::LaunchEnv;
using perf::Rendezvous;

StatusOr<ringoUniqueId> NewUniqueId() {
  ringoUniqueId id;
  RETURN_IF_ERROR(RingoCall(ringoGetUniqueId(&id), "ringoGetUniqueId", nullptr));
  return id;
}

// The id file of a launch whose ranks all run on this host: rank 0 writes it
// whole under a private name and renames it; the others poll for it.
std::string IdFile(const LaunchEnv& env) {
  std::string path = perf::IdFilePath(env.job_name);
  const std::string from = "ringo-perf-";
  const size_t at = path.find(from);
  if (at != std::string::npos) path.replace(at, from.size(), "ringo-train-");
  return path;
}

Status WriteIdFile(const std::string& path, const ringoUniqueId& id) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return base::SystemError("cannot create " + tmp + ": " + std::strerror(errno));
  const bool ok = write(fd, &id, sizeof(id)) == static_cast<ssize_t>(sizeof(id));
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
    return base::SystemError("cannot write " + path + ": " + std::strerror(errno));
  }
  return base::OkStatus();
}

StatusOr<ringoUniqueId> ReadIdFile(const std::string& path, int timeout_s) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ringoUniqueId id;
      const ssize_t n = read(fd, &id, sizeof(id));
      close(fd);
      if (n == static_cast<ssize_t>(sizeof(id))) return id;
      return base::SystemError(path + " does not hold a unique id");
    }
    if (std::chrono::steady_clock::now() >= give_up) {
      return base::Timeout("no unique id in " + path + " after " + std::to_string(timeout_s) +
                           " s: did rank 0 start? (or set RINGO_COMM_ID=host:port)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

StatusOr<ringoUniqueId> ObtainUniqueId(const LaunchEnv& env) {
  switch (env.rendezvous) {
    case Rendezvous::kSingle:
    case Rendezvous::kCommId:
      return NewUniqueId();  // with RINGO_COMM_ID, every rank derives the same id
    case Rendezvous::kMaster:
      // torchrun: Ringo's root listens on MASTER_PORT + 1. The variable is
      // set for the library, whose configuration snapshot is then re-read.
      if (setenv("RINGO_COMM_ID", env.comm_id.c_str(), 1) != 0) {
        return base::SystemError("setenv(RINGO_COMM_ID) failed");
      }
      base::ReloadConfigForTesting();
      return NewUniqueId();
    case Rendezvous::kIdFile: {
      const std::string path = IdFile(env);
      const int timeout_s = static_cast<int>(base::GetConfig().timeout_ms / 1000);
      if (env.rank != 0) return ReadIdFile(path, timeout_s);
      ASSIGN_OR_RETURN(ringoUniqueId id, NewUniqueId());
      RETURN_IF_ERROR(WriteIdFile(path, id));
      return id;
    }
  }
  return base::Internal("unknown rendezvous");
}

}  // namespace

int RunLocalRanks(int nranks, const RankMain& rank_main) {
  // One rank makes no communicator, so it needs no id (nor its listener).
  if (nranks == 1)
    return perf::RunForkedRanks("ringo-train", 1,
                                [&](int) { return rank_main(0, 1, ringoUniqueId{}); });
  auto id = NewUniqueId();
  if (!id.ok()) {
    std::fprintf(stderr, "ringo-train: %s\n", id.status().message().c_str());
    return 1;
  }
  const ringoUniqueId shared = *id;
  return perf::RunForkedRanks("ringo-train", nranks,
                              [&](int rank) { return rank_main(rank, nranks, shared); });
}

int RunLaunchedRank(const RankMain& rank_main) {
  auto env = perf::DetectLaunch(base::GetConfig());
  if (!env.ok()) {
    std::fprintf(stderr, "ringo-train: %s\n", env.status().message().c_str());
    return 1;
  }
  if (env->size == 1) return rank_main(0, 1, ringoUniqueId{});
  auto id = ObtainUniqueId(*env);
  if (!id.ok()) {
    std::fprintf(stderr, "ringo-train: rank %d: %s\n", env->rank, id.status().message().c_str());
    return 1;
  }
  const int rc = rank_main(env->rank, env->size, *id);
  if (env->rendezvous == Rendezvous::kIdFile && env->rank == 0) unlink(IdFile(*env).c_str());
  return rc;
}

}  // namespace ringo::train
