#include "topology/topology.h"

#include <sched.h>

#include <fstream>

#include "topology/discovery.h"
#include "topology/topo_file.h"

namespace ringo::topology {

TopologySource SourceFromConfig(const base::Config& config) {
  TopologySource source;
  source.file = config.Get("RINGO_TOPO_FILE").value_or("");
  source.nvlink_file = config.Get("RINGO_NVLINK_FILE").value_or("");
  return source;
}

base::StatusOr<Topology> LoadTopology(const TopologySource& source) {
  Topology topo;
  if (!source.file.empty()) {
    std::ifstream in(source.file, std::ios::binary);
    if (!in) return base::InvalidArgument("cannot read topology file '" + source.file + "'");
    std::string head(kTopoFileHeader.size(), '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<size_t>(in.gcount()));
    if (LooksLikeTopologyDump(head)) {
      ASSIGN_OR_RETURN(TopoFile file, ReadTopologyFile(source.file));
      topo.graph = std::move(file.graph);
      topo.rings = std::move(file.rings);
      topo.origin = "dump " + source.file;
      return topo;
    }
  }
  DiscoveryOptions options;
  options.xml_file = source.file;
  options.nvlink_file = source.nvlink_file;
  options.gpu_bus_ids = source.gpu_bus_ids;
  options.use_nvml = source.use_nvml;
  ASSIGN_OR_RETURN(topo.graph, DiscoverTopology(options));
  topo.origin = source.file.empty() ? "this machine" : "hwloc XML " + source.file;
  return topo;
}

int CurrentNumaNode(const Graph& graph) {
  int cpu = sched_getcpu();
  return cpu < 0 ? -1 : graph.NumaOfCpu(cpu);
}

base::Status DumpTopologyIfRequested(const base::Config& config, const Graph& graph,
                                     const std::vector<Ring>& rings) {
  std::string path = config.Get("RINGO_TOPO_DUMP_FILE").value_or("");
  if (path.empty()) return base::OkStatus();
  for (size_t at = path.find("%h"); at != std::string::npos; at = path.find("%h", at)) {
    path.replace(at, 2, graph.host.empty() ? "unknown" : graph.host);
    at += graph.host.empty() ? 7 : graph.host.size();
  }
  return WriteTopologyFile(path, graph, rings);
}

}  // namespace ringo::topology
