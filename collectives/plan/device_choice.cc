#include "collectives/plan/device_choice.h"

#include <string>

namespace ringo::collectives {

using base::StatusOr;

DeviceRequest ParseDeviceRequest(const std::string& env_value) {
  if (env_value == "host") return DeviceRequest::kHost;
  if (env_value == "cuda") return DeviceRequest::kCuda;
  return DeviceRequest::kAuto;
}

StatusOr<WishChoice> ChooseWish(DeviceRequest api, DeviceRequest env, const CudaFacts& facts,
                                bool in_process) {
  const DeviceRequest request = api != DeviceRequest::kAuto ? api : env;
  const std::string source =
      api != DeviceRequest::kAuto ? "RINGO_DEVICE_CUDA" : "RINGO_DEVICE=cuda";
  WishChoice choice;
  if (request == DeviceRequest::kHost) return choice;
  if (request == DeviceRequest::kCuda) {
    if (facts.device_count == 0) {
      return base::InvalidUsage(source + ": no GPU is visible (" + facts.no_gpu_reason +
                                "); use RINGO_DEVICE_HOST or RINGO_DEVICE_AUTO for host memory");
    }
    if (!facts.kernels_built) {
      return base::InvalidUsage(source +
                                ": this build has no GPU kernels (built without the CUDA toolkit)");
    }
    choice.wish = DeviceWish::kCuda;
    return choice;
  }
  if (facts.device_count == 0) {
    choice.note = "no usable GPU (" + facts.no_gpu_reason + "): using host memory";
  } else if (!facts.kernels_built) {
    choice.note = std::to_string(facts.device_count) +
                  " GPU(s) visible, but this build has no GPU kernels: using host memory";
  } else {
    choice.wish = in_process ? DeviceWish::kCuda : DeviceWish::kCudaIfAll;
  }
  return choice;
}

StatusOr<DeviceAgreement> AgreeOnDevice(const std::vector<DeviceWish>& wishes,
                                        const std::vector<uint64_t>& hosts, bool across_hosts) {
  DeviceAgreement out;
  const int n = static_cast<int>(wishes.size());
  int host_rank = -1;      // the first rank that wants host memory
  int required_rank = -1;  // the first rank that requires a GPU
  for (int r = 0; r < n; ++r) {
    if (wishes[r] != DeviceWish::kHost && wishes[r] != DeviceWish::kCuda &&
        wishes[r] != DeviceWish::kCudaIfAll) {
      return base::Internal("rank " + std::to_string(r) + " sent an unknown device wish " +
                            std::to_string(static_cast<int32_t>(wishes[r])) +
                            " (another Ringo build?)");
    }
    if (wishes[r] == DeviceWish::kHost && host_rank < 0) host_rank = r;
    if (wishes[r] == DeviceWish::kCuda && required_rank < 0) required_rank = r;
  }
  bool any_gpu_wish = false;
  for (DeviceWish w : wishes) any_gpu_wish = any_gpu_wish || w != DeviceWish::kHost;
  if (!any_gpu_wish) return out;  // host memory everywhere, as asked
  if (required_rank >= 0 && host_rank >= 0) {
    return base::InvalidUsage(
        "rank " + std::to_string(required_rank) +
        " asked for GPU memory (RINGO_DEVICE_CUDA or RINGO_DEVICE=cuda) but rank " +
        std::to_string(host_rank) +
        " uses host memory (RINGO_DEVICE_HOST, RINGO_DEVICE=host, or no usable GPU): "
        "every rank of a communicator must use the same kind of memory");
  }
  if (host_rank >= 0) {
    out.note = "rank " + std::to_string(host_rank) + " uses host memory: so does every rank";
    return out;
  }
  // Ranks on several hosts too: their ring edges between hosts go through
  // pinned host memory and the network proxy (transport/connect/net_medium.cc),
  // where that is allowed.
  bool spanned = false;
  for (size_t r = 1; r < hosts.size(); ++r) spanned = spanned || hosts[r] != hosts[0];
  if (spanned && !across_hosts) {
    const std::string why =
        "the ranks span hosts, and GPU communicators across hosts are off until a GPU run has verified "
        "them (RINGO_GPU_ACROSS_HOSTS=1 on rank 0 turns them on; docs/gpu.md)";
    if (required_rank >= 0) {
      return base::InvalidUsage("rank " + std::to_string(required_rank) +
                                " asked for GPU memory (RINGO_DEVICE_CUDA or RINGO_DEVICE=cuda), but " + why);
    }
    out.note = why + ": host memory on every rank";
    return out;
  }
  out.hosts_spanned = spanned;
  out.cuda = n > 0;
  return out;
}

}  // namespace ringo::collectives
