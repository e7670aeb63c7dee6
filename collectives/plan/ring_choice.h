// The ring a communicator runs, from the topology: the order of the ranks and
// the transport of every edge (topology/ring_plan.h), for ranks described by
// what each told the others at init. Every rank computes the same answer
// from the same inputs.
#ifndef RINGO_COLLECTIVES_PLAN_RING_CHOICE_H_
#define RINGO_COLLECTIVES_PLAN_RING_CHOICE_H_

#include <string>
#include <vector>

#include "base/config.h"
#include "base/status.h"
#include "topology/ring_plan.h"

namespace ringo::collectives {

// This process's view of the machine, loaded once (RINGO_TOPO_FILE or hwloc).
// Thread-safe.
base::StatusOr<const topology::Graph*> LocalGraph(const base::Config& config);

// The NUMA node this thread runs on, or -1.
int LocalNumaNode(const base::Config& config);

struct RingChoice {
  std::vector<int> order;               // ring position -> rank
  std::vector<topology::RingEdge> edges;  // edges[i]: order[i] -> order[i + 1]
  std::string Describe() const;         // "0 -> 1 (shm) -> 2 (shm) -> 0 (shm)"
};

// The transport policy (RINGO_P2P_LEVEL, RINGO_P2P_DISABLE,
// RINGO_SHM_DISABLE) over this host's topology.
base::StatusOr<topology::TransportPolicy> TransportPolicyFor(const base::Config& config);

// The ring for `ranks` (host-memory ranks: gpu = -1), on the topology
// `config` names. `deterministic` (RINGO_DETERMINISTIC, as the ranks agreed):
// the ranks in rank order, so reductions chain alike whatever the topology.
// Fails if an edge needs a transport host memory cannot use.
base::StatusOr<RingChoice> ChooseRing(const base::Config& config, const std::vector<topology::RankInfo>& ranks,
                                      bool deterministic);

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_PLAN_RING_CHOICE_H_
