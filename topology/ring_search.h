// Ring search: orders of a host's GPUs (channels) that maximise each ring's
// bottleneck bandwidth. Pure functions of a finalized Graph.
//
// The model: each ring edge is routed over its path (paths.h); a directed
// link used by k edges of a ring gives each of them 1/k of its bandwidth, so
// a ring's bandwidth is the minimum over the directed links it uses of
// capacity / uses. Among rings of equal bandwidth the search prefers fewer
// saturated links, then nearer path types (NVL over PCIe over SYS), then the
// first in enumeration order (deterministic). Channels are found one after
// another on the capacity the previous ones left, each capped at
// `channel_cap_gbps`, while a channel gets at least `min_channel_fraction` of
// the first one's bandwidth.
//
// For several hosts a "ring" is a chain through the host's GPUs: entered from
// the network through a NIC nearest its first GPU, left through a NIC nearest
// its last GPU, the NICs' network bandwidth counted like a link. Later
// channels prefer the previous chain rotated by one when it scores as well
// (each GPU then enters and leaves once over the channels, spreading the
// NICs), and fall back to the NICs with most capacity left when the nearest
// ones are used up.
#ifndef RINGO_TOPOLOGY_RING_SEARCH_H_
#define RINGO_TOPOLOGY_RING_SEARCH_H_

#include <vector>

#include "base/status.h"
#include "topology/graph.h"
#include "topology/paths.h"

namespace ringo::topology {

struct Ring {
  std::vector<int> gpus;  // GPU ordinals in ring order
  int nic_in = -1;        // multi-host: NIC ordinal the ring enters by, else -1
  int nic_out = -1;       // multi-host: NIC ordinal the ring leaves by, else -1
  double gbps = 0;        // bandwidth this channel is given, per direction, GB/s

  bool operator==(const Ring& other) const {
    return gpus == other.gpus && nic_in == other.nic_in && nic_out == other.nic_out &&
           gbps == other.gbps;
  }
};

enum class SearchMethod { kAuto, kExhaustive, kHeuristic };

struct RingSearchOptions {
  std::vector<int> gpus;    // GPU ordinals to ring; empty: all of the graph's
  bool multi_host = false;  // chains entering and leaving through NICs
  int max_channels = 16;
  // What one channel can use: NCCL's fastest per-channel speed on A100-class
  // GPUs (one ring's thread blocks cannot drive all of NVLink).
  double channel_cap_gbps = 40.0;
  double min_channel_fraction = 0.5;
  SearchMethod method = SearchMethod::kAuto;
  int exhaustive_max_gpus = 8;  // kAuto: exhaustive up to this many GPUs, heuristic beyond
};

// One Ring per channel (at least one when there is a GPU; a single GPU's ring
// has no edges and kLocalGbps capped at channel_cap_gbps). Error when a GPU
// ordinal is out of range or repeated, or multi_host is asked of a graph
// without NICs.
base::StatusOr<std::vector<Ring>> SearchRings(const Graph& graph, const PathMatrix& paths,
                                              const RingSearchOptions& options);

// The bandwidth and tie-break score of one ring on full capacity (for tests
// and tools). `ring.gbps` is ignored.
struct RingScore {
  double gbps = 0;    // bottleneck bandwidth, uncapped
  int saturated = 0;  // directed links at the bottleneck
  int cost = 0;       // sum over edges of path-type weights
};
RingScore ScoreRing(const Graph& graph, const PathMatrix& paths, const Ring& ring);

// Total bandwidth of the channels.
double TotalGbps(const std::vector<Ring>& rings);

}  // namespace ringo::topology

#endif  // RINGO_TOPOLOGY_RING_SEARCH_H_
