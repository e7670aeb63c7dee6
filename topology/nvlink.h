// NVLink connectivity: from NVML (loaded with dlopen; absent on machines
// without the NVIDIA driver, which then simply have no NVLink) or from an
// overlay file for fixtures, and added to a graph.
//
// Overlay format, one link group per line, '#' starts a comment:
//   <GPU PCI bus id> <peer GPU bus id | nvswitch> <links> <generation>
// e.g. "0000:07:00.0 nvswitch 12 3" or "0000:01:00.0 0000:02:00.0 4 3".
// A GPU pair may be listed once or from both sides (counted once).
//
// Thread safety: QueryNvml may be called from any thread (NVML is); the rest
// are pure functions.
#ifndef RINGO_TOPOLOGY_NVLINK_H_
#define RINGO_TOPOLOGY_NVLINK_H_

#include <string>
#include <vector>

#include "base/status.h"
#include "topology/graph.h"

namespace ringo::topology {

struct NvlinkGroup {
  std::string gpu_bus_id;   // normalized
  std::string peer_bus_id;  // normalized; "" for an NVSwitch
  int count = 0;            // links
  int generation = 0;       // NVLink version (1-5)
};

// Parses overlay text; `origin` names it in errors.
base::StatusOr<std::vector<NvlinkGroup>> ParseNvlinkOverlay(const std::string& text,
                                                            const std::string& origin);
base::StatusOr<std::vector<NvlinkGroup>> ReadNvlinkOverlay(const std::string& path);

// Asks NVML about the NVLinks of the GPUs with these bus ids. Without
// libnvidia-ml.so.1, or when NVML fails to initialise, returns an empty list
// (and logs at INFO): a machine without NVLink. A remote end that is not one
// of `gpu_bus_ids` is taken to be an NVSwitch.
std::vector<NvlinkGroup> QueryNvml(const std::vector<std::string>& gpu_bus_ids);

// Adds the groups to `graph` (before Finalize): GPU-GPU links, and one
// NVSwitch node linked to every GPU that has switch links. Groups naming a
// bus id that is not a GPU of the graph are an error.
base::Status AddNvlinks(const std::vector<NvlinkGroup>& groups, Graph* graph);

}  // namespace ringo::topology

#endif  // RINGO_TOPOLOGY_NVLINK_H_
