// The topology layer's entry point for the communicator: where the graph
// comes from (this machine, an hwloc XML file or a Ringo dump, from the
// configuration), and the optional dump of what was detected and chosen.
//
// Thread safety: LoadTopology may run on any thread (see discovery.h); call
// it once per process.
#ifndef RINGO_TOPOLOGY_TOPOLOGY_H_
#define RINGO_TOPOLOGY_TOPOLOGY_H_

#include <string>
#include <vector>

#include "base/config.h"
#include "base/status.h"
#include "topology/graph.h"
#include "topology/ring_search.h"

namespace ringo::topology {

struct TopologySource {
  // An hwloc XML file or a Ringo dump (told apart by content); "" for this machine.
  std::string file;
  // NVLink overlay (nvlink.h) for an XML file or this machine; "" asks NVML.
  std::string nvlink_file;
  // GPUs' bus ids in CUDA device order, when a GPU is visible (discovery.h).
  std::vector<std::string> gpu_bus_ids;
  bool use_nvml = true;
};

// RINGO_TOPO_FILE and RINGO_NVLINK_FILE.
TopologySource SourceFromConfig(const base::Config& config);

struct Topology {
  Graph graph;              // finalized
  std::vector<Ring> rings;  // those stored in a dump; empty otherwise
  std::string origin;       // "this machine", "hwloc XML <file>" or "dump <file>"
};

base::StatusOr<Topology> LoadTopology(const TopologySource& source);

// The NUMA node (OS index) of the CPU the calling thread runs on, by the
// graph's CPU sets (for RankInfo::numa of a host-memory rank); -1 unknown.
int CurrentNumaNode(const Graph& graph);

// Writes the graph and rings to RINGO_TOPO_DUMP_FILE when it is set ("%h" is
// replaced by the host name); OK and nothing written otherwise.
base::Status DumpTopologyIfRequested(const base::Config& config, const Graph& graph,
                                     const std::vector<Ring>& rings);

}  // namespace ringo::topology

#endif  // RINGO_TOPOLOGY_TOPOLOGY_H_
