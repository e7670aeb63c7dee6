#include "topology/ring_search.h"

#include <algorithm>
#include <numeric>

#include "topology/internal/ring_eval.h"
#include "topology/link_speed.h"

namespace ringo::topology {

base::StatusOr<std::vector<Ring>> SearchRings(const Graph& graph, const PathMatrix& paths,
                                              const RingSearchOptions& options) {
  std::vector<int> gpus = options.gpus;
  if (gpus.empty()) {
    gpus.resize(graph.num_gpus());
    std::iota(gpus.begin(), gpus.end(), 0);
  }
  std::vector<bool> seen(graph.num_gpus(), false);
  for (int g : gpus) {
    if (g < 0 || g >= graph.num_gpus() || seen[g]) {
      return base::InvalidArgument("ring search: GPU " + std::to_string(g) +
                                   " is out of range or repeated");
    }
    seen[g] = true;
  }
  if (options.multi_host && graph.num_nics() == 0) {
    return base::InvalidArgument(
        "ring search: a ring across hosts needs a NIC; this graph has none");
  }
  if (options.max_channels < 1 || !(options.channel_cap_gbps > 0)) {
    return base::InvalidArgument("ring search: max_channels and channel_cap_gbps must be positive");
  }
  std::vector<Ring> rings;
  if (gpus.empty()) return rings;
  internal::RingEvaluator eval(graph, paths, gpus, options.multi_host);
  bool exhaustive = options.method == SearchMethod::kExhaustive ||
                    (options.method == SearchMethod::kAuto &&
                     static_cast<int>(gpus.size()) <= options.exhaustive_max_gpus);
  std::vector<int> previous;  // the last channel's order (positions)
  for (int c = 0; c < options.max_channels; ++c) {
    auto search = [&] {
      return exhaustive ? internal::ExhaustiveOrder(eval) : internal::HeuristicOrder(eval);
    };
    std::vector<int> order = search();
    Ring ring;
    RingScore score = eval.Eval(order, true, &ring.nic_in, &ring.nic_out);
    if (options.multi_host && !rings.empty()) {
      // Prefer the previous chain rotated by one when it does as well: each
      // GPU then enters once and leaves once over the channels, so the
      // choice of ends never paints the last channels into a corner.
      std::vector<int> rotated = previous;
      std::rotate(rotated.begin(), rotated.begin() + 1, rotated.end());
      Ring alt;
      RingScore alt_score = eval.Eval(rotated, true, &alt.nic_in, &alt.nic_out);
      if (!internal::Better(score, alt_score)) {
        order = rotated;
        ring = alt;
        score = alt_score;
      }
    }
    double min_gbps = rings.empty() ? 1e-9 : options.min_channel_fraction * rings.front().gbps;
    if (options.multi_host && std::min(score.gbps, options.channel_cap_gbps) < min_gbps) {
      // The NICs nearest the ends are used up: take those with capacity left.
      eval.SetRelaxedNics(true);
      std::vector<int> relaxed = search();
      Ring alt;
      RingScore alt_score = eval.Eval(relaxed, true, &alt.nic_in, &alt.nic_out);
      if (internal::Better(alt_score, score)) {
        order = relaxed;
        ring = alt;
        score = alt_score;
      } else {
        eval.SetRelaxedNics(false);
      }
    }
    double gbps = std::min(score.gbps, options.channel_cap_gbps);
    if (gbps <= 1e-9) break;
    if (!rings.empty() && gbps < options.min_channel_fraction * rings.front().gbps) break;
    ring.gbps = RoundGbps(gbps);
    for (int pos : order) ring.gpus.push_back(gpus[pos]);
    eval.Consume(order, ring.nic_in, ring.nic_out, gbps);
    eval.SetRelaxedNics(false);
    previous = order;
    rings.push_back(ring);
    // A lone GPU's ring uses no link: one channel says all there is.
    if (gpus.size() == 1 && !options.multi_host) break;
  }
  return rings;
}

RingScore ScoreRing(const Graph& graph, const PathMatrix& paths, const Ring& ring) {
  if (ring.gpus.empty()) return RingScore{};
  bool multi_host = ring.nic_in >= 0 && ring.nic_out >= 0;
  internal::RingEvaluator eval(graph, paths, ring.gpus, multi_host);
  std::vector<int> order(ring.gpus.size());
  std::iota(order.begin(), order.end(), 0);
  int in = ring.nic_in, out = ring.nic_out;
  return eval.Eval(order, /*choose_nics=*/false, &in, &out);
}

double TotalGbps(const std::vector<Ring>& rings) {
  double total = 0;
  for (const Ring& r : rings) total += r.gbps;
  return total;
}

}  // namespace ringo::topology
