// Which CUDA device each of ringo-perf's ranks uses: --ranks-per-gpu K puts
// ranks r = 0..K-1 on device 0, K..2K-1 on device 1, and so on. Several ranks
// on one GPU are a supported configuration (docs/gpu.md). Pure functions.
#ifndef RINGO_TOOLS_PERF_DEVICES_H_
#define RINGO_TOOLS_PERF_DEVICES_H_

#include "base/status.h"

namespace ringo::perf {

// OK when `nranks` ranks fit on `visible_devices` GPUs at `ranks_per_gpu`
// each; otherwise InvalidUsage saying how many are needed and suggesting
// --ranks-per-gpu (or --host).
base::Status CheckDeviceCount(int nranks, int ranks_per_gpu, int visible_devices);

// The device of `rank`: (rank / ranks_per_gpu) % visible_devices. Requires
// ranks_per_gpu >= 1 and visible_devices >= 1.
int RankDevice(int rank, int ranks_per_gpu, int visible_devices);

}  // namespace ringo::perf

#endif  // RINGO_TOOLS_PERF_DEVICES_H_
