#include "topology/cost_model.h"

#include <algorithm>

namespace ringo::topology {

CostModel CostModel::Default() {
  CostModel m;
  //                 LOC   NVL   PIX   PXB   PHB   NODE  SYS   NET
  m.alpha_us = {{0.5, 0.8, 1.0, 1.2, 1.5, 1.8, 2.5, 5.0}};
  // Without a graph figure: one NVLink3 link, PCIe Gen4 x16 (usable), a host
  // bridge and NUMA-local memcpy, the socket interconnect, a 100 Gb/s NIC.
  m.beta_gbps = {{20.0, 20.0, 25.2, 25.2, 20.0, 16.0, 12.0, 12.5}};
  return m;
}

namespace {

// A prediction of `time_us`, with nccl-tests' bandwidths: algbw = bytes /
// time, busbw = algbw * 2(N-1)/N (any all-reduce).
Prediction Predicted(int nranks, double bytes, double alpha_us, double beta_gbps, double time_us) {
  Prediction p;
  p.nranks = nranks;
  p.bytes = bytes;
  p.alpha_us = alpha_us;
  p.beta_gbps = beta_gbps;
  p.time_us = time_us;
  if (time_us > 0) {
    p.algbw_gbps = bytes / (time_us * 1e3);
    p.busbw_gbps = p.algbw_gbps * (2.0 * (nranks - 1)) / nranks;
  }
  return p;
}

}  // namespace

int DoublingRounds(int nranks) {
  int rounds = 0;
  while ((2 << rounds) <= nranks) ++rounds;
  return rounds;
}

Prediction PredictDoublingAllReduce(int nranks, double bytes, double alpha_us, double beta_gbps) {
  if (nranks <= 1 || beta_gbps <= 0) return Predicted(nranks, bytes, alpha_us, beta_gbps, 0);
  const int rounds = DoublingRounds(nranks);
  const double steps = rounds + ((1 << rounds) != nranks ? 2 : 0);
  return Predicted(nranks, bytes, alpha_us, beta_gbps, steps * (alpha_us + bytes / (beta_gbps * 1e3)));
}

bool PrefersDoubling(int nranks, double bytes, double alpha_us, double beta_gbps) {
  if (nranks < 2 || bytes > kDoublingMaxBytes) return false;
  return PredictDoublingAllReduce(nranks, bytes, alpha_us, beta_gbps).time_us <
         PredictRingAllReduce(nranks, bytes, alpha_us, beta_gbps).time_us;
}

Prediction PredictWireAllReduce(int nranks, double bytes, double alpha_us, double beta_gbps, double fraction) {
  if (nranks <= 1 || beta_gbps <= 0) return Predicted(nranks, bytes, alpha_us, beta_gbps, 0);
  const double steps = 2.0 * (nranks - 1);
  return Predicted(nranks, bytes, alpha_us, beta_gbps,
                   steps * (alpha_us + fraction * bytes / (nranks * beta_gbps * 1e3)));
}

bool WireYieldsToDoubling(int nranks, double bytes, double fraction) {
  if (nranks < 2 || bytes > kDoublingMaxBytes) return false;
  return PredictDoublingAllReduce(nranks, bytes, kWireLinkAlphaUs, kWireLinkBetaGbps).time_us <
         PredictWireAllReduce(nranks, bytes, kWireLinkAlphaUs, kWireLinkBetaGbps, fraction).time_us;
}

double DefaultBetaGbps(PathType type) {
  return CostModel::Default().beta_gbps[static_cast<int>(type)];
}

Prediction PredictRingAllReduce(int nranks, double bytes, double alpha_us, double beta_gbps) {
  if (nranks <= 1 || beta_gbps <= 0) return Predicted(nranks, bytes, alpha_us, beta_gbps, 0);
  const double steps = 2.0 * (nranks - 1);
  // beta in GB/s = 1e3 bytes per microsecond.
  return Predicted(nranks, bytes, alpha_us, beta_gbps, steps * (alpha_us + bytes / (nranks * beta_gbps * 1e3)));
}

Prediction PredictAllReduce(const CostModel& model, const PathMatrix& paths,
                            const std::vector<Ring>& rings, double bytes) {
  if (rings.empty()) return PredictRingAllReduce(0, bytes, 0, 0);
  const std::vector<int>& gpus = rings.front().gpus;
  const int n = static_cast<int>(gpus.size());
  double alpha = 0, beta = 0;
  for (const Ring& ring : rings) {
    beta += ring.gbps;
    for (int i = 0; i < n; ++i) {
      PathType type = paths.Gpu(ring.gpus[i], ring.gpus[(i + 1) % n]).type;
      alpha = std::max(alpha, model.alpha_us[static_cast<int>(type)]);
    }
  }
  return PredictRingAllReduce(n, bytes, alpha, beta);
}

Prediction PredictAllReduce(const CostModel& model, const std::vector<RingPlan>& plan,
                            double bytes, bool gpu_staged) {
  if (plan.empty()) return PredictRingAllReduce(0, bytes, 0, 0);
  double alpha = 0, beta = 0;
  for (const RingPlan& channel : plan) {
    double channel_gbps = channel.gbps;
    for (const RingEdge& e : channel.edges) {
      double edge_alpha = model.alpha_us[static_cast<int>(e.path)];
      if (gpu_staged && e.transport == TransportKind::kNet) {
        edge_alpha += model.staging_alpha_us;
        channel_gbps = std::min(channel_gbps, model.staging_gbps);
      }
      alpha = std::max(alpha, edge_alpha);
    }
    beta += channel_gbps;
  }
  return PredictRingAllReduce(static_cast<int>(plan.front().order.size()), bytes, alpha, beta);
}

}  // namespace ringo::topology
