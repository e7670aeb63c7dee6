#include "topology/paths.h"

#include <algorithm>
#include <cctype>
#include <limits>

#include "base/check.h"
#include "topology/link_speed.h"

namespace ringo::topology {
namespace {

constexpr const char* kNames[kNumPathTypes] = {"LOC", "NVL",  "PIX", "PXB",
                                               "PHB", "NODE", "SYS", "NET"};

// The ancestors of `node` from itself up to its CPU, inclusive.
std::vector<int> Chain(const Graph& g, int node) {
  std::vector<int> chain;
  for (int p = node; p != -1; p = g.node(p).parent) chain.push_back(p);
  return chain;
}

double Bottleneck(const Graph& g, const std::vector<int>& hops) {
  double bw = kLocalGbps;
  for (int h : hops) bw = std::min(bw, g.link(h / 2).gbps);
  return bw;
}

// The best NVLink route between two GPUs, if any.
bool NvlinkPath(const Graph& g, int from, int to, Path* out) {
  double best = 0;
  // Direct links, and links to the NVSwitch from either end.
  int direct = -1, sw_from = -1, sw_to = -1;
  for (int l = 0; l < static_cast<int>(g.links().size()); ++l) {
    const Link& link = g.link(l);
    if (link.kind != LinkKind::kNvlink) continue;
    if ((link.a == from && link.b == to) || (link.a == to && link.b == from)) {
      if (direct == -1 || link.gbps > g.link(direct).gbps) direct = l;
    }
    auto is_switch = [&](int n) { return g.node(n).kind == NodeKind::kNvSwitch; };
    if (link.a == from && is_switch(link.b)) sw_from = l;
    if (link.a == to && is_switch(link.b)) sw_to = l;
  }
  if (direct != -1) {
    const Link& link = g.link(direct);
    out->hops = {DirectedLink(direct, link.a != from)};
    out->nvlinks = link.count;
    best = link.gbps;
  }
  if (sw_from != -1 && sw_to != -1 && g.link(sw_from).b == g.link(sw_to).b) {
    double bw = std::min(g.link(sw_from).gbps, g.link(sw_to).gbps);
    if (bw > best) {
      out->hops = {DirectedLink(sw_from, false), DirectedLink(sw_to, true)};
      out->nvlinks = std::min(g.link(sw_from).count, g.link(sw_to).count);
      best = bw;
    }
  }
  if (best <= 0) return false;
  out->type = PathType::kNvl;
  out->gbps = best;
  return true;
}

}  // namespace

const char* PathTypeName(PathType type) {
  int t = static_cast<int>(type);
  return (t >= 0 && t < kNumPathTypes) ? kNames[t] : "?";
}

std::optional<PathType> ParsePathType(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (int t = 0; t < kNumPathTypes; ++t) {
    if (upper == kNames[t]) return static_cast<PathType>(t);
  }
  return std::nullopt;
}

const char* PathTypeDescription(PathType type) {
  switch (type) {
    case PathType::kLoc:
      return "Self";
    case PathType::kNvl:
      return "Connection traversing a bonded set of # NVLinks";
    case PathType::kPix:
      return "Connection traversing at most a single PCIe bridge";
    case PathType::kPxb:
      return "Connection traversing multiple PCIe bridges (without traversing the PCIe Host "
             "Bridge)";
    case PathType::kPhb:
      return "Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)";
    case PathType::kNode:
      return "Connection traversing PCIe as well as the interconnect between PCIe Host Bridges "
             "within a NUMA node";
    case PathType::kSys:
      return "Connection traversing PCIe as well as the SMP interconnect between NUMA nodes "
             "(e.g., QPI/UPI)";
    case PathType::kNet:
      return "Connection traversing the network between hosts";
  }
  return "?";
}

std::string Path::Label() const {
  if (type == PathType::kLoc) return "X";
  if (type == PathType::kNvl) return "NV" + std::to_string(nvlinks);
  return PathTypeName(type);
}

Path ComputePath(const Graph& g, int from, int to) {
  Path path;
  if (from == to) {
    path.type = PathType::kLoc;
    path.gbps = kLocalGbps;
    return path;
  }
  if (g.node(from).kind == NodeKind::kGpu && g.node(to).kind == NodeKind::kGpu &&
      NvlinkPath(g, from, to, &path)) {
    return path;
  }
  std::vector<int> up = Chain(g, from);
  std::vector<int> down = Chain(g, to);
  // Trim the common tail: what remains are the nodes strictly below the
  // nearest common ancestor; when the CPUs differ nothing is common and each
  // chain still ends at its CPU.
  int common = -1;
  while (!up.empty() && !down.empty() && up.back() == down.back()) {
    common = up.back();
    up.pop_back();
    down.pop_back();
  }
  if (common == -1) {
    // Different CPUs: up.back() and down.back() are the two CPU nodes.
    int cpu_from = up.back(), cpu_to = down.back();
    int link = g.SmpLink(cpu_from, cpu_to);
    RINGO_CHECK(link != -1,
                "no SMP link between " + g.node(cpu_from).name + " and " + g.node(cpu_to).name);
    up.pop_back();
    down.pop_back();
    for (int n : up) path.hops.push_back(DirectedLink(g.Uplink(n), false));
    path.hops.push_back(DirectedLink(link, g.link(link).a != cpu_from));
    path.type = PathType::kSys;
  } else {
    for (int n : up) path.hops.push_back(DirectedLink(g.Uplink(n), false));
  }
  for (auto it = down.rbegin(); it != down.rend(); ++it) {
    path.hops.push_back(DirectedLink(g.Uplink(*it), true));
  }
  if (common != -1) {
    // Classify by what the route passes through, endpoints excluded.
    int switches = 0, host_bridges = 0;
    auto count = [&](int n) {
      if (n == from || n == to) return;
      NodeKind k = g.node(n).kind;
      switches += k == NodeKind::kPciSwitch;
      host_bridges += k == NodeKind::kHostBridge;
    };
    for (int n : up) count(n);
    for (int n : down) count(n);
    count(common);
    NodeKind top = g.node(common).kind;
    if (top == NodeKind::kCpu) {
      path.type = host_bridges >= 2 ? PathType::kNode : PathType::kPhb;
    } else if (top == NodeKind::kHostBridge) {
      path.type = PathType::kPhb;
    } else {
      path.type = switches <= 1 ? PathType::kPix : PathType::kPxb;
    }
  }
  path.gbps = Bottleneck(g, path.hops);
  return path;
}

PathMatrix::PathMatrix(const Graph& graph) {
  slot_.assign(graph.nodes().size(), -1);
  std::vector<int> endpoints;
  for (int gpu : graph.gpus()) endpoints.push_back(gpu);
  for (int nic : graph.nics()) endpoints.push_back(nic);
  n_ = static_cast<int>(endpoints.size());
  for (int i = 0; i < n_; ++i) slot_[endpoints[i]] = i;
  paths_.resize(static_cast<size_t>(n_) * n_);
  for (int i = 0; i < n_; ++i) {
    for (int j = 0; j < n_; ++j)
      paths_[i * n_ + j] = ComputePath(graph, endpoints[i], endpoints[j]);
  }
  gpu_nodes_ = graph.gpus();
  nic_nodes_ = graph.nics();
}

int PathMatrix::Slot(int node) const {
  RINGO_CHECK(node >= 0 && node < static_cast<int>(slot_.size()) && slot_[node] != -1,
              "node " + std::to_string(node) + " is not a GPU or NIC");
  return slot_[node];
}

const Path& PathMatrix::Get(int from_node, int to_node) const {
  return paths_[Slot(from_node) * n_ + Slot(to_node)];
}

const Path& PathMatrix::Gpu(int from_gpu, int to_gpu) const {
  return Get(gpu_nodes_.at(from_gpu), gpu_nodes_.at(to_gpu));
}

const Path& PathMatrix::GpuNic(int gpu, int nic) const {
  return Get(gpu_nodes_.at(gpu), nic_nodes_.at(nic));
}

const Path& PathMatrix::NicGpu(int nic, int gpu) const {
  return Get(nic_nodes_.at(nic), gpu_nodes_.at(gpu));
}

}  // namespace ringo::topology
