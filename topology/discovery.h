// Discovery: hwloc's view of this machine (or of an hwloc XML file) turned
// into a Graph. The only code that includes hwloc.
//
// Thread safety: DiscoverTopology may run on any thread; each call loads its
// own hwloc topology. It reads sysfs and can take tens of milliseconds on a
// large machine: call it once per process.
#ifndef RINGO_TOPOLOGY_DISCOVERY_H_
#define RINGO_TOPOLOGY_DISCOVERY_H_

#include <string>
#include <vector>

#include "base/status.h"
#include "topology/graph.h"

namespace ringo::topology {

struct DiscoveryOptions {
  // An hwloc XML file (lstopo --of xml) to load instead of this machine.
  std::string xml_file;
  // NVLink overlay file (see nvlink.h) used instead of NVML; "" asks NVML.
  std::string nvlink_file;
  // The GPUs' PCI bus ids in CUDA device order (cudaDeviceGetPCIBusId), when
  // a GPU is visible: GPU i of the graph is CUDA device i. A bus id that hwloc
  // does not show (a container without /sys/bus/pci) becomes a GPU under the
  // first CPU. Empty: every NVIDIA display or 3D controller (vendor 0x10de,
  // class 0x0300 or 0x0302) in the tree, ordered by bus id.
  std::vector<std::string> gpu_bus_ids;
  // Query NVML when there is no overlay file.
  bool use_nvml = true;
};

// Loads the machine (or XML file) with hwloc and builds the finalized graph:
// one CPU node per NUMA node, SMP links between every pair of them, the PCI
// tree of host bridges, switches, GPUs, NICs (PCI devices with an
// OpenFabrics or network OS device) and other PCI devices, then NVLinks.
base::StatusOr<Graph> DiscoverTopology(const DiscoveryOptions& options);

}  // namespace ringo::topology

#endif  // RINGO_TOPOLOGY_DISCOVERY_H_
