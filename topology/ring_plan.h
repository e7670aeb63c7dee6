// A communicator's rings: given where each rank runs (host, GPU, NUMA node),
// the ring order per channel and the transport of each ring edge. Every rank
// computes the same plan from the same allgathered input. Pure functions.
#ifndef RINGO_TOPOLOGY_RING_PLAN_H_
#define RINGO_TOPOLOGY_RING_PLAN_H_

#include <map>
#include <vector>

#include "base/config.h"
#include "base/status.h"
#include "topology/graph.h"
#include "topology/paths.h"
#include "topology/ring_search.h"

namespace ringo::topology {

// What one rank tells the others.
struct RankInfo {
  int host = 0;   // host id, equal for ranks on one host (any int)
  int gpu = -1;   // GPU ordinal in its host's graph; -1 for a host-memory rank
  int numa = -1;  // NUMA node (OS index) the rank's memory is on; -1 unknown
};

enum class TransportKind : int { kP2p = 0, kShm = 1, kNet = 2 };
const char* TransportKindName(TransportKind kind);  // "p2p", "shm", "net"

// Which transport a path type gets.
struct TransportPolicy {
  // The farthest path type over which two GPUs use p2p (RINGO_P2P_LEVEL).
  PathType p2p_level = PathType::kPxb;
  bool p2p_disable = false;  // RINGO_P2P_DISABLE: never p2p, even on one GPU
  bool shm_disable = false;  // RINGO_SHM_DISABLE: the network (loopback) instead of shm
};

// The default p2p level as NCCL chooses it: SYS where every CPU is AMD
// (peer traffic through AMD CPUs performs), PXB otherwise (Intel and ARM root
// complexes forward peer-to-peer PCIe traffic poorly). No graph: PXB.
PathType DefaultP2pLevel(const Graph* graph);
// The policy from RINGO_P2P_LEVEL (NVL, PIX, PXB, PHB, NODE or SYS, any
// case), RINGO_P2P_DISABLE and RINGO_SHM_DISABLE ("1" sets them).
base::StatusOr<TransportPolicy> PolicyFromConfig(const base::Config& config, const Graph* graph);

struct RingEdge {
  int from = -1;  // rank
  int to = -1;    // rank
  TransportKind transport = TransportKind::kShm;
  PathType path = PathType::kSys;
  double gbps = 0;  // the edge's path alone (GPU pairs) or the cost model's default
};

struct RingPlan {
  std::vector<int> order;       // position -> rank
  std::vector<RingEdge> edges;  // edges[i]: order[i] -> order[(i + 1) % n]
  double gbps = 0;              // the channel's bandwidth, GB/s per direction
};

// Channels of the communicator (at least one; all channels order the same
// ranks). Hosts appear in order of their lowest rank. Within a host, GPU
// ranks follow the host graph's ring search (a chain entering and leaving by
// the NICs nearest its end GPUs when there are several hosts), ranks sharing
// a GPU next to each other in rank order; then host-memory ranks grouped by
// socket and NUMA node, so the ring crosses hosts and sockets as few times as
// possible. `graph_for_host` gives each host's graph (hosts with GPU ranks
// need one). The second form uses one graph for every host (hosts alike).
base::StatusOr<std::vector<RingPlan>> PlanRings(const std::map<int, const Graph*>& graph_for_host,
                                                const std::vector<RankInfo>& ranks,
                                                const TransportPolicy& policy,
                                                const RingSearchOptions& search = {});
base::StatusOr<std::vector<RingPlan>> PlanRings(const Graph* graph,
                                                const std::vector<RankInfo>& ranks,
                                                const TransportPolicy& policy,
                                                const RingSearchOptions& search = {});

// The transport of one edge between two ranks (path given for same-host GPU pairs).
TransportKind ChooseTransport(const RankInfo& from, const RankInfo& to, PathType path,
                              const TransportPolicy& policy);

}  // namespace ringo::topology

#endif  // RINGO_TOPOLOGY_RING_PLAN_H_
