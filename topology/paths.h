// Paths between GPUs and NICs: the route a peer copy takes through the graph,
// its type (as `nvidia-smi topo -m` names them) and its bottleneck bandwidth.
// Pure functions of a finalized Graph.
#ifndef RINGO_TOPOLOGY_PATHS_H_
#define RINGO_TOPOLOGY_PATHS_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topology/graph.h"

namespace ringo::topology {

// Ordered from nearest to farthest; RINGO_P2P_LEVEL compares against this order.
enum class PathType : int {
  kLoc = 0,   // the same device
  kNvl = 1,   // NVLink, direct or through the NVSwitch
  kPix = 2,   // through at most one PCIe switch
  kPxb = 3,   // through several PCIe switches, not the host bridge
  kPhb = 4,   // through a PCIe host bridge (the CPU)
  kNode = 5,  // between host bridges of one NUMA node
  kSys = 6,   // across NUMA nodes (the SMP interconnect: UPI, xGMI)
  kNet = 7,   // between hosts
};
inline constexpr int kNumPathTypes = 8;

// "LOC", "NVL", "PIX", "PXB", "PHB", "NODE", "SYS", "NET".
const char* PathTypeName(PathType type);
// Case-insensitive name as above.
std::optional<PathType> ParsePathType(std::string_view name);
// nvidia-smi's legend line for the type ("Connection traversing ...").
const char* PathTypeDescription(PathType type);

struct Path {
  PathType type = PathType::kSys;
  double gbps = 0;        // bottleneck bandwidth of the route on its own, per direction
  int nvlinks = 0;        // NVL: links bonded on the narrowest hop (nvidia-smi's NV#)
  std::vector<int> hops;  // directed links (DirectedLink) from source to destination

  // The matrix cell: "X" for kLoc, "NV<n>" for NVLink, else the type's name.
  std::string Label() const;
};

// The route and type from node `from` to node `to`: NVLink when the two are
// GPUs joined directly or through the NVSwitch (the wider of the two), else
// the PCI tree up to the nearest common ancestor (parent pointers) and down,
// crossing the SMP link when the CPUs differ.
Path ComputePath(const Graph& graph, int from, int to);

// Paths between every ordered pair of GPU and NIC nodes (a node to itself: kLoc).
class PathMatrix {
 public:
  PathMatrix() = default;
  explicit PathMatrix(const Graph& graph);

  // Aborts for a node that is not a GPU or NIC.
  const Path& Get(int from_node, int to_node) const;
  // By ordinals.
  const Path& Gpu(int from_gpu, int to_gpu) const;
  const Path& GpuNic(int gpu, int nic) const;
  const Path& NicGpu(int nic, int gpu) const;

 private:
  int Slot(int node) const;
  std::vector<int> slot_;  // node -> row, -1 when not an endpoint
  int n_ = 0;
  std::vector<Path> paths_;
  std::vector<int> gpu_nodes_, nic_nodes_;
};

}  // namespace ringo::topology

#endif  // RINGO_TOPOLOGY_PATHS_H_
