// Which memory a new communicator uses, decided in two steps that need no
// GPU to test: each rank turns its request (ringoConfig_t's device_kind, else
// RINGO_DEVICE) and what it sees (GPUs, kernels) into a wish; ranks that are
// separate processes then agree on one kind from every rank's wish and host,
// so they all decide alike.
//
// Thread safety: pure functions.
#ifndef RINGO_COLLECTIVES_PLAN_DEVICE_CHOICE_H_
#define RINGO_COLLECTIVES_PLAN_DEVICE_CHOICE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace ringo::collectives {

// A request, from the API (ringoDeviceKind_t) or from RINGO_DEVICE.
enum class DeviceRequest : int { kAuto = 0, kHost = 1, kCuda = 2 };

// RINGO_DEVICE's value as the config snapshot holds it ("", "auto", "host",
// "cuda"; the snapshot has already refused anything else).
DeviceRequest ParseDeviceRequest(const std::string& env_value);

// One rank's wish, sent to the others at init (PeerInfo::device_wish).
enum class DeviceWish : int32_t {
  kHost = 0,       // host memory
  kCuda = 1,       // GPU memory, required (RINGO_DEVICE_CUDA or RINGO_DEVICE=cuda)
  kCudaIfAll = 2,  // GPU memory if every rank can (AUTO across processes with a GPU)
};

// The wish of a rank that stays where `device` says (a CUDA ordinal, or -1
// for host memory): a split's or shrink's child that inherits its place.
inline DeviceWish WishToStay(int device) { return device >= 0 ? DeviceWish::kCuda : DeviceWish::kHost; }

struct CudaFacts {
  int device_count = 0;        // visible GPUs (base::ProbeCuda)
  std::string no_gpu_reason;   // why there is none
  bool kernels_built = false;  // kernels::gpu::KernelsBuilt
};

struct WishChoice {
  DeviceWish wish = DeviceWish::kHost;
  std::string note;  // why AUTO chose host memory ("" otherwise), for the log
};

// The `api` request wins unless it is kAuto, then `env` (RINGO_DEVICE)
// applies. kHost: host. kCuda: InvalidUsage naming why when no GPU is
// visible or the build has no kernels. kAuto: host when no GPU is usable;
// otherwise kCuda when `in_process` (one rank, or every rank a thread of this
// process), kCudaIfAll across processes.
base::StatusOr<WishChoice> ChooseWish(DeviceRequest api, DeviceRequest env, const CudaFacts& facts,
                                      bool in_process);

struct DeviceAgreement {
  bool cuda = false;
  bool hosts_spanned = false;  // GPU memory on ranks of several hosts
  std::string note;  // why wishes for a GPU ended on host memory ("" otherwise)
};

// Every rank's wish and host (same order: by rank) -> one decision every rank
// reaches alike. GPU memory when every rank wishes for it, on one host, or
// on several where `across_hosts` allows it (RINGO_GPU_ACROSS_HOSTS: edges
// between hosts go through pinned host memory and the network; off until a
// GPU run has verified it). A required GPU that cannot be had (another rank
// wants host memory, or the ranks span hosts and that is not allowed) is
// InvalidUsage naming why; kCudaIfAll then falls back to host memory.
base::StatusOr<DeviceAgreement> AgreeOnDevice(const std::vector<DeviceWish>& wishes,
                                              const std::vector<uint64_t>& hosts, bool across_hosts);

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_PLAN_DEVICE_CHOICE_H_
