// -np's fork of ringo-perf's local ranks, and the GPU probe it makes
// first. (Launched ranks meet through launch/rendezvous.h.)
#ifndef RINGO_TOOLS_PERF_LAUNCHER_H_
#define RINGO_TOOLS_PERF_LAUNCHER_H_

#include <chrono>
#include <functional>
#include <string>

#include "base/status.h"
#include "ringo/ringo.h"

namespace ringo::perf {

// What a child process finds of the GPUs (base::ProbeCuda). -np asks before
// it forks: a CUDA context does not survive fork(), so the parent itself
// never initialises CUDA and each rank initialises its own.
struct GpuCount {
  int devices = 0;
  std::string reason;  // why there is none
};
GpuCount ProbeGpusInChild();

// -np: creates one id (ringoGetUniqueId, whose listener lives in this parent
// process), forks `nranks` children that each run `rank_main(rank, id)` and
// _exit with its return value, and waits for all. If a child fails the rest
// get a grace period to report the error, then are killed. Returns 0 when
// every child exited 0, else the first failing child's status (1 if killed).
// `bind_to_core`: launch::RunForkedRanks's.
int RunForked(int nranks, const std::function<int(int rank, const ringoUniqueId& id)>& rank_main,
              bool bind_to_core = false);

}  // namespace ringo::perf

#endif  // RINGO_TOOLS_PERF_LAUNCHER_H_
