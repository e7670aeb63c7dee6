#include "topology/discovery.h"

#include <hwloc.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "base/logging.h"
#include "topology/link_speed.h"
#include "topology/nvlink.h"

namespace ringo::topology {
namespace {

constexpr uint32_t kNvidiaVendor = 0x10de;
using PciAttr = hwloc_obj_attr_u::hwloc_pcidev_attr_s;

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using HwlocTopology = std::unique_ptr<hwloc_topology, TopologyDeleter>;

std::string BusId(unsigned domain, unsigned bus, unsigned dev, unsigned func) {
  char text[32];
  std::snprintf(text, sizeof(text), "%04x:%02x:%02x.%x", domain, bus, dev, func);
  return text;
}

std::string BusId(const PciAttr& pci) { return BusId(pci.domain, pci.bus, pci.dev, pci.func); }

std::string CpusetList(hwloc_const_bitmap_t set) {
  if (set == nullptr) return "";
  char* text = nullptr;
  if (hwloc_bitmap_list_asprintf(&text, set) < 0 || text == nullptr) return "";
  std::string out(text);
  std::free(text);
  return out;
}

std::string Info(hwloc_obj_t obj, const char* name) {
  const char* v = obj == nullptr ? nullptr : hwloc_obj_get_info_by_name(obj, name);
  return v == nullptr ? "" : v;
}

// A short label for the tree display of a PCI device that is not a GPU or NIC.
std::string PciDeviceName(uint32_t class_id) {
  if (class_id == 0x0108) return "NVMe";
  switch (class_id >> 8) {
    case 0x01:
      return "Storage";
    case 0x02:
      return "Network";
    case 0x03:
      return "Display";
    case 0x12:
      return "Accelerator";
    default:
      break;
  }
  char text[16];
  std::snprintf(text, sizeof(text), "PCI-%04x", class_id);
  return text;
}

// Walks hwloc's tree once, by parent/child pointers (never by depth: I/O
// objects share one virtual depth and PCI paths differ in length).
class Builder {
 public:
  Builder(hwloc_topology_t topo, const DiscoveryOptions& options) : topo_(topo), options_(options) {
    for (const std::string& bus : options.gpu_bus_ids) {
      auto normalized = NormalizeBusId(bus);
      cuda_gpus_.push_back(normalized.value_or(bus));
    }
  }

  base::StatusOr<Graph> Build() {
    hwloc_obj_t root = hwloc_get_root_obj(topo_);
    graph_.host = SanitizeToken(Info(root, "HostName"));
    AddCpus(root);
    VisitNormal(root);
    RETURN_IF_ERROR(AssignOrdinals());
    RETURN_IF_ERROR(AddNvlinkInfo());
    RETURN_IF_ERROR(graph_.Finalize());
    return std::move(graph_);
  }

 private:
  void AddCpus(hwloc_obj_t root) {
    for (hwloc_obj_t numa = hwloc_get_next_obj_by_type(topo_, HWLOC_OBJ_NUMANODE, nullptr);
         numa != nullptr; numa = hwloc_get_next_obj_by_type(topo_, HWLOC_OBJ_NUMANODE, numa)) {
      hwloc_obj_t package = numa->parent;
      while (package != nullptr && package->type != HWLOC_OBJ_PACKAGE) package = package->parent;
      Node cpu;
      cpu.kind = NodeKind::kCpu;
      cpu.numa = static_cast<int>(numa->os_index);
      cpu.name = "CPU" + std::to_string(cpu.numa);
      cpu.package = package == nullptr ? 0 : static_cast<int>(package->os_index);
      cpu.cpuset = CpusetList(numa->cpuset);
      cpu.cpu_vendor = Info(package, "CPUVendor");
      if (cpu.cpu_vendor.empty()) cpu.cpu_vendor = Info(root, "CPUVendor");
      cpu_by_numa_[cpu.numa] = graph_.AddNode(cpu);
    }
    if (cpu_by_numa_.empty()) {  // hwloc always reports one; be safe with odd XML
      Node cpu;
      cpu.kind = NodeKind::kCpu;
      cpu.numa = 0;
      cpu.package = 0;
      cpu.name = "CPU0";
      cpu.cpuset = CpusetList(root->cpuset);
      cpu_by_numa_[0] = graph_.AddNode(cpu);
    }
    for (auto i = cpu_by_numa_.begin(); i != cpu_by_numa_.end(); ++i) {
      for (auto j = std::next(i); j != cpu_by_numa_.end(); ++j) {
        const Node& a = graph_.node(i->second);
        const Node& b = graph_.node(j->second);
        Link link;
        link.kind = LinkKind::kSmp;
        link.a = i->second;
        link.b = j->second;
        link.gbps = std::min(SmpGbps(a.cpu_vendor), SmpGbps(b.cpu_vendor));
        graph_.AddLink(link);
      }
    }
  }

