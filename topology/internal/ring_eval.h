// The ring evaluator behind ring_search: routes a ring's edges over their
// paths, counts uses per directed link (and per NIC's network side), and
// scores the ring against a capacity vector. Not thread-safe (scratch state).
#ifndef RINGO_TOPOLOGY_INTERNAL_RING_EVAL_H_
#define RINGO_TOPOLOGY_INTERNAL_RING_EVAL_H_

#include <vector>

#include "topology/graph.h"
#include "topology/paths.h"
#include "topology/ring_search.h"

namespace ringo::topology::internal {

// Resources: directed links (DirectedLink) then, per NIC ordinal n, its
// network side: 2 * links + 2 * n (out to the network), + 1 (in from it).
class RingEvaluator {
 public:
  // `gpus`: the GPU ordinals being ordered; orders index into this list.
  RingEvaluator(const Graph& graph, const PathMatrix& paths, std::vector<int> gpus,
                bool multi_host);

  int size() const { return static_cast<int>(gpus_.size()); }
  bool multi_host() const { return multi_host_; }
  const std::vector<int>& gpus() const { return gpus_; }
  const Graph& graph() const { return graph_; }
  const PathMatrix& paths() const { return paths_; }

  // Full capacity: every link's bandwidth, every NIC's network bandwidth.
  std::vector<double> FullCapacity() const;
  // Capacity to score against (size of FullCapacity()); recomputes each
  // GPU's nearest NICs, ties going to the NIC with the most capacity left.
  void SetCapacity(std::vector<double> capacity);
  // Relaxed: a GPU's NIC is the one with the most network capacity left,
  // nearness only breaking ties (for when the nearest NICs are used up).
  void SetRelaxedNics(bool relaxed);
  const std::vector<double>& capacity() const { return capacity_; }

  // Scores `order` (a permutation of 0..size()-1). Multi-host: when
  // `choose_nics`, picks the NICs nearest the ends and stores them in
  // *nic_in / *nic_out; otherwise uses the given ones.
  RingScore Eval(const std::vector<int>& order, bool choose_nics, int* nic_in, int* nic_out);
  // Subtracts `gbps` per use of the resources `order` uses (as Eval would).
  void Consume(const std::vector<int>& order, int nic_in, int nic_out, double gbps);

 private:
  void Use(int resource);
  void UsePath(const Path& path);
  void Route(const std::vector<int>& order, int nic_in, int nic_out, int* cost);
  int NearestNic(int gpu, bool in) const;

  const Graph& graph_;
  const PathMatrix& paths_;
  std::vector<int> gpus_;
  bool multi_host_;
  bool relaxed_nics_ = false;
  int num_links_;
  std::vector<double> capacity_;
  std::vector<int> nearest_in_, nearest_out_;  // per position in gpus_
  // Scratch: uses per resource in the current evaluation.
  std::vector<int> count_, stamp_, touched_;
  int epoch_ = 0;
};

// True when `a` is a strictly better ring than `b`.
bool Better(const RingScore& a, const RingScore& b);

// The best order of 0..size()-1 (closed rings keep position 0 first), by
// trying every one / by local search (2-opt and segment moves) from several
// starts: the PCI tree order, the ordinal order and greedy nearest neighbours.
std::vector<int> ExhaustiveOrder(RingEvaluator& eval);
std::vector<int> HeuristicOrder(RingEvaluator& eval);

}  // namespace ringo::topology::internal

#endif  // RINGO_TOPOLOGY_INTERNAL_RING_EVAL_H_
