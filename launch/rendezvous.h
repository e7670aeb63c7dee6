// How launched ranks get one unique id without linking MPI: the rendezvous
// DetectLaunch chose (launch_env.h), over the public API only.
//
//   kSingle, kCommId   every rank makes it (with RINGO_COMM_ID, all alike)
//   kMaster            torchrun: ringoGetUniqueIdForAddress of
//                      MASTER_ADDR:MASTER_PORT+1, the same on every rank
//   kIdFile            every rank on this host: rank 0 writes the id to a
//                      file in /tmp (whole, under a private name, then
//                      renamed) and the others poll for it
#ifndef RINGO_LAUNCH_RENDEZVOUS_H_
#define RINGO_LAUNCH_RENDEZVOUS_H_

#include <chrono>
#include <string>

#include "base/status.h"
#include "launch/launch_env.h"
#include "ringo/ringo.h"

namespace ringo::launch {

// This rank's unique id. `program` names the id file ("ringo-perf",
// "ringo-train"); with kIdFile, other ranks poll it until `deadline`
// passes. Blocking.
base::StatusOr<ringoUniqueId> ObtainUniqueId(const LaunchEnv& env, const std::string& program,
                                             std::chrono::milliseconds deadline);

// Rank 0's cleanup after ringoCommInitRank returns (removes the id file; a
// no-op for other rendezvous kinds and ranks).
void ReleaseUniqueId(const LaunchEnv& env, const std::string& program);

// RINGO_TIMEOUT_MS from the process's configuration: how long a rank waits
// for rank 0's id file.
std::chrono::milliseconds RendezvousTimeout();

}  // namespace ringo::launch

#endif  // RINGO_LAUNCH_RENDEZVOUS_H_
