#include "collectives/planner.h"

#include <algorithm>

#include "base/device/dtype.h"
#include "kernels/cuda/launch.h"
#include "kernels/host_oneshot.h"

namespace ringo::collectives {
namespace {

// FIFO slots, and the slice of smaller collectives. 2 ranks, ringo-perf
// busbw with 128 KiB / 512 KiB slices: 1 MiB 12.7 / 11.7 GB/s, 4 MiB 12.1 /
// 10.5, 16 MiB 9.8 / 11.0, 64 MiB 7.3 / 9.7, 256 MiB 7.0 / 8.5.
constexpr int64_t kDefaultSlotBytes = 512 * 1024;
constexpr int64_t kSmallSliceBytes = 128 * 1024;
constexpr int64_t kWholeSlotFrom = 16 << 20;
constexpr int kMaxChannels = 4;
// Below this much data per channel, another channel costs more (a thread
// handoff) than it gains.
constexpr int64_t kMinBytesPerChannel = 512 * 1024;
// The one-shot board's buffer, and the largest post the planner sends there
// unasked: above it the ring's 2(N-1) pipelined steps move less data per rank
// than N reads of every post.
constexpr int64_t kBoardBytes = 64 * 1024;
constexpr int64_t kStreamOutputBytes = 8 << 20;

// GPU rings (unmeasured starting points, NCCL-like): 8 x 512 KiB Simple slots
// and 8 x 16 KiB of LL data per connector; a channel per MiB up to 4 (several
// ranks share one GPU's SMs).
constexpr int64_t kDeviceSlotBytes = 512 * 1024;
constexpr int64_t kDeviceLLSliceBytes = 16 * 1024;
constexpr int kDeviceChannels = 4;
constexpr int64_t kMinBytesPerDeviceChannel = 1 << 20;

int64_t CollectiveBytes(const kernels::CollArgs& args, int nranks) {
  int64_t bytes = args.count * static_cast<int64_t>(base::DataTypeSize(args.dtype));
  if (args.coll == kernels::Coll::kReduceScatter || args.coll == kernels::Coll::kAllGather) bytes *= nranks;
  return bytes;
}

}  // namespace

CommGeometry ChooseGeometry(const base::Config& config, int nranks, int local_ranks, int cores) {
  CommGeometry g;
  g.slot_bytes = config.slot_bytes > 0 ? config.slot_bytes : kDefaultSlotBytes;
  g.fixed_slot = config.slot_bytes > 0;
  if (config.nchannels > 0) {
    g.nchannels = static_cast<int>(std::min<int64_t>(config.nchannels, 64));
    g.fixed_channels = true;
  } else {
    const int per_rank_cores = std::max(1, cores / std::max(1, local_ranks));
    g.nchannels = std::clamp(per_rank_cores, 1, kMaxChannels);
  }
  if (nranks == 1) g.nchannels = 1;
  g.algorithm = ParseAlgorithm(config.algo);
  g.board_bytes = nranks > 1 && local_ranks == nranks ? kBoardBytes : 0;
  // Spinning only helps when the peer has a core of its own to run on; when
  // ranks outnumber cores, the waiter gives its core away instead.
  const bool oversubscribed = local_ranks > cores;
  // Defaults measured with ringo-perf on 2 cores: 4 ranks' 8-byte all-reduce
  // took 29 us with 2000 yields before sleeping and 8-10 us with 50000+; no
  // spinning before the yields (medians, 8 B: 12.5-12.9 us against 14.4-24 us
  // with 50 spins; 8 MiB: 3.3-3.7 ms against 3.3-5.1 ms).
  g.spin_count = config.spin_count >= 0 ? static_cast<int>(std::min<int64_t>(config.spin_count, 1 << 30))
                                        : (oversubscribed ? 0 : 20000);
  g.yield_count = config.yield_count >= 0 ? static_cast<int>(std::min<int64_t>(config.yield_count, 1 << 30))
                                          : (oversubscribed ? 50000 : 1000);
  // Board waits that yield only to a neighbour that can move (board.h). 4
  // ranks on 2 cores, 8 B to 512 B all-reduce, mean per call over 10000
  // (ringo-perf -n 10000, four alternating launches each): 9.6-10.7 us
  // against 11.6-13.5 us when every poll yields.
  g.crowded = config.crowded_wait >= 0 ? config.crowded_wait == 1 : oversubscribed;
  // One-shot beats the ring up to about 2 KiB per rank when each rank has a
  // core (2 ranks, ringo-perf medians: 2 KiB 1.6-1.8 us either way, 4 KiB
  // one-shot 2.4 us, ring 1.9 us), and up to the whole board when ranks
  // outnumber cores (4 ranks on 2 cores, 64 KiB: one-shot 43 us, ring 49-65 us;
  // each ring hop then costs a trip through the scheduler).
  g.oneshot_auto_bytes = oversubscribed ? kBoardBytes : 2 * 1024;
  // Direct from where it beats the ring: ringo-perf -R 1 medians on 2 cores,
  // direct / ring. AllReduce, 2 ranks: 128 KiB 12.8 / 12.3 us, 256 KiB 19.6
  // / 22.7; 4 ranks: 64 KiB 38 / 48, 1 MiB 128 / 291. 2 ranks (x8 sizes):
  // ReduceScatter 4 MiB 237 / 215, 32 MiB 2197 / 2814; AllGather 64 KiB 6.2
  // / 5.4, 512 KiB 15.0 / 21.0; Broadcast 512 KiB 24.1 / 21.6, 4 MiB 112 /
  // 194; Reduce 64 KiB 9.1 / 8.1, 512 KiB 32.4 / 40.3. 4 ranks (x4 sizes):
  // ReduceScatter and AllGather win from 128 KiB (37.5 / 47.9, 32.5 / 42.1);
  // Broadcast and Reduce from 2 MiB (210 / 313, 181 / 381; at 512 KiB 82 /
  // 67 and 71 / 65). Below the one-shot's size the one-shot goes first.
  if (g.board_bytes > 0) {
    using kernels::Coll;
    auto set = [&](Coll c, int64_t roomy, int64_t crowded) {
      g.direct_auto_bytes[static_cast<int>(c)] = oversubscribed ? crowded : roomy;
    };
    set(Coll::kAllReduce, 256 << 10, kBoardBytes);
    set(Coll::kReduceScatter, 32 << 20, 128 << 10);
    set(Coll::kAllGather, 512 << 10, 128 << 10);
    set(Coll::kBroadcast, 4 << 20, 2 << 20);
    set(Coll::kReduce, 512 << 10, 2 << 20);
  }
  return g;
}

ProtoChoice ParseProto(const std::string& name) {
  if (name == "simple") return ProtoChoice::kSimple;
  if (name == "ll") return ProtoChoice::kLL;
  return ProtoChoice::kAuto;
}

Algorithm ParseAlgorithm(const std::string& name) {
  if (name == "ring") return Algorithm::kRing;
  if (name == "oneshot") return Algorithm::kOneShot;
  if (name == "direct") return Algorithm::kDirect;
  return Algorithm::kAuto;
}

CollPlan PlanCollective(const kernels::CollArgs& args, int nranks, const CommGeometry& geometry) {
  CollPlan plan;
  const int64_t post = kernels::OneShotPostBytes(args, nranks);
  if (geometry.board_bytes > 0 && geometry.algorithm != Algorithm::kRing &&
      geometry.algorithm != Algorithm::kDirect &&
      post <= geometry.board_bytes &&
      (geometry.algorithm == Algorithm::kOneShot || post <= geometry.oneshot_auto_bytes)) {
    plan.algorithm = Algorithm::kOneShot;
    plan.nchannels = 1;
    return plan;
  }
  const int64_t bytes = CollectiveBytes(args, nranks);
  plan.slice_bytes = geometry.fixed_slot || bytes >= kWholeSlotFrom
                         ? geometry.slot_bytes
                         : std::min(geometry.slot_bytes, kSmallSliceBytes);
  const int64_t wanted = std::max<int64_t>(1, bytes / kMinBytesPerChannel);
  // An output this large is not read again before the call returns, and
  // writing it around the cache keeps the FIFO slots cached.
  plan.stream_output = bytes >= kStreamOutputBytes;
  plan.nchannels = geometry.fixed_channels ? geometry.nchannels
                                           : static_cast<int>(std::min<int64_t>(geometry.nchannels, wanted));
  if (nranks > 1 && geometry.board_bytes > 0 &&
      (geometry.algorithm == Algorithm::kDirect ||
       (geometry.algorithm == Algorithm::kAuto && geometry.direct_auto_bytes[static_cast<int>(args.coll)] > 0 &&
        bytes >= geometry.direct_auto_bytes[static_cast<int>(args.coll)]))) {
    plan.algorithm = Algorithm::kDirect;
  }
  return plan;
}

DeviceGeometry ChooseDeviceGeometry(const base::Config& config, int nranks) {
  DeviceGeometry g;
  g.slot_bytes = config.slot_bytes > 0 ? config.slot_bytes : kDeviceSlotBytes;
  g.fixed_slot = config.slot_bytes > 0;
  // LL slices never exceed the Simple slot, so RINGO_SLOT_BYTES shrinks both
  // (the tests reach multi-chunk LL paths with small counts that way).
  const int64_t ll_slice = std::min(kDeviceLLSliceBytes, g.slot_bytes) / kernels::gpu::kLLDataBytesPerLine *
                           kernels::gpu::kLLDataBytesPerLine;
  g.ll_slot_bytes = kernels::gpu::LLSlotBytesFor(ll_slice);
  if (config.nchannels > 0) {
    g.nchannels = static_cast<int>(std::min<int64_t>(config.nchannels, kernels::gpu::kMaxChannels));
    g.fixed_channels = true;
  } else {
    g.nchannels = kDeviceChannels;
  }
  if (nranks == 1) g.nchannels = 1;
  g.proto = ParseProto(config.proto);
  return g;
}

DeviceSlices MaxDeviceSlices(const DeviceGeometry& geometry) {
  kernels::gpu::DeviceFifo sizes;  // what one connector carries
  sizes.slot_bytes = static_cast<uint64_t>(geometry.slot_bytes);
  sizes.ll_slot_bytes = static_cast<uint64_t>(geometry.ll_slot_bytes);
  return DeviceSlices{kernels::gpu::MaxSliceBytes(sizes, kernels::gpu::Proto::kSimple),
                      kernels::gpu::MaxSliceBytes(sizes, kernels::gpu::Proto::kLL)};
}

DevicePlan PlanDeviceCollective(const kernels::CollArgs& args, int nranks, const DeviceGeometry& geometry,
                                int64_t max_simple_slice, int64_t max_ll_slice) {
  DevicePlan plan;
  const int64_t bytes = CollectiveBytes(args, nranks);
  const int64_t esize = static_cast<int64_t>(base::DataTypeSize(args.dtype));
  bool ll = bytes <= static_cast<int64_t>(nranks) * max_ll_slice;
  if (geometry.proto == ProtoChoice::kSimple) ll = false;
  if (geometry.proto == ProtoChoice::kLL) ll = true;
  if (ll) {
    plan.proto = kernels::gpu::Proto::kLL;
    plan.slice_bytes = max_ll_slice;
    plan.nchannels = geometry.fixed_channels ? geometry.nchannels : 1;
  } else {
    plan.proto = kernels::gpu::Proto::kSimple;
    plan.slice_bytes = geometry.fixed_slot || bytes >= kWholeSlotFrom ? max_simple_slice
                                                                      : std::min(max_simple_slice, kSmallSliceBytes);
    const int64_t wanted = std::max<int64_t>(1, bytes / kMinBytesPerDeviceChannel);
    plan.nchannels = geometry.fixed_channels ? geometry.nchannels
                                             : static_cast<int>(std::min<int64_t>(geometry.nchannels, wanted));
  }
  plan.slice_bytes = std::max(plan.slice_bytes, esize);
  return plan;
}

}  // namespace ringo::collectives
