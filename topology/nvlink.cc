#include "topology/nvlink.h"

#include <dlfcn.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "base/logging.h"
#include "topology/link_speed.h"

namespace ringo::topology {
namespace {

// The few NVML declarations used, as in nvml.h (NVML's ABI is stable; the
// _v2 entry points and this nvmlPciInfo_t layout exist since CUDA 9).
using NvmlReturn = int;  // nvmlReturn_t; 0 is NVML_SUCCESS
using NvmlDevice = void*;
struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  char bus_id[32];
};
constexpr int kNvmlMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS
constexpr int kNvmlFeatureEnabled = 1;

struct NvmlApi {
  NvmlReturn (*init)();
  NvmlReturn (*shutdown)();
  NvmlReturn (*handle_by_bus_id)(const char*, NvmlDevice*);
  NvmlReturn (*link_state)(NvmlDevice, unsigned int, int*);
  NvmlReturn (*remote_pci)(NvmlDevice, unsigned int, NvmlPciInfo*);
  NvmlReturn (*link_version)(NvmlDevice, unsigned int, unsigned int*);
};

template <typename F>
bool Load(void* lib, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  return *fn != nullptr;
}

// Finds a GPU node by normalized bus id before Finalize (no index yet).
int GpuNode(const Graph& graph, const std::string& bus_id) {
  for (int i = 0; i < static_cast<int>(graph.nodes().size()); ++i) {
    const Node& n = graph.node(i);
    if (n.kind == NodeKind::kGpu && n.bus_id == bus_id) return i;
  }
  return -1;
}

}  // namespace

base::StatusOr<std::vector<NvlinkGroup>> ParseNvlinkOverlay(const std::string& text,
                                                            const std::string& origin) {
  std::vector<NvlinkGroup> groups;
  std::istringstream in(text);
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    auto hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::string gpu, peer, extra;
    int count = 0, generation = 0;
    if (!(fields >> gpu)) continue;  // blank
    std::string where = origin + ":" + std::to_string(lineno) + ": ";
    if (!(fields >> peer >> count >> generation) || (fields >> extra)) {
      return base::InvalidArgument(where +
                                   "expected '<GPU bus id> <peer bus id | nvswitch> "
                                   "<links> <generation>'");
    }
    NvlinkGroup g;
    auto bus = NormalizeBusId(gpu);
    if (!bus) return base::InvalidArgument(where + "'" + gpu + "' is not a PCI bus id");
    g.gpu_bus_id = *bus;
    if (peer != "nvswitch") {
      auto peer_bus = NormalizeBusId(peer);
      if (!peer_bus) {
        return base::InvalidArgument(where + "'" + peer + "' is neither a bus id nor nvswitch");
      }
      g.peer_bus_id = *peer_bus;
    }
    if (count < 1 || count > 64 || generation < 1 || generation > 9) {
      return base::InvalidArgument(where + "bad link count or generation");
    }
    g.count = count;
    g.generation = generation;
    groups.push_back(g);
  }
  return groups;
}

base::StatusOr<std::vector<NvlinkGroup>> ReadNvlinkOverlay(const std::string& path) {
  std::ifstream in(path);
  if (!in) return base::InvalidArgument("cannot read NVLink overlay file '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return ParseNvlinkOverlay(text.str(), path);
}

std::vector<NvlinkGroup> QueryNvml(const std::vector<std::string>& gpu_bus_ids) {
  std::vector<NvlinkGroup> groups;
  if (gpu_bus_ids.empty()) return groups;
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    RINGO_LOG(INFO) << "topology: libnvidia-ml.so.1 not found; assuming no NVLink";
    return groups;
  }
  NvmlApi api{};
  bool ok = Load(lib, "nvmlInit_v2", &api.init) && Load(lib, "nvmlShutdown", &api.shutdown) &&
            Load(lib, "nvmlDeviceGetHandleByPciBusId_v2", &api.handle_by_bus_id) &&
            Load(lib, "nvmlDeviceGetNvLinkState", &api.link_state) &&
            Load(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", &api.remote_pci) &&
            Load(lib, "nvmlDeviceGetNvLinkVersion", &api.link_version);
  if (!ok || api.init() != 0) {
    RINGO_LOG(INFO) << "topology: NVML unusable; assuming no NVLink";
    dlclose(lib);
    return groups;
  }
  // (gpu, peer) -> (links, generation).
  std::map<std::pair<std::string, std::string>, std::pair<int, int>> found;
  for (const std::string& bus : gpu_bus_ids) {
    NvmlDevice dev = nullptr;
    if (api.handle_by_bus_id(bus.c_str(), &dev) != 0) continue;
    for (unsigned link = 0; link < kNvmlMaxLinks; ++link) {
      int active = 0;
      if (api.link_state(dev, link, &active) != 0 || active != kNvmlFeatureEnabled) continue;
      NvmlPciInfo pci{};
      if (api.remote_pci(dev, link, &pci) != 0) continue;
      unsigned version = 0;
      if (api.link_version(dev, link, &version) != 0) version = 0;
      auto remote = NormalizeBusId(pci.bus_id);
      std::string peer;
      if (remote &&
          std::find(gpu_bus_ids.begin(), gpu_bus_ids.end(), *remote) != gpu_bus_ids.end()) {
        peer = *remote;
      }
      auto& entry = found[{bus, peer}];
      entry.first += 1;
      entry.second = std::max(entry.second, static_cast<int>(version));
    }
  }
  api.shutdown();
  dlclose(lib);
  for (const auto& [key, value] : found) {
    groups.push_back({key.first, key.second, value.first, value.second});
  }
  return groups;
}

base::Status AddNvlinks(const std::vector<NvlinkGroup>& groups, Graph* graph) {
  // Unordered GPU pair (or GPU and switch, peer -1) -> group; a pair seen from
  // both sides counts once, with the larger count.
  std::map<std::pair<int, int>, NvlinkGroup> merged;
  for (const NvlinkGroup& g : groups) {
    int a = GpuNode(*graph, g.gpu_bus_id);
    if (a < 0) return base::InvalidArgument("NVLink: no GPU at bus id " + g.gpu_bus_id);
    int b = -1;
    if (!g.peer_bus_id.empty()) {
      b = GpuNode(*graph, g.peer_bus_id);
      if (b < 0) return base::InvalidArgument("NVLink: no GPU at bus id " + g.peer_bus_id);
      if (a == b) return base::InvalidArgument("NVLink: GPU " + g.gpu_bus_id + " linked to itself");
      if (b < a) std::swap(a, b);
    }
    auto [it, inserted] = merged.emplace(std::make_pair(a, b), g);
    if (!inserted) it->second.count = std::max(it->second.count, g.count);
  }
  int nvswitch = -1;
  for (const auto& [pair, g] : merged) {
    int peer = pair.second;
    if (peer == -1) {
      if (nvswitch == -1) {
        Node sw;
        sw.kind = NodeKind::kNvSwitch;
        sw.name = "NVSwitch";
        nvswitch = graph->AddNode(sw);
      }
      peer = nvswitch;
    }
    Link link;
    link.kind = LinkKind::kNvlink;
    link.a = pair.first;
    link.b = peer;
    link.count = g.count;
    link.generation = g.generation;
    link.gbps = NvlinkGbps(g.count, g.generation);
    graph->AddLink(link);
  }
  return base::OkStatus();
}

}  // namespace ringo::topology
