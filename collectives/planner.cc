#include "collectives/planner.h"

#include <algorithm>

#include "base/device/dtype.h"

namespace ringo::collectives {
namespace {

constexpr int64_t kDefaultSlotBytes = 128 * 1024;
constexpr int kMaxChannels = 4;
// Below this much data per channel, another channel costs more (a thread
// handoff) than it gains.
constexpr int64_t kMinBytesPerChannel = 512 * 1024;

}  // namespace

CommGeometry ChooseGeometry(const base::Config& config, int nranks, int local_ranks, int cores) {
  CommGeometry g;
  g.slot_bytes = config.slot_bytes > 0 ? config.slot_bytes : kDefaultSlotBytes;
  if (config.nchannels > 0) {
    g.nchannels = static_cast<int>(std::min<int64_t>(config.nchannels, 64));
    g.fixed_channels = true;
  } else {
    const int per_rank_cores = std::max(1, cores / std::max(1, local_ranks));
    g.nchannels = std::clamp(per_rank_cores, 1, kMaxChannels);
  }
  if (nranks == 1) g.nchannels = 1;
  if (config.spin_count >= 0) {
    g.spin_count = static_cast<int>(std::min<int64_t>(config.spin_count, 1 << 30));
  } else {
    // Spinning only helps when the peer has a core of its own to run on.
    g.spin_count = local_ranks <= cores ? 20000 : 50;
  }
  return g;
}

CollPlan PlanCollective(const kernels::CollArgs& args, int nranks, const CommGeometry& geometry) {
  CollPlan plan;
  plan.slice_bytes = geometry.slot_bytes;
  int64_t bytes = args.count * static_cast<int64_t>(base::DataTypeSize(args.dtype));
  if (args.coll == kernels::Coll::kReduceScatter || args.coll == kernels::Coll::kAllGather) bytes *= nranks;
  const int64_t wanted = std::max<int64_t>(1, bytes / kMinBytesPerChannel);
  plan.nchannels = geometry.fixed_channels ? geometry.nchannels
                                           : static_cast<int>(std::min<int64_t>(geometry.nchannels, wanted));
  return plan;
}

}  // namespace ringo::collectives
