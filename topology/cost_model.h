// The alpha-beta cost model (docs/performance.md): a ring all-reduce of S bytes
// over N ranks takes 2(N-1) steps, each costing alpha (latency) plus S/N bytes
// at beta (bandwidth): t = 2(N-1) * (alpha + S / (N * beta)). Pure functions.
#ifndef RINGO_TOPOLOGY_COST_MODEL_H_
#define RINGO_TOPOLOGY_COST_MODEL_H_

#include <array>
#include <cstdint>
#include <vector>

#include "topology/paths.h"
#include "topology/ring_plan.h"
#include "topology/ring_search.h"

namespace ringo::topology {

// Per path type: alpha, the latency of one step (a slot handed to the next
// rank: a store, a fence, a flag seen by the peer), and beta, the bandwidth
// assumed when no measured or graph figure is at hand. Starting values from
// published figures (NVLink and PCIe round trips of about 1 us, the socket
// interconnect adding about 1 us, RDMA about 3 us, TCP about 20 us;
// shared-memory copies at memcpy speed); replace them with measurements
// (ringo-perf) as they come.
struct CostModel {
  std::array<double, kNumPathTypes> alpha_us;
  std::array<double, kNumPathTypes> beta_gbps;
  // GPU ranks between hosts stage every slot through pinned host memory
  // (transport/connect/net_medium.cc; GPUDirect RDMA off). Per network step
  // the hand-off adds staging_alpha_us (the kernel's tail crossing PCIe to
  // the proxy, the receiving kernel polling host memory), and each byte
  // crosses the PCIe uplink between its GPU's and NIC's switch and the CPU
  // twice in each direction (GPU to host memory and host memory to the NIC;
  // NIC to host memory and host memory to the GPU), so a channel through a
  // network edge carries at most staging_gbps: half a PCIe Gen5 x16
  // uplink's 50 GB/s a direction, each channel's GPU and NIC taken to have
  // an uplink of their own (a model: channels sharing one carry less).
  double staging_alpha_us = 2.0;
  double staging_gbps = 25.0;

  static CostModel Default();
};

// The default beta of a path type (CostModel::Default().beta_gbps).
double DefaultBetaGbps(PathType type);

struct Prediction {
  int nranks = 0;
  double bytes = 0;
  double alpha_us = 0;   // per step
  double beta_gbps = 0;  // per direction, all channels together
  double time_us = 0;
  double algbw_gbps = 0;  // bytes / time
  double busbw_gbps = 0;  // algbw * 2(N-1)/N, nccl-tests' bus bandwidth
};

// t = 2(N-1) * (alpha + S / (N * beta)); N = 1 takes no time.
Prediction PredictRingAllReduce(int nranks, double bytes, double alpha_us, double beta_gbps);
// Recursive doubling (collectives/engines/doubling.h): with p the largest
// power of two not above N, log2(p) exchanges of the whole S, and where N !=
// p two more (the extra ranks' inputs in, the results out):
// t = (log2 p + 2 [N != p]) * (alpha + S / beta). busbw as nccl-tests counts
// it for any all-reduce (algbw * 2(N-1)/N).
Prediction PredictDoublingAllReduce(int nranks, double bytes, double alpha_us, double beta_gbps);
// log2 p, p the largest power of two not above nranks (0 for one rank).
int DoublingRounds(int nranks);
// The largest all-reduce a host communicator runs by recursive doubling.
inline constexpr double kDoublingMaxBytes = 256.0 * 1024;
// The choice a host communicator across hosts makes per all-reduce: recursive
// doubling where it is predicted faster than the ring, up to kDoublingMaxBytes.
bool PrefersDoubling(int nranks, double bytes, double alpha_us, double beta_gbps);

// The compressed wire's all-reduce (collectives/engines/wire.h): N - 1
// steps of reduce-scatter and N - 1 of all-gather, each moving a shard of
// S / N in the wire, `fraction` of the buffer's bytes:
// t = 2(N-1) * (alpha + fraction * S / (N * beta)).
Prediction PredictWireAllReduce(int nranks, double bytes, double alpha_us, double beta_gbps, double fraction);
// The link the wire's choice assumes: a wire pays where links are slow, so
// the choice is made for a 10 Gbit/s network (1.25 GB/s, the default alpha
// of a network step), not the default model's 100 Gbit/s.
inline constexpr double kWireLinkAlphaUs = 5.0;
inline constexpr double kWireLinkBetaGbps = 1.25;
// Whether an fp32 all-reduce of `bytes` that the wire would carry at
// `fraction` of its bytes is predicted faster by recursive doubling (exact,
// ceil(log2 N)-ish steps) than by the wire's 2(N-1) steps on that link: the
// small all-reduces, where the steps cost more than the bytes the wire
// saves (below about 12 KB at 2 ranks, 20 KB at 4, 53 KB at 16 in bf16).
bool WireYieldsToDoubling(int nranks, double bytes, double fraction);

// For a host's GPU rings (one rank per GPU of the ring): alpha of the
// farthest edge type, beta the channels' total bandwidth.
Prediction PredictAllReduce(const CostModel& model, const PathMatrix& paths,
                            const std::vector<Ring>& rings, double bytes);

// For a communicator's plan: alpha of the farthest edge type, beta the
// channels' total bandwidth. `gpu_staged`: the ranks are GPUs, whose
// network edges stage through pinned host memory (the staging terms above).
Prediction PredictAllReduce(const CostModel& model, const std::vector<RingPlan>& plan,
                            double bytes, bool gpu_staged = false);

}  // namespace ringo::topology

#endif  // RINGO_TOPOLOGY_COST_MODEL_H_
