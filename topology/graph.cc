#include "topology/graph.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ringo::topology {
namespace {

constexpr const char* kNodeKindNames[kNumNodeKinds] = {"cpu", "hostbridge", "switch", "gpu",
                                                       "nic", "nvswitch",   "pci"};
constexpr const char* kLinkKindNames[3] = {"pcie", "nvlink", "smp"};

void Sanitize(std::string* s) { *s = SanitizeToken(std::move(*s)); }

bool IsPciKind(NodeKind kind) {
  return kind == NodeKind::kHostBridge || kind == NodeKind::kPciSwitch || kind == NodeKind::kGpu ||
         kind == NodeKind::kNic || kind == NodeKind::kPciDevice;
}

// Ordinals of `kind` nodes must be exactly 0..n-1; fills `out` by ordinal.
base::Status IndexOrdinals(const std::vector<Node>& nodes, NodeKind kind, std::vector<int>* out) {
  out->clear();
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].kind == kind) out->push_back(-1);
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].kind != kind) continue;
    int ord = nodes[i].ordinal;
    if (ord < 0 || ord >= static_cast<int>(out->size()) || (*out)[ord] != -1) {
      return base::InvalidArgument(std::string("topology: ") + NodeKindName(kind) + " node " +
                                   std::to_string(i) + " has ordinal " + std::to_string(ord) +
                                   ", not a distinct value in 0.." +
                                   std::to_string(out->size() - 1));
    }
    (*out)[ord] = static_cast<int>(i);
  }
  return base::OkStatus();
}

}  // namespace

const char* NodeKindName(NodeKind kind) {
  int k = static_cast<int>(kind);
  return (k >= 0 && k < kNumNodeKinds) ? kNodeKindNames[k] : "?";
}

std::optional<NodeKind> ParseNodeKind(std::string_view name) {
  for (int k = 0; k < kNumNodeKinds; ++k) {
    if (name == kNodeKindNames[k]) return static_cast<NodeKind>(k);
  }
  return std::nullopt;
}

const char* LinkKindName(LinkKind kind) {
  int k = static_cast<int>(kind);
  return (k >= 0 && k < 3) ? kLinkKindNames[k] : "?";
}

std::optional<LinkKind> ParseLinkKind(std::string_view name) {
  for (int k = 0; k < 3; ++k) {
    if (name == kLinkKindNames[k]) return static_cast<LinkKind>(k);
  }
  return std::nullopt;
}

bool Node::operator==(const Node& o) const {
  return kind == o.kind && name == o.name && parent == o.parent && ordinal == o.ordinal &&
         bus_id == o.bus_id && numa == o.numa && package == o.package && pci_class == o.pci_class &&
         pci_vendor == o.pci_vendor && pci_device == o.pci_device && cpuset == o.cpuset &&
         cpu_vendor == o.cpu_vendor && netdev == o.netdev;
}

bool Link::operator==(const Link& o) const {
  return kind == o.kind && a == o.a && b == o.b && count == o.count && generation == o.generation &&
         gbps == o.gbps;
}

std::string SanitizeToken(std::string s) {
  for (char& c : s) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == '=') c = '_';
  }
  return s;
}

double RoundGbps(double gbps) { return std::round(gbps * 1000.0) / 1000.0; }

int Graph::AddNode(Node node) {
  Sanitize(&node.name);
  Sanitize(&node.bus_id);
  Sanitize(&node.cpuset);
  Sanitize(&node.cpu_vendor);
  Sanitize(&node.netdev);
  nodes_.push_back(std::move(node));
  return static_cast<int>(nodes_.size()) - 1;
}

int Graph::AddLink(Link link) {
  link.gbps = RoundGbps(link.gbps);
  links_.push_back(link);
  return static_cast<int>(links_.size()) - 1;
}

