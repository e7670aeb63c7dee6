// Where a launched rank stands: rank and size from the launcher's environment
// (Open MPI, torchrun, Slurm) and how the ranks will meet (RINGO_COMM_ID,
// MASTER_ADDR/MASTER_PORT, or a file in /tmp). Pure functions of a Config,
// shared by ringo-perf, ringo-train and the peers of bench/ (a library of its
// own, so the clients of the public API need nothing else of Ringo's).
#ifndef RINGO_LAUNCH_LAUNCH_ENV_H_
#define RINGO_LAUNCH_LAUNCH_ENV_H_

#include <string>

#include "base/config.h"
#include "base/status.h"

namespace ringo::launch {

// How the id reaches every rank.
enum class Rendezvous {
  kSingle,  // one rank: it creates the id itself
  kCommId,  // RINGO_COMM_ID names rank 0's address; every rank derives the id
  kMaster,  // torchrun's MASTER_ADDR:MASTER_PORT+1 becomes RINGO_COMM_ID
  kIdFile,  // all ranks on this host: rank 0 writes the id to IdFilePath()
};

struct LaunchEnv {
  std::string launcher;  // "Open MPI", "torchrun", "Slurm", or "" (none)
  int rank = 0;
  int size = 1;
  bool all_local = false;  // the launcher says every rank runs on this host
  std::string job_name;    // names the id file; unique per launch
  Rendezvous rendezvous = Rendezvous::kSingle;
  std::string comm_id;  // the RINGO_COMM_ID to use (kCommId, kMaster)
};

// Rank, size and launcher from the launcher variables of `config`, without
// choosing a rendezvous (env.rendezvous stays kSingle). Same precedence and
// errors as DetectLaunch for the variables themselves.
base::StatusOr<LaunchEnv> DetectRanks(const base::Config& config);

// DetectRanks, then the rendezvous. Reads the launcher variables of `config`. Open MPI first, then
// torchrun (which may run inside a Slurm allocation: its RANK is the truth), then Slurm. An error
// names the variables that are missing or inconsistent, or says that ranks span hosts and
// RINGO_COMM_ID is needed.
base::StatusOr<LaunchEnv> DetectLaunch(const base::Config& config);

// DetectLaunch of the process's configuration snapshot (RINGO_COMM_ID and
// the launchers' variables as the environment held them).
base::StatusOr<LaunchEnv> DetectLaunch();

// "/tmp/<program>-<job>.id" with every character outside [A-Za-z0-9._-]
// of the job name replaced by '_'.
std::string IdFilePath(const std::string& job_name, const std::string& program = "ringo-perf");

}  // namespace ringo::launch

#endif  // RINGO_LAUNCH_LAUNCH_ENV_H_
