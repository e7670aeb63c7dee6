// The planner: FIFO geometry at init and, per collective, how many channels
// run and how large each chunk is. Pure functions of their inputs, so every
// rank computes the same plan.
#ifndef RINGO_COLLECTIVES_PLAN_PLANNER_H_
#define RINGO_COLLECTIVES_PLAN_PLANNER_H_

#include <array>
#include <cstdint>
#include <string>

#include "collectives/plan/settings.h"
#include "kernels/cuda/device_types.h"
#include "kernels/cuda/residency.h"
#include "kernels/coll_args.h"

namespace ringo::collectives {

struct CommGeometry {
  int nchannels = 1;       // channels connected at init
  int64_t slot_bytes = 0;  // FIFO slot size
  int spin_count = 0;      // polls with a pause before yielding
  int yield_count = 0;     // polls with sched_yield before sleeping
  bool crowded = false;    // ranks outnumber cores: board waits yield only to a rank that can move
  bool fixed_channels = false;  // RINGO_NCHANNELS set: every collective uses them all
  bool fixed_slot = false;      // RINGO_SLOT_BYTES set: every ring collective uses whole slots
  Algorithm algorithm = Algorithm::kAuto;  // RINGO_ALGO
  int64_t board_bytes = 0;  // one-shot board buffer; 0: no board (ranks on several hosts)
  bool check = true;           // RINGO_CHECK: signatures compared (kernels/coll_signature.h)
  bool deterministic = false;  // RINGO_DETERMINISTIC: reductions in rank order, as a ring chain rounds
  int64_t oneshot_ll_bytes = 0;  // one-shot posts up to this size in the board's LL format
  // Per collective (index: kernels::Coll), in nccl-tests' message bytes
  // (ReduceScatter: its input; AllGather: its output), when RINGO_ALGO is
  // unset: the largest message sent one-shot (its post must also fit the
  // board), and the smallest tried direct; 0: never.
  std::array<int64_t, 5> oneshot_auto_bytes{};
  std::array<int64_t, 5> direct_auto_bytes{};
  // Across hosts: the most network devices (NICs, ports) any rank's channels
  // spread over, and whether ring channels take parts of each collective in
  // proportion to their measured rates (engines/channel_balance.h) instead
  // of equal parts: where channels cross more than one device and results
  // need not be reproducible (not RINGO_DETERMINISTIC).
  int net_devices = 0;
  bool balance = false;
};

// The waits' spin and yield counts and the crowded flag: where this
// machine's ranks and their threads outnumber its cores, no spinning (the
// settings' own values where set). ChooseGeometry's, and again after the
// channels grow for the network devices.
void SetWaits(const LocalSettings& local, bool oversubscribed, CommGeometry* g);

// Channels across hosts: at least one per network device (so every NIC
// carries a channel), at most 16, unless RINGO_NCHANNELS fixed them.
int ChannelsForNetDevices(int channels, int net_devices);

// The channels a rank runs when `ranks_on_machine` share `cores` (one
// thread each).
int ChannelsForCores(int cores, int ranks_on_machine);

// Chosen at init from the configuration, the rank counts and the cores.
// `local_ranks` share this rank's host (memory); `machine_ranks` (at least
// as many) share its CPUs: hosts that are containers or network namespaces
// of one machine. `net`: some ring edge crosses hosts, and a proxy thread
// per rank (transport/net/proxy.h) needs a core beside the channels.
CommGeometry ChooseGeometry(const CommSettings& settings, int nranks, int local_ranks, int cores,
                            int machine_ranks = 0, bool net = false);

// The FIFO slot of point-to-point pairs (engines/host_p2p.h):
// RINGO_SLOT_BYTES where set, else 128 KiB (8 slots, 1 MiB per pair and
// direction).
int64_t P2pSlotBytes(const CommSettings& settings);

struct CollPlan {
  // kRing, kOneShot, or kDirect (whose ring fields below are the fallback's)
  Algorithm algorithm = Algorithm::kRing;
  // kDirect only: what runs when some rank's buffers are out of the others'
  // reach: kOneShot where the data fits the board, kRing otherwise.
  Algorithm fallback = Algorithm::kRing;
  int nchannels = 1;        // channels this collective uses (<= geometry's)
  int64_t slice_bytes = 0;  // chunk size (<= slot size, a multiple of 64)
  bool stream_output = false;  // non-temporal stores for the output
};

CollPlan PlanCollective(const kernels::CollArgs& args, int nranks, const CommGeometry& geometry);
// The ring's part of a plan (channels, chunk, streamed output) for `args`,
// whatever algorithm PlanCollective would pick.
CollPlan PlanRingCollective(const kernels::CollArgs& args, int nranks, const CommGeometry& geometry);

// ---- GPU communicators ----

// FIFO geometry of a GPU ring, chosen at init.
struct DeviceGeometry {
  int nchannels = 1;            // channels connected (one CUDA block each)
  int64_t slot_bytes = 0;       // Simple slot: the slice plus kernels::gpu::kSlotShiftPad
  int64_t ll_slot_bytes = 0;    // LL slot (16-byte lines, half of it data)
  bool fixed_channels = false;  // RINGO_NCHANNELS set
  bool fixed_slot = false;      // RINGO_SLOT_BYTES set
  ProtoChoice proto = ProtoChoice::kAuto;  // RINGO_PROTO
};

// With the GPU unknown (4 channels); for the slice arithmetic alone.
DeviceGeometry ChooseDeviceGeometry(const CommSettings& settings, int nranks);
// For a ring whose GPUs hold `residency` of the ring kernel (the smallest
// GPU's) and carry up to `ranks_per_gpu` ranks each: channels per rank
// kernels::gpu::ChannelsPerRank, at most 4 where the ring spans hosts (a
// channel is a network connection each way), unless RINGO_NCHANNELS says.
DeviceGeometry ChooseDeviceGeometry(const CommSettings& settings, int nranks,
                                    const kernels::gpu::RingResidency& residency,
                                    int ranks_per_gpu, bool hosts_spanned = false);

struct DevicePlan {
  kernels::gpu::Proto proto = kernels::gpu::Proto::kSimple;
  int nchannels = 1;
  int64_t slice_bytes = 0;  // <= the protocol's largest slice, at least one element
};

// Protocol, channels and chunk of one GPU collective. `max_simple_slice` and
// `max_ll_slice` are what a connector carries (kernels::gpu::MaxSliceBytes).
// LL for messages of at most one LL slice per rank, Simple above, unless
// RINGO_PROTO forces one. The same inputs give the same plan on every rank.
// The largest Simple and LL slices one connector of `geometry` carries
// (kernels::gpu::MaxSliceBytes of its slots).
struct DeviceSlices {
  int64_t simple = 0;
  int64_t ll = 0;
};
DeviceSlices MaxDeviceSlices(const DeviceGeometry& geometry);

DevicePlan PlanDeviceCollective(const kernels::CollArgs& args, int nranks, const DeviceGeometry& geometry,
                                int64_t max_simple_slice, int64_t max_ll_slice);

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_PLAN_PLANNER_H_