base::Status Graph::Finalize() {
  const int n = static_cast<int>(nodes_.size());
  uplink_.assign(n, -1);
  cpus_.clear();
  for (int i = 0; i < n; ++i) {
    const Node& node = nodes_[i];
    if (node.kind == NodeKind::kCpu) cpus_.push_back(i);
    bool rooted = node.kind == NodeKind::kCpu || node.kind == NodeKind::kNvSwitch;
    if (rooted != (node.parent == -1)) {
      return base::InvalidArgument("topology: node " + std::to_string(i) + " (" + node.name + ") " +
                                   (rooted ? "must have no parent" : "needs a parent"));
    }
    if (node.parent < -1 || node.parent >= n || node.parent == i) {
      return base::InvalidArgument("topology: node " + std::to_string(i) + " has bad parent " +
                                   std::to_string(node.parent));
    }
  }
  for (int l = 0; l < static_cast<int>(links_.size()); ++l) {
    const Link& link = links_[l];
    if (link.a < 0 || link.a >= n || link.b < 0 || link.b >= n || link.a == link.b) {
      return base::InvalidArgument("topology: link " + std::to_string(l) + " names bad nodes");
    }
    if (!(link.gbps >= 0) || link.count < 1) {
      return base::InvalidArgument("topology: link " + std::to_string(l) + " has bad bandwidth");
    }
    if (link.kind == LinkKind::kPcie) {
      if (nodes_[link.a].parent != link.b || uplink_[link.a] != -1) {
        return base::InvalidArgument("topology: PCIe link " + std::to_string(l) +
                                     " is not the one uplink of node " + std::to_string(link.a));
      }
      uplink_[link.a] = l;
    }
  }
  for (int i = 0; i < n; ++i) {
    if (IsPciKind(nodes_[i].kind) && uplink_[i] == -1) {
      return base::InvalidArgument("topology: node " + std::to_string(i) + " has no uplink");
    }
    // Parents form a forest: every chain ends within n steps.
    int p = i, steps = 0;
    while (p != -1 && steps <= n) p = nodes_[p].parent, ++steps;
    if (p != -1)
      return base::InvalidArgument("topology: parent cycle at node " + std::to_string(i));
    if (IsPciKind(nodes_[i].kind) && CpuOf(i) == -1) {
      return base::InvalidArgument("topology: node " + std::to_string(i) + " is under no CPU");
    }
  }
  base::Status st = IndexOrdinals(nodes_, NodeKind::kGpu, &gpus_);
  if (!st.ok()) return st;
  return IndexOrdinals(nodes_, NodeKind::kNic, &nics_);
}

int Graph::CpuOf(int node) const {
  int p = node;
  for (size_t steps = 0; p != -1 && steps <= nodes_.size(); ++steps) {
    if (nodes_[p].kind == NodeKind::kCpu) return p;
    p = nodes_[p].parent;
  }
  return -1;
}

int Graph::SmpLink(int cpu_a, int cpu_b) const {
  for (int l = 0; l < static_cast<int>(links_.size()); ++l) {
    const Link& link = links_[l];
    if (link.kind == LinkKind::kSmp &&
        ((link.a == cpu_a && link.b == cpu_b) || (link.a == cpu_b && link.b == cpu_a))) {
      return l;
    }
  }
  return -1;
}

int Graph::NumaOfCpu(int os_cpu) const {
  for (int cpu : cpus_) {
    // cpuset is hwloc's list form: "0-3,8,10-11".
    const std::string& list = nodes_[cpu].cpuset;
    size_t at = 0;
    while (at < list.size()) {
      size_t comma = list.find(',', at);
      std::string item =
          list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
      at = comma == std::string::npos ? list.size() : comma + 1;
      char* end = nullptr;
      long lo = std::strtol(item.c_str(), &end, 10);
      long hi = lo;
      if (*end == '-') hi = std::strtol(end + 1, &end, 10);
      if (end == item.c_str() || *end != '\0') continue;
      if (os_cpu >= lo && os_cpu <= hi) return nodes_[cpu].numa;
    }
  }
  return -1;
}

int Graph::FindGpuByBusId(std::string_view bus_id) const {
  std::optional<std::string> want = NormalizeBusId(bus_id);
  if (!want) return -1;
  for (int g : gpus_) {
    if (nodes_[g].bus_id == *want) return g;
  }
  return -1;
}

bool Graph::operator==(const Graph& o) const {
  return host == o.host && nodes_ == o.nodes_ && links_ == o.links_;
}

std::optional<std::string> NormalizeBusId(std::string_view text) {
  // [domain:]bus:device.function, hexadecimal digits only.
  unsigned field[4] = {0, 0, 0, 0};
  int fields = 0, digits = 0;
  const char* seps = nullptr;
  size_t colons = 0;
  for (char c : text) colons += c == ':';
  if (colons == 2) {
    seps = "::.";
  } else if (colons == 1) {
    seps = ":.";
    fields = 1;  // no domain
  } else {
    return std::nullopt;
  }
  const char* sep = seps;
  for (char c : text) {
    if (c == *sep) {
      if (digits == 0) return std::nullopt;
      ++fields, ++sep, digits = 0;
      if (fields > 3) return std::nullopt;
      continue;
    }
    int v = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
            : (c >= 'a' && c <= 'f')                    ? c - 'a' + 10
            : (c >= 'A' && c <= 'F')                    ? c - 'A' + 10
                                                        : -1;
    if (v < 0 || ++digits > 8) return std::nullopt;
    field[fields] = field[fields] * 16 + static_cast<unsigned>(v);
  }
  if (fields != 3 || digits == 0 || *sep != '\0') return std::nullopt;
  if (field[0] > 0xffff || field[1] > 0xff || field[2] > 0x1f || field[3] > 7) return std::nullopt;
  char out[16];
  std::snprintf(out, sizeof(out), "%04x:%02x:%02x.%x", field[0], field[1], field[2], field[3]);
  return std::string(out);
}

}  // namespace ringo::topology
