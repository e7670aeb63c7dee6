// Dump and load: a graph and its rings as a small line-oriented text file,
// read back identically (dump -> load -> dump is byte-identical and the
// graphs compare equal). Pure functions plus file I/O.
//
//   # ringo topology 1
//   host dgx-h100
//   node 0 kind=cpu name=CPU0 parent=-1 ordinal=-1 bus=- numa=0 package=0 class=0x0000
//        vendor=0x0000 device=0x0000 cpuset=0-55 cpu_vendor=GenuineIntel netdev=-   (one line)
//   link 0 kind=smp a=0 b=1 count=1 gen=0 gbps=22.000
//   ring 0 gbps=40.000 nic_in=-1 nic_out=-1 gpus=0,1,2,3
//   end
//
// "-" stands for an empty string; bandwidths have three decimals (graphs
// round them so on construction).
#ifndef RINGO_TOPOLOGY_TOPO_FILE_H_
#define RINGO_TOPOLOGY_TOPO_FILE_H_

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "topology/graph.h"
#include "topology/ring_search.h"

namespace ringo::topology {

inline constexpr std::string_view kTopoFileHeader = "# ringo topology 1";

struct TopoFile {
  Graph graph;              // finalized
  std::vector<Ring> rings;  // may be empty
};

std::string DumpTopology(const Graph& graph, const std::vector<Ring>& rings);
// `origin` names the text in errors (a file name).
base::StatusOr<TopoFile> ParseTopology(const std::string& text, const std::string& origin);

base::Status WriteTopologyFile(const std::string& path, const Graph& graph,
                               const std::vector<Ring>& rings);
base::StatusOr<TopoFile> ReadTopologyFile(const std::string& path);

// True when `text` starts like a dump (as opposed to an hwloc XML file).
bool LooksLikeTopologyDump(std::string_view text);

}  // namespace ringo::topology

#endif  // RINGO_TOPOLOGY_TOPO_FILE_H_
