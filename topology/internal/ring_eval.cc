#include "topology/internal/ring_eval.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <utility>

#include "base/check.h"
#include "topology/link_speed.h"

namespace ringo::topology::internal {
namespace {

constexpr double kRelEps = 1e-9;

// Tie-break weights of path types: nearer is cheaper; crossing sockets or
// hosts costs more than one step of the PCIe hierarchy.
int Weight(PathType type) {
  static constexpr int kWeights[kNumPathTypes] = {0, 1, 2, 3, 4, 5, 8, 10};
  return kWeights[static_cast<int>(type)];
}

}  // namespace

bool Better(const RingScore& a, const RingScore& b) {
  if (a.gbps > b.gbps * (1 + kRelEps) + 1e-12) return true;
  if (a.gbps < b.gbps * (1 - kRelEps) - 1e-12) return false;
  if (a.saturated != b.saturated) return a.saturated < b.saturated;
  return a.cost < b.cost;
}

RingEvaluator::RingEvaluator(const Graph& graph, const PathMatrix& paths, std::vector<int> gpus,
                             bool multi_host)
    : graph_(graph),
      paths_(paths),
      gpus_(std::move(gpus)),
      multi_host_(multi_host),
      num_links_(static_cast<int>(graph.links().size())) {
  int resources = 2 * num_links_ + 2 * graph.num_nics();
  count_.assign(resources, 0);
  stamp_.assign(resources, -1);
  SetCapacity(FullCapacity());
}

std::vector<double> RingEvaluator::FullCapacity() const {
  std::vector<double> cap(2 * num_links_ + 2 * graph_.num_nics());
  for (int l = 0; l < num_links_; ++l) cap[2 * l] = cap[2 * l + 1] = graph_.link(l).gbps;
  for (int n = 0; n < graph_.num_nics(); ++n) {
    // The network side: as fast as the NIC's PCIe link (see link_speed.h).
    int up = graph_.Uplink(graph_.nics()[n]);
    double gbps = up == -1 ? kDefaultNicGbps : graph_.link(up).gbps;
    cap[2 * num_links_ + 2 * n] = cap[2 * num_links_ + 2 * n + 1] = gbps;
  }
  return cap;
}

void RingEvaluator::SetCapacity(std::vector<double> capacity) {
  RINGO_CHECK(capacity.size() == count_.size(), "capacity vector of the wrong size");
  capacity_ = std::move(capacity);
  nearest_in_.assign(gpus_.size(), -1);
  nearest_out_.assign(gpus_.size(), -1);
  if (!multi_host_) return;
  for (int i = 0; i < size(); ++i) {
    nearest_in_[i] = NearestNic(gpus_[i], /*in=*/true);
    nearest_out_[i] = NearestNic(gpus_[i], /*in=*/false);
  }
}

void RingEvaluator::SetRelaxedNics(bool relaxed) {
  relaxed_nics_ = relaxed;
  SetCapacity(std::move(capacity_));
}

int RingEvaluator::NearestNic(int gpu, bool in) const {
  int best = -1;
  const int side = in ? 1 : 0;
  for (int n = 0; n < graph_.num_nics(); ++n) {
    if (best == -1) {
      best = n;
      continue;
    }
    double left_p = capacity_[2 * num_links_ + 2 * n + side];
    double left_q = capacity_[2 * num_links_ + 2 * best + side];
    if (relaxed_nics_ && std::abs(left_p - left_q) > 1e-9 * std::max(left_p, left_q)) {
      if (left_p > left_q) best = n;
      continue;
    }
    const Path& p = in ? paths_.NicGpu(n, gpu) : paths_.GpuNic(gpu, n);
    const Path& q = in ? paths_.NicGpu(best, gpu) : paths_.GpuNic(gpu, best);
    if (p.type != q.type) {
      if (p.type < q.type) best = n;
      continue;
    }
    if (p.gbps != q.gbps) {
      if (p.gbps > q.gbps) best = n;
      continue;
    }
    if (left_p > left_q * (1 + kRelEps)) best = n;
  }
  return best;
}

void RingEvaluator::Use(int resource) {
  if (stamp_[resource] != epoch_) {
    stamp_[resource] = epoch_;
    count_[resource] = 0;
    touched_.push_back(resource);
  }
  ++count_[resource];
}

void RingEvaluator::UsePath(const Path& path) {
  for (int hop : path.hops) Use(hop);
}

void RingEvaluator::Route(const std::vector<int>& order, int nic_in, int nic_out, int* cost) {
  ++epoch_;
  touched_.clear();
  *cost = 0;
  const int k = size();
  const int edges = multi_host_ ? k - 1 : (k == 1 ? 0 : k);
  for (int i = 0; i < edges; ++i) {
    const Path& p = paths_.Gpu(gpus_[order[i]], gpus_[order[(i + 1) % k]]);
    UsePath(p);
    *cost += Weight(p.type);
  }
  if (multi_host_) {
    Use(2 * num_links_ + 2 * nic_in + 1);
    const Path& in = paths_.NicGpu(nic_in, gpus_[order[0]]);
    UsePath(in);
    const Path& out = paths_.GpuNic(gpus_[order[k - 1]], nic_out);
    UsePath(out);
    Use(2 * num_links_ + 2 * nic_out);
    *cost += Weight(in.type) + Weight(out.type);
  }
}

RingScore RingEvaluator::Eval(const std::vector<int>& order, bool choose_nics, int* nic_in,
                              int* nic_out) {
  if (multi_host_ && choose_nics) {
    *nic_in = nearest_in_[order.front()];
    *nic_out = nearest_out_[order.back()];
  }
  RingScore score;
  Route(order, multi_host_ ? *nic_in : -1, multi_host_ ? *nic_out : -1, &score.cost);
  if (touched_.empty()) {
    score.gbps = kLocalGbps;
    return score;
  }
  double bw = std::numeric_limits<double>::infinity();
  for (int r : touched_) bw = std::min(bw, std::max(0.0, capacity_[r]) / count_[r]);
  score.gbps = bw;
  for (int r : touched_) {
    if (std::max(0.0, capacity_[r]) / count_[r] <= bw * (1 + kRelEps) + 1e-12) ++score.saturated;
  }
  return score;
}

void RingEvaluator::Consume(const std::vector<int>& order, int nic_in, int nic_out, double gbps) {
  int cost = 0;
  Route(order, nic_in, nic_out, &cost);
  for (int r : touched_) capacity_[r] -= gbps * count_[r];
  SetCapacity(std::move(capacity_));
}

std::vector<int> ExhaustiveOrder(RingEvaluator& eval) {
  const int k = eval.size();
  std::vector<int> order(k);
  std::iota(order.begin(), order.end(), 0);
  std::vector<int> best = order;
  int in = -1, out = -1;
  RingScore best_score = eval.Eval(order, true, &in, &out);
  // Closed rings: rotations are the same ring, so position 0 stays put.
  auto first = eval.multi_host() ? order.begin() : order.begin() + 1;
  while (std::next_permutation(first, order.end())) {
    RingScore s = eval.Eval(order, true, &in, &out);
    if (Better(s, best_score)) {
      best_score = s;
      best = order;
    }
  }
  return best;
}

namespace {

// Improves `order` in place by 2-opt (segment reversal), or-opt (moving a
// segment of up to 3) and swap moves until none helps; returns its score.
RingScore LocalSearch(RingEvaluator& eval, std::vector<int>* order) {
  const int k = eval.size();
  int in = -1, out = -1;
  RingScore cur = eval.Eval(*order, true, &in, &out);
  std::vector<int> trial;
  auto try_move = [&]() {
    RingScore s = eval.Eval(trial, true, &in, &out);
    if (!Better(s, cur)) return false;
    cur = s;
    *order = trial;
    return true;
  };
  for (int pass = 0; pass < 200; ++pass) {
    bool improved = false;
    for (int i = 0; i < k && !improved; ++i) {
      for (int j = i + 1; j < k && !improved; ++j) {
        trial = *order;
        std::reverse(trial.begin() + i, trial.begin() + j + 1);
        improved = try_move();
        if (improved) break;
        trial = *order;
        std::swap(trial[i], trial[j]);
        improved = try_move();
      }
    }
    for (int len = 1; len <= 3 && !improved; ++len) {
      for (int i = 0; i + len <= k && !improved; ++i) {
        for (int p = 0; p <= k - len && !improved; ++p) {
          if (p == i) continue;
          trial = *order;
          std::vector<int> seg(trial.begin() + i, trial.begin() + i + len);
          trial.erase(trial.begin() + i, trial.begin() + i + len);
          trial.insert(trial.begin() + p, seg.begin(), seg.end());
          improved = try_move();
        }
      }
    }
    if (!improved) break;
  }
  return cur;
}

// Greedy nearest neighbour from `start`: next the unvisited GPU with the
// nearest path type, then the widest path, then the lowest position.
std::vector<int> Greedy(const RingEvaluator& eval, int start) {
  const PathMatrix& paths = eval.paths();
  const int k = eval.size();
  std::vector<int> order = {start};
  std::vector<bool> used(k, false);
  used[start] = true;
  for (int step = 1; step < k; ++step) {
    int from = eval.gpus()[order.back()], best = -1;
    for (int c = 0; c < k; ++c) {
      if (used[c]) continue;
      if (best == -1) {
        best = c;
        continue;
      }
      const Path& p = paths.Gpu(from, eval.gpus()[c]);
      const Path& q = paths.Gpu(from, eval.gpus()[best]);
      if (p.type < q.type || (p.type == q.type && p.gbps > q.gbps)) best = c;
    }
    used[best] = true;
    order.push_back(best);
  }
  return order;
}

}  // namespace

std::vector<int> HeuristicOrder(RingEvaluator& eval) {
  const int k = eval.size();
  // Discovery adds nodes depth-first, so node indices follow the PCI tree.
  auto tree_rank = [&](int i) { return eval.graph().gpus()[eval.gpus()[i]]; };
  std::vector<std::vector<int>> seeds;
  std::vector<int> identity(k);
  std::iota(identity.begin(), identity.end(), 0);
  seeds.push_back(identity);
  std::vector<int> tree = identity;  // PCI tree order: GPUs under one switch together
  std::stable_sort(tree.begin(), tree.end(),
                   [&](int a, int b) { return tree_rank(a) < tree_rank(b); });
  seeds.push_back(tree);
  for (int s = 0; s < k; ++s) seeds.push_back(Greedy(eval, s));
  std::vector<int> best;
  RingScore best_score;
  for (std::vector<int>& seed : seeds) {
    RingScore s = LocalSearch(eval, &seed);
    if (best.empty() || Better(s, best_score)) best_score = s, best = seed;
  }
  // Iterated local search: kick the best order (a double bridge: three cuts,
  // segments reordered) and search again; a fixed seed keeps it deterministic.
  std::mt19937 rng(0x5eed);
  for (int kick = 0; kick < 8 * k && k >= 4; ++kick) {
    std::vector<int> cut = {0, 0, 0};
    for (int& c : cut) c = 1 + static_cast<int>(rng() % (k - 1));
    std::sort(cut.begin(), cut.end());
    if (cut[0] == cut[1] || cut[1] == cut[2]) continue;
    std::vector<int> trial(best.begin(), best.begin() + cut[0]);
    trial.insert(trial.end(), best.begin() + cut[2], best.end());
    trial.insert(trial.end(), best.begin() + cut[1], best.begin() + cut[2]);
    trial.insert(trial.end(), best.begin() + cut[0], best.begin() + cut[1]);
    RingScore s = LocalSearch(eval, &trial);
    if (Better(s, best_score)) best_score = s, best = trial;
  }
  if (!eval.multi_host()) {
    // A closed ring from position 0, as the exhaustive search gives it.
    std::rotate(best.begin(), std::find(best.begin(), best.end(), 0), best.end());
  }
  return best;
}

}  // namespace ringo::topology::internal
