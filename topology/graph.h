// The topology data model: one host's CPUs (NUMA nodes), PCIe host bridges
// and switches, GPUs, NICs and NVSwitches as a plain graph with bandwidths.
// Built by discovery (hwloc) or loaded from a dump; independent of hwloc.
//
// Value types; not synchronised (share a const Graph freely between threads).
#ifndef RINGO_TOPOLOGY_GRAPH_H_
#define RINGO_TOPOLOGY_GRAPH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ringo::topology {

enum class NodeKind : int {
  kCpu = 0,         // a NUMA node: its cores, memory and the SMP interconnect
  kHostBridge = 1,  // a PCIe root complex (its root ports merged into it)
  kPciSwitch = 2,   // a PCIe switch (upstream port and its downstream ports)
  kGpu = 3,
  kNic = 4,
  kNvSwitch = 5,   // all NVSwitches of the host, as one node
  kPciDevice = 6,  // any other PCI device (storage, display), shown in the tree only
};
inline constexpr int kNumNodeKinds = 7;

// "cpu", "hostbridge", "switch", "gpu", "nic", "nvswitch", "pci".
const char* NodeKindName(NodeKind kind);
std::optional<NodeKind> ParseNodeKind(std::string_view name);

enum class LinkKind : int {
  kPcie = 0,    // a PCI node to its tree parent (a = child, b = parent)
  kNvlink = 1,  // GPU-GPU or GPU-NVSwitch; `count` links of one generation
  kSmp = 2,     // CPU-CPU (between NUMA nodes; the socket interconnect across packages)
};
const char* LinkKindName(LinkKind kind);  // "pcie", "nvlink", "smp"
std::optional<LinkKind> ParseLinkKind(std::string_view name);

struct Node {
  NodeKind kind = NodeKind::kCpu;
  // GPUs "GPU<ordinal>"; NICs their OpenFabrics or interface name ("mlx5_0");
  // CPUs "CPU<numa>"; others a description. No whitespace.
  std::string name;
  int parent = -1;          // PCI tree parent (towards the CPU); -1 for CPUs and the NVSwitch
  int ordinal = -1;         // GPUs: index among GPUs (CUDA device order); NICs: among NICs
  std::string bus_id;       // "0000:1b:00.0"; host bridges "0000:[15-1f]"; "" if none
  int numa = -1;            // NUMA node (OS index) of the CPU above; CPUs: their own
  int package = -1;         // CPUs: the socket (package OS index)
  uint32_t pci_class = 0;   // e.g. 0x0302
  uint32_t pci_vendor = 0;  // e.g. 0x10de
  uint32_t pci_device = 0;
  std::string cpuset;      // CPUs: their PUs as a list ("0-55,112-167")
  std::string cpu_vendor;  // CPUs: "GenuineIntel", "AuthenticAMD", ...
  std::string netdev;      // NICs: network interface names, comma-separated, if any

  bool operator==(const Node& other) const;
  bool operator!=(const Node& other) const { return !(*this == other); }
};

struct Link {
  LinkKind kind = LinkKind::kPcie;
  int a = -1;          // node index; for kPcie the child
  int b = -1;          // node index; for kPcie the parent
  int count = 1;       // NVLink: number of links bonded; 1 otherwise
  int generation = 0;  // NVLink generation (1-5); 0 for other links
  double gbps = 0;     // usable bandwidth per direction, GB/s (10^9 B/s), rounded to 0.001

  bool operator==(const Link& other) const;
  bool operator!=(const Link& other) const { return !(*this == other); }
};

// Directed use of a link: 2 * link + 0 for a -> b (PCIe: upwards), + 1 for b -> a.
inline int DirectedLink(int link, bool b_to_a) { return 2 * link + (b_to_a ? 1 : 0); }

class Graph {
 public:
  std::string host;  // host name, "" if unknown

  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Link>& links() const { return links_; }
  const Node& node(int i) const { return nodes_[i]; }
  const Link& link(int i) const { return links_[i]; }

  // Appends and returns the index. Whitespace and '=' in strings become '_';
  // bandwidth is rounded to 0.001 GB/s so dumps round-trip exactly.
  int AddNode(Node node);
  int AddLink(Link link);
  Node& mutable_node(int i) { return nodes_[i]; }

  // Checks the invariants (parents form a forest rooted at CPUs, links name
  // existing nodes, each PCI node has exactly one uplink, GPU and NIC
  // ordinals are 0..n-1) and builds the indexes below. Call after the last
  // Add*; the accessors below are valid until the next Add*.
  base::Status Finalize();

  // Node index of GPU / NIC `ordinal`.
  const std::vector<int>& gpus() const { return gpus_; }
  const std::vector<int>& nics() const { return nics_; }
  const std::vector<int>& cpus() const { return cpus_; }
  int num_gpus() const { return static_cast<int>(gpus_.size()); }
  int num_nics() const { return static_cast<int>(nics_.size()); }
  // The link from `node` to its parent, or -1.
  int Uplink(int node) const { return uplink_[node]; }
  // The CPU node at the root of `node`'s PCI tree (itself for a CPU), or -1.
  int CpuOf(int node) const;
  // The SMP link between two CPU nodes, or -1.
  int SmpLink(int cpu_a, int cpu_b) const;
  // The NUMA node (OS index) whose CPU node's cpuset holds PU `os_cpu`, or -1.
  int NumaOfCpu(int os_cpu) const;
  // The GPU with this bus id (any case, 4- or 8-digit domain), or -1.
  int FindGpuByBusId(std::string_view bus_id) const;

  bool operator==(const Graph& other) const;
  bool operator!=(const Graph& other) const { return !(*this == other); }

 private:
  std::vector<Node> nodes_;
  std::vector<Link> links_;
  std::vector<int> gpus_, nics_, cpus_, uplink_;
};

// "0000:1b:00.0" from any of "1b:00.0", "0000:1B:00.0", "00000000:1b:00.0";
// nullopt if `text` is not a PCI address.
std::optional<std::string> NormalizeBusId(std::string_view text);

// `s` with whitespace and '=' replaced by '_': names are single tokens in dumps.
std::string SanitizeToken(std::string s);

// Rounds to 0.001, the precision of dumps.
double RoundGbps(double gbps);

}  // namespace ringo::topology

#endif  // RINGO_TOPOLOGY_GRAPH_H_
