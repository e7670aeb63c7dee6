// The settings a communicator's collectives run with, read once from the
// configuration snapshot into typed values. The `shared` ones must be the
// same on every rank (rank 0's apply: they travel in each rank's record at
// init); the `local` ones govern how this rank waits.
#ifndef RINGO_COLLECTIVES_PLAN_SETTINGS_H_
#define RINGO_COLLECTIVES_PLAN_SETTINGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/status.h"

namespace ringo::collectives {

// kDirect: a collective run straight on every rank's buffers
// (kernels/direct_executor.h), where every rank can address the ones it needs;
// the ranks agree per call over the board and fall back to the ring otherwise.
// kDoubling: all-reduces up to 256 KiB across hosts by recursive doubling
// (engines/doubling.h).
enum class Algorithm : int32_t { kAuto = 0, kRing = 1, kOneShot = 2, kDirect = 3, kDoubling = 4 };
// GPU communicators' protocol.
enum class ProtoChoice : int32_t { kAuto = 0, kSimple = 1, kLL = 2 };

// RINGO_ALGO's and RINGO_PROTO's values ("" and unknown names: kAuto; the
// snapshot has refused anything else already).
Algorithm ParseAlgorithm(const std::string& name);
ProtoChoice ParseProto(const std::string& name);

struct SharedSettings {
  int32_t nchannels = 0;  // RINGO_NCHANNELS (0: chosen from the cores)
  Algorithm algorithm = Algorithm::kAuto;  // RINGO_ALGO
  ProtoChoice proto = ProtoChoice::kAuto;  // RINGO_PROTO
  int32_t check = 1;                       // RINGO_CHECK
  int32_t deterministic = 0;               // RINGO_DETERMINISTIC
  int32_t gpu_across_hosts = 0;            // RINGO_GPU_ACROSS_HOSTS
  int64_t slot_bytes = 0;                  // RINGO_SLOT_BYTES (0: chosen)
  int32_t net_balance = 1;                 // RINGO_NET_BALANCE
  int32_t gpu_wire = 0;                    // RINGO_GPU_WIRE
};
static_assert(sizeof(SharedSettings) == 40, "fixed layout: sent raw at init");

struct LocalSettings {
  int64_t spin_count = -1;    // RINGO_SPIN_COUNT (-1: chosen at init)
  int64_t yield_count = -1;   // RINGO_YIELD_COUNT
  int64_t crowded_wait = -1;  // RINGO_CROWDED_WAIT
  bool gpu_track_replays = false;  // RINGO_GPU_TRACK_REPLAYS
  bool gpu_device_scope = false;   // RINGO_GPU_DEVICE_SCOPE
  bool wire_staged = false;        // RINGO_WIRE_ENGINE=staged
};

struct CommSettings {
  SharedSettings shared;
  LocalSettings local;
};

CommSettings SettingsFrom(const base::Config& config);

// Whether every rank's shared settings are values a rank of this version
// sends; names the rank otherwise.
base::Status ValidateShared(const std::vector<SharedSettings>& all);

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_PLAN_SETTINGS_H_
