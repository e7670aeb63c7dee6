#include "collectives/plan/planner.h"

#include <algorithm>

#include "base/device/dtype.h"
#include "kernels/cuda/launch.h"
#include "kernels/oneshot_executor.h"

namespace ringo::collectives {
namespace {

// FIFO slots, and the slice of smaller collectives. 2 ranks, ringo-perf
// busbw with 128 KiB / 512 KiB slices: 1 MiB 12.7 / 11.7 GB/s, 4 MiB 12.1 /
// 10.5, 16 MiB 9.8 / 11.0, 64 MiB 7.3 / 9.7, 256 MiB 7.0 / 8.5.
constexpr int64_t kDefaultSlotBytes = 512 * 1024;
constexpr int64_t kSmallSliceBytes = 128 * 1024;
constexpr int64_t kP2pSlotBytes = 128 * 1024;
constexpr int64_t kWholeSlotFrom = 16 << 20;
constexpr int kMaxChannels = 4;
// Across hosts, one channel per network device, up to this many.
constexpr int kMaxNetChannels = 16;
// Below this much data per channel, another channel costs more (a thread
// handoff) than it gains.
constexpr int64_t kMinBytesPerChannel = 512 * 1024;
// The one-shot board's buffer, and the largest post the planner sends there
// unasked: above it the ring's 2(N-1) pipelined steps move less data per rank
// than N reads of every post.
constexpr int64_t kBoardBytes = 64 * 1024;
constexpr int64_t kStreamOutputBytes = 8 << 20;
// One-shot posts up to this size go in the board's LL format (flag and data
// in one cache line). 2 ranks, ringo-perf means of 20000 calls, 5
// interleaved launches, counter then data / LL: 8 B 0.21 / 0.19 us, 64 B
// 0.21 / 0.19, 128 B 0.21 / 0.21, 256 B 0.22 / 0.28 (unpacking the words
// costs more than the line it saves).
constexpr int64_t kOneShotLLBytes = 64;

// GPU rings (unmeasured starting points, NCCL-like): 8 x 512 KiB Simple
// slices (each slot 16 bytes more, for the shift of unaligned buffers) and 8
// x 16 KiB of LL data per connector; a channel per MiB, up to one block per
// multiprocessor shared among the ranks on a GPU (kernels/cuda/residency.h),
// or 4 where the GPU is not known (the tests' chunk arithmetic).
constexpr int64_t kDeviceSlotBytes = 512 * 1024;
constexpr int64_t kDeviceLLSliceBytes = 16 * 1024;
constexpr int kDeviceChannels = 4;
// A GPU ring that spans hosts: each channel is a network connection each
// way, two pinned FIFOs of 8 slots and a share of one proxy thread, and
// the network, not the GPU, bounds it: 4 channels (8 TCP streams at
// RINGO_NET_STREAMS' default, 4 queue pairs over verbs; 32 MiB of pinned
// slots), unless RINGO_NCHANNELS says.
constexpr int kNetDeviceChannels = 4;
constexpr int64_t kMinBytesPerDeviceChannel = 1 << 20;

int64_t CollectiveBytes(const kernels::CollArgs& args, int nranks) {
  int64_t bytes = args.count * static_cast<int64_t>(base::DataTypeSize(args.dtype));
  if (args.coll == kernels::Coll::kReduceScatter || args.coll == kernels::Coll::kAllGather) bytes *= nranks;
  return bytes;
}

}  // namespace

int ChannelsForCores(int cores, int ranks_on_machine) {
  return std::clamp(cores / std::max(1, ranks_on_machine), 1, kMaxChannels);
}

void SetWaits(const LocalSettings& local, bool oversubscribed, CommGeometry* g) {
  g->spin_count = local.spin_count >= 0 ? static_cast<int>(std::min<int64_t>(local.spin_count, 1 << 30))
                                        : (oversubscribed ? 0 : 20000);
  g->yield_count = local.yield_count >= 0 ? static_cast<int>(std::min<int64_t>(local.yield_count, 1 << 30))
                                          : (oversubscribed ? 50000 : 1000);
  // Board waits that yield only to a neighbour that can move (board.h). 4
  // ranks on 2 cores, 8 B to 512 B all-reduce, mean per call over 10000
  // (ringo-perf -n 10000, four alternating launches each): 9.6-10.7 us
  // against 11.6-13.5 us when every poll yields.
  g->crowded = local.crowded_wait >= 0 ? local.crowded_wait == 1 : oversubscribed;
}

int ChannelsForNetDevices(int channels, int net_devices) {
  return std::max(channels, std::min(net_devices, kMaxNetChannels));
}

CommGeometry ChooseGeometry(const CommSettings& settings, int nranks, int local_ranks, int cores, int machine_ranks,
                            bool net) {
  const SharedSettings& shared = settings.shared;
  const LocalSettings& local = settings.local;
  CommGeometry g;
  machine_ranks = std::max(machine_ranks, local_ranks);
  g.slot_bytes = shared.slot_bytes > 0 ? shared.slot_bytes : kDefaultSlotBytes;
  g.fixed_slot = shared.slot_bytes > 0;
  if (shared.nchannels > 0) {
    g.nchannels = std::min(shared.nchannels, 64);
    g.fixed_channels = true;
  } else {
    g.nchannels = ChannelsForCores(cores, machine_ranks);
  }
  if (nranks == 1) g.nchannels = 1;
  g.algorithm = shared.algorithm;
  g.check = shared.check != 0;
  g.deterministic = shared.deterministic != 0;
  g.board_bytes = nranks > 1 && local_ranks == nranks ? kBoardBytes : 0;
  // Spinning only helps when the peer has a core of its own to run on; when
  // ranks outnumber cores, the waiter gives its core away instead. Across
  // hosts the proxy thread must run too: every thread of the machine's ranks counts.
  const bool oversubscribed =
      machine_ranks > cores || (net && static_cast<int64_t>(machine_ranks) * (g.nchannels + 1) > cores);
  // Defaults measured with ringo-perf on 2 cores: 4 ranks' 8-byte all-reduce
  // took 29 us with 2000 yields before sleeping and 8-10 us with 50000+; no
  // spinning before the yields (medians, 8 B: 12.5-12.9 us against 14.4-24 us
  // with 50 spins; 8 MiB: 3.3-3.7 ms against 3.3-5.1 ms).
  SetWaits(local, oversubscribed, &g);
  // LL posts where every rank has a core to poll on (a fact every rank
  // sees alike, unlike RINGO_CROWDED_WAIT).
  g.oneshot_ll_bytes = g.board_bytes > 0 && !oversubscribed ? kOneShotLLBytes : 0;
  // Per collective, with the host kernels of this version: the largest
  // message (nccl-tests' size: ReduceScatter its input, AllGather its
  // output) sent one-shot, and the smallest tried direct, where each beats
  // the ring. Medians of 3 interleaved ringo-perf -R 1 launches on 2 cores,
  // ring / one-shot / direct, in us:
  //   2 ranks: AllReduce 16 KiB 3.6 / 1.6 / 1.7, 32 KiB 6.0 / 2.8 / 2.2;
  //   ReduceScatter 4 KiB 0.9 / 0.6 / 0.9, 32 KiB 2.5 / 2.5 / 1.4;
  //   AllGather 32 KiB 2.2 / 1.8 / 2.4, 256 KiB 14 / - / 4.4; Broadcast
  //   4 KiB 0.6 / 0.5 / 0.8, 32 KiB 1.7 / 1.6 / 1.0; Reduce 32 KiB 3.7 /
  //   2.8 / 2.7, 256 KiB 33 / - / 8.5.
  //   4 ranks (each ring hop a trip through the scheduler; AllReduce means
  //   of 1000 calls): AllReduce 16 KiB - / 12.1 / 12.1, 32 KiB - / 17.5 /
  //   13.1; ReduceScatter 32 KiB 11.7 / 7.2 / 10.8, 256 KiB 53 / - / 17;
  //   AllGather 32 KiB 11.8 / 8.5 / 10.8, 256 KiB 39 / - / 16; Broadcast
  //   32 KiB 2.3 / 5.3 / 8.3, 256 KiB 16 / 12.5 / 12.3, 2 MiB 324 / - / 88;
  //   Reduce 32 KiB 3.2 / 4.5 / 17, 256 KiB 22 / 23 / 28, 2 MiB 339 / - / 84.
  // 0: never. Above the board's size nothing goes one-shot.
  if (g.board_bytes > 0) {
    using kernels::Coll;
    auto set = [&](Coll c, int64_t oneshot_roomy, int64_t direct_roomy, int64_t oneshot_crowded,
                   int64_t direct_crowded) {
      g.oneshot_auto_bytes[static_cast<int>(c)] = oversubscribed ? oneshot_crowded : oneshot_roomy;
      g.direct_auto_bytes[static_cast<int>(c)] = oversubscribed ? direct_crowded : direct_roomy;
    };
    set(Coll::kAllReduce, 16 << 10, 32 << 10, 16 << 10, 32 << 10);
    set(Coll::kReduceScatter, 8 << 10, 16 << 10, 32 << 10, 64 << 10);
    set(Coll::kAllGather, 32 << 10, 64 << 10, 64 << 10, 128 << 10);
    set(Coll::kBroadcast, 8 << 10, 16 << 10, 0, 256 << 10);
    set(Coll::kReduce, 16 << 10, 32 << 10, 0, 1 << 20);
  }
  return g;
}

CollPlan PlanRingCollective(const kernels::CollArgs& args, int nranks, const CommGeometry& geometry) {
  CollPlan plan;
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
  return plan;
}

CollPlan PlanCollective(const kernels::CollArgs& args, int nranks, const CommGeometry& geometry) {
  // A premul-sum multiplies each rank's input by that rank's own scalar,
  // which only the ring applies (each rank to its own input; the one-shot
  // and direct paths reduce every rank's input on each rank).
  if (args.op == base::RedOp::kPreMulSum) return PlanRingCollective(args, nranks, geometry);
  const int coll = static_cast<int>(args.coll);
  const int64_t bytes = CollectiveBytes(args, nranks);
  const bool fits_board = geometry.board_bytes > 0 && kernels::OneShotPostBytes(args, nranks) <= geometry.board_bytes;
  if (fits_board && geometry.algorithm != Algorithm::kRing && geometry.algorithm != Algorithm::kDirect &&
      (geometry.algorithm == Algorithm::kOneShot || bytes <= geometry.oneshot_auto_bytes[coll])) {
    CollPlan plan;
    plan.algorithm = Algorithm::kOneShot;
    plan.nchannels = 1;
    return plan;
  }
  CollPlan plan = PlanRingCollective(args, nranks, geometry);
  if (nranks > 1 && geometry.board_bytes > 0 &&
      (geometry.algorithm == Algorithm::kDirect ||
       (geometry.algorithm == Algorithm::kAuto && geometry.direct_auto_bytes[coll] > 0 &&
        bytes >= geometry.direct_auto_bytes[coll]))) {
    plan.algorithm = Algorithm::kDirect;
    // Without the direct path, the one-shot where it beats the ring (the
    // collectives it does for small messages, up to the board's size: 2
    // ranks, AllReduce 32 KiB ring 6.0 us, one-shot 2.8 us).
    if (fits_board && geometry.oneshot_auto_bytes[coll] > 0) plan.fallback = Algorithm::kOneShot;
  }
  return plan;
}

DeviceGeometry ChooseDeviceGeometry(const CommSettings& settings, int nranks) {
  return ChooseDeviceGeometry(settings, nranks, kernels::gpu::RingResidency{}, 1);
}

DeviceGeometry ChooseDeviceGeometry(const CommSettings& settings, int nranks,
                                    const kernels::gpu::RingResidency& residency,
                                    int ranks_per_gpu, bool hosts_spanned) {
  const SharedSettings& shared = settings.shared;
  DeviceGeometry g;
  const int64_t slice = shared.slot_bytes > 0 ? shared.slot_bytes : kDeviceSlotBytes;
  g.slot_bytes = slice + kernels::gpu::kSlotShiftPad;  // a Simple slot carries `slice` at any shift
  g.fixed_slot = shared.slot_bytes > 0;
  // LL slices never exceed the Simple slice, so RINGO_SLOT_BYTES shrinks both
  // (the tests reach multi-chunk LL paths with small counts that way).
  const int64_t ll_slice = std::min(kDeviceLLSliceBytes, slice) /
                           kernels::gpu::kLLDataBytesPerLine * kernels::gpu::kLLDataBytesPerLine;
  g.ll_slot_bytes = kernels::gpu::LLSlotBytesFor(ll_slice);
  if (shared.nchannels > 0) {
    g.nchannels = std::min(shared.nchannels, kernels::gpu::kMaxChannels);
    g.fixed_channels = true;
  } else if (residency.sms > 0) {
    g.nchannels =
        kernels::gpu::ChannelsPerRank(residency, ranks_per_gpu, kernels::gpu::kMaxChannels);
  } else {
    g.nchannels = kDeviceChannels;
  }
  if (hosts_spanned && !g.fixed_channels) g.nchannels = std::min(g.nchannels, kNetDeviceChannels);
  if (nranks == 1) g.nchannels = 1;
  g.proto = shared.proto;
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

int64_t P2pSlotBytes(const CommSettings& settings) {
  return settings.shared.slot_bytes > 0 ? settings.shared.slot_bytes : kP2pSlotBytes;
}

}  // namespace ringo::collectives
