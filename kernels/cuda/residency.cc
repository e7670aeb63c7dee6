#include "kernels/cuda/residency.h"

#include <algorithm>

namespace ringo::kernels::gpu {

int64_t ResidentRingBlocks(const RingResidency& r) {
  return static_cast<int64_t>(std::max(r.sms, 0)) * std::max(r.blocks_per_sm, 0);
}

int ChannelsPerRank(const RingResidency& r, int ranks_on_gpu, int max_channels) {
  const int ranks = std::max(ranks_on_gpu, 1);
  return std::clamp(r.sms / ranks, 1, std::max(max_channels, 1));
}

base::Status CheckResidency(const RingResidency& r, int ranks_on_gpu, int nchannels,
                            const std::string& gpu) {
  const int64_t need = static_cast<int64_t>(ranks_on_gpu) * nchannels;
  const int64_t have = ResidentRingBlocks(r);
  if (need <= have) return base::OkStatus();
  return base::InvalidUsage(
      std::to_string(ranks_on_gpu) + " rank(s) of " + std::to_string(nchannels) +
      " channel(s) each share " + gpu + ": their ring kernels need " + std::to_string(need) +
      " blocks resident at once, but it holds " + std::to_string(have) + " (" +
      std::to_string(r.sms) + " multiprocessors x " + std::to_string(r.blocks_per_sm) +
      " ring block(s) each); ranks that wait on each other would never all run. Use fewer ranks "
      "per GPU, or fewer "
      "channels (RINGO_NCHANNELS)");
}

}  // namespace ringo::kernels::gpu