  // The CPU node of a normal object: its first NUMA node, else the first CPU.
  int CpuFor(hwloc_obj_t obj) const {
    if (obj != nullptr && obj->nodeset != nullptr) {
      int first = hwloc_bitmap_first(obj->nodeset);
      auto it = cpu_by_numa_.find(first);
      if (it != cpu_by_numa_.end()) return it->second;
    }
    return cpu_by_numa_.begin()->second;
  }

  void VisitNormal(hwloc_obj_t obj) {
    for (hwloc_obj_t c = obj->first_child; c != nullptr; c = c->next_sibling) VisitNormal(c);
    int cpu = -1;
    for (hwloc_obj_t io = obj->io_first_child; io != nullptr; io = io->next_sibling) {
      if (cpu == -1) cpu = CpuFor(obj);
      VisitIo(io, cpu, /*port_level=*/true);
    }
  }

  int AddPciNode(Node node, int parent, double raw_gbps) {
    node.parent = parent;
    node.numa = graph_.node(graph_.CpuOf(parent)).numa;
    int index = graph_.AddNode(std::move(node));
    Link up;
    up.kind = LinkKind::kPcie;
    up.a = index;
    up.b = parent;
    up.gbps = raw_gbps < 0 ? kLocalGbps : PcieGbps(raw_gbps);
    graph_.AddLink(up);
    return index;
  }

  // `parent` is the graph node above; `port_level` is true where a PCI bridge
  // met here is a port (a root port under a host bridge, or a switch's
  // downstream port), merged into the node above, and false where it is a
  // switch's upstream port, which becomes a switch node.
  void VisitIo(hwloc_obj_t obj, int parent, bool port_level) {
    if (obj->type == HWLOC_OBJ_BRIDGE) {
      const auto& br = obj->attr->bridge;
      int here = parent;
      bool next_port_level = true;
      if (br.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
        Node hb;
        hb.kind = NodeKind::kHostBridge;
        hb.name = "HostBridge";
        char text[32];
        std::snprintf(text, sizeof(text), "%04x:[%02x-%02x]", br.downstream.pci.domain,
                      br.downstream.pci.secondary_bus, br.downstream.pci.subordinate_bus);
        hb.bus_id = text;
        here = AddPciNode(hb, parent, /*raw_gbps=*/-1);
      } else if (port_level) {
        next_port_level = false;  // below a port: the next bridge is a switch's upstream port
      } else {
        Node sw;
        sw.kind = NodeKind::kPciSwitch;
        sw.name = "PCIeSwitch";
        sw.bus_id = BusId(br.upstream.pci);
        sw.pci_class = br.upstream.pci.class_id;
        sw.pci_vendor = br.upstream.pci.vendor_id;
        sw.pci_device = br.upstream.pci.device_id;
        here = AddPciNode(sw, parent, br.upstream.pci.linkspeed);
      }
      for (hwloc_obj_t c = obj->io_first_child; c != nullptr; c = c->next_sibling) {
        VisitIo(c, here, next_port_level);
      }
      return;
    }
    if (obj->type == HWLOC_OBJ_PCI_DEVICE) AddPciDevice(obj, parent);
    // OS devices are read through their PCI device; others are not placed.
  }

  bool IsGpu(const PciAttr& pci) const {
    if (!options_.gpu_bus_ids.empty()) {
      return std::find(cuda_gpus_.begin(), cuda_gpus_.end(), BusId(pci)) != cuda_gpus_.end();
    }
    return pci.vendor_id == kNvidiaVendor && (pci.class_id == 0x0300 || pci.class_id == 0x0302);
  }

  void AddPciDevice(hwloc_obj_t obj, int parent) {
    const auto& pci = obj->attr->pcidev;
    Node node;
    node.bus_id = BusId(pci);
    node.pci_class = pci.class_id;
    node.pci_vendor = pci.vendor_id;
    node.pci_device = pci.device_id;
    std::string ofed, netdevs;
    for (hwloc_obj_t c = obj->io_first_child; c != nullptr; c = c->next_sibling) {
      if (c->type != HWLOC_OBJ_OS_DEVICE || c->name == nullptr) continue;
      if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS && ofed.empty()) ofed = c->name;
      if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK) {
        netdevs += (netdevs.empty() ? "" : ",") + std::string(c->name);
      }
    }
    if (IsGpu(pci)) {
      node.kind = NodeKind::kGpu;
      node.name = "GPU";
    } else if (!ofed.empty() || !netdevs.empty()) {
      node.kind = NodeKind::kNic;
      node.name = !ofed.empty() ? ofed : netdevs.substr(0, netdevs.find(','));
      node.netdev = netdevs;
    } else {
      node.kind = NodeKind::kPciDevice;
      node.name = PciDeviceName(pci.class_id);
    }
    AddPciNode(node, parent, pci.linkspeed);
  }

  base::Status AssignOrdinals() {
    std::vector<int> gpus, nics;
    for (int i = 0; i < static_cast<int>(graph_.nodes().size()); ++i) {
      if (graph_.node(i).kind == NodeKind::kGpu) gpus.push_back(i);
      if (graph_.node(i).kind == NodeKind::kNic) nics.push_back(i);
    }
    auto by_bus = [&](int a, int b) {
      const Node& x = graph_.node(a);
      const Node& y = graph_.node(b);
      return x.bus_id != y.bus_id ? x.bus_id < y.bus_id : x.name < y.name;
    };
    if (options_.gpu_bus_ids.empty()) {
      std::sort(gpus.begin(), gpus.end(), by_bus);
    } else {
      std::vector<int> ordered;
      for (const std::string& bus : cuda_gpus_) {
        auto it = std::find_if(gpus.begin(), gpus.end(),
                               [&](int g) { return graph_.node(g).bus_id == bus; });
        if (it != gpus.end()) {
          ordered.push_back(*it);
          continue;
        }
        if (!NormalizeBusId(bus)) return base::InvalidArgument("'" + bus + "' is not a bus id");
        RINGO_LOG(WARN) << "topology: GPU " << bus
                        << " is not in hwloc's PCI tree; placing it under the first CPU";
        Node gpu;
        gpu.kind = NodeKind::kGpu;
        gpu.bus_id = bus;
        gpu.pci_vendor = kNvidiaVendor;
        ordered.push_back(AddPciNode(gpu, cpu_by_numa_.begin()->second, 0));
      }
      gpus = ordered;
    }
    for (size_t k = 0; k < gpus.size(); ++k) {
      Node& n = graph_.mutable_node(gpus[k]);
      n.ordinal = static_cast<int>(k);
      n.name = "GPU" + std::to_string(k);
    }
    std::sort(nics.begin(), nics.end(), by_bus);
    for (size_t k = 0; k < nics.size(); ++k)
      graph_.mutable_node(nics[k]).ordinal = static_cast<int>(k);
    return base::OkStatus();
  }

  base::Status AddNvlinkInfo() {
    std::vector<std::pair<int, std::string>> gpus;  // ordinal, bus id
    for (const Node& n : graph_.nodes()) {
      if (n.kind == NodeKind::kGpu) gpus.emplace_back(n.ordinal, n.bus_id);
    }
    std::sort(gpus.begin(), gpus.end());
    std::vector<NvlinkGroup> groups;
    if (!options_.nvlink_file.empty()) {
      ASSIGN_OR_RETURN(groups, ReadNvlinkOverlay(options_.nvlink_file));
    } else if (options_.use_nvml && !gpus.empty()) {
      std::vector<std::string> bus_ids;
      for (const auto& g : gpus) bus_ids.push_back(g.second);
      groups = QueryNvml(bus_ids);
    }
    return AddNvlinks(groups, &graph_);
  }

  hwloc_topology_t topo_;
  const DiscoveryOptions& options_;
  std::vector<std::string> cuda_gpus_;  // normalized
  std::map<int, int> cpu_by_numa_;      // NUMA OS index -> CPU node
  Graph graph_;
};

}  // namespace

base::StatusOr<Graph> DiscoverTopology(const DiscoveryOptions& options) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return base::SystemError("hwloc_topology_init failed");
  HwlocTopology topo(raw);
  // hwloc's default drops bridges, PCI and OS devices: keep those that matter.
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  // Plugins that would open display servers or OpenCL runtimes; not needed.
  hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "gl");
  hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "opencl");
  if (!options.xml_file.empty()) {
    if (hwloc_topology_set_xml(raw, options.xml_file.c_str()) != 0) {
      return base::InvalidArgument("hwloc cannot use XML file '" + options.xml_file +
                                   "': " + std::strerror(errno));
    }
  }
  if (hwloc_topology_load(raw) != 0) {
    std::string what = options.xml_file.empty() ? "this machine" : "'" + options.xml_file + "'";
    return base::InvalidArgument("hwloc cannot load " + what + ": " + std::strerror(errno));
  }
  Builder builder(raw, options);
  return builder.Build();
}

}  // namespace ringo::topology
