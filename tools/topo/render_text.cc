// ringo-topo's text output: the machine tree, the path matrix in the layout
// of `nvidia-smi topo -m`, the rings and the predicted all-reduce.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "tools/topo/report.h"

namespace ringo::tools {
namespace {

using topology::Graph;
using topology::Link;
using topology::LinkKind;
using topology::Node;
using topology::NodeKind;
using topology::PathType;

std::string Fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

std::string PciId(const Node& n) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "[%04x:%04x]", n.pci_vendor, n.pci_device);
  return buf;
}

std::string NodeLine(const Graph& g, int i) {
  const Node& n = g.node(i);
  int up = g.Uplink(i);
  std::string speed = up == -1 ? "" : "  PCIe " + Fmt("%.1f", g.link(up).gbps) + " GB/s";
  switch (n.kind) {
    case NodeKind::kCpu:
      return n.name + "  NUMA " + std::to_string(n.numa) + ", package " +
             std::to_string(n.package) + (n.cpu_vendor.empty() ? "" : ", " + n.cpu_vendor) +
             (n.cpuset.empty() ? "" : ", cpus " + n.cpuset);
    case NodeKind::kHostBridge:
      return "HostBridge " + n.bus_id;
    case NodeKind::kPciSwitch:
      return "PCIe switch " + n.bus_id + " " + PciId(n) + speed;
    case NodeKind::kGpu:
      return n.name + "  " + n.bus_id + " " + PciId(n) + speed;
    case NodeKind::kNic:
      return "NIC" + std::to_string(n.ordinal) + "  " + n.name + " " + n.bus_id + " " + PciId(n) +
             (n.netdev.empty() ? "" : " (" + n.netdev + ")") + speed;
    case NodeKind::kPciDevice:
      return n.name + "  " + n.bus_id + " " + PciId(n) + speed;
    case NodeKind::kNvSwitch:
      return n.name;
  }
  return n.name;
}

void RenderSubtree(const Graph& g, const std::vector<std::vector<int>>& children, int node,
                   int depth, std::ostream& out) {
  out << std::string(2 * depth, ' ') << NodeLine(g, node) << "\n";
  for (int c : children[node]) RenderSubtree(g, children, c, depth + 1, out);
}

std::string Padded(const std::string& s, size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

}  // namespace

std::string FormatBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, ++u;
  return (bytes == static_cast<long long>(bytes) ? Fmt("%.0f", bytes) : Fmt("%.2f", bytes)) + " " +
         units[u];
}

void RenderTree(const Graph& g, std::ostream& out) {
  const int n = static_cast<int>(g.nodes().size());
  std::vector<std::vector<int>> children(n);
  for (int i = 0; i < n; ++i) {
    if (g.node(i).parent >= 0) children[g.node(i).parent].push_back(i);
  }
  for (int cpu : g.cpus()) RenderSubtree(g, children, cpu, 0, out);
  for (const Link& l : g.links()) {
    if (l.kind == LinkKind::kSmp) {
      out << g.node(l.a).name << " <-> " << g.node(l.b).name << "  "
          << (g.node(l.a).package == g.node(l.b).package ? "NUMA interconnect" : "SMP (sockets)")
          << " " << Fmt("%.1f", l.gbps) << " GB/s\n";
    }
  }
  for (const Link& l : g.links()) {
    if (l.kind != LinkKind::kNvlink) continue;
    out << g.node(l.a).name << " <-> " << g.node(l.b).name << "  NVLink" << l.generation << " x"
        << l.count << " " << Fmt("%.1f", l.gbps) << " GB/s\n";
  }
}

void RenderMatrix(const Graph& g, const topology::PathMatrix& paths, std::ostream& out) {
  std::vector<std::string> names;
  std::vector<int> nodes;
  for (int i = 0; i < g.num_gpus(); ++i) names.push_back("GPU" + std::to_string(i));
  for (int i = 0; i < g.num_nics(); ++i) names.push_back("NIC" + std::to_string(i));
  nodes = g.gpus();
  nodes.insert(nodes.end(), g.nics().begin(), g.nics().end());
  const size_t w = 8;
  out << Padded("", w);
  for (const std::string& name : names) out << Padded(name, w);
  out << Padded("CPU Affinity", 16) << "NUMA Affinity\n";
  for (size_t r = 0; r < nodes.size(); ++r) {
    out << Padded(names[r], w);
    for (size_t c = 0; c < nodes.size(); ++c) {
      std::string cell = paths.Get(nodes[r], nodes[c]).Label();
      out << Padded(cell == "X" ? " X" : cell, w);
    }
    int cpu = g.CpuOf(nodes[r]);
    out << Padded(cpu == -1 ? "N/A" : g.node(cpu).cpuset, 16)
        << (cpu == -1 ? std::string("N/A") : std::to_string(g.node(cpu).numa)) << "\n";
  }
  out << "\nLegend:\n\n";
  out << "  X    = Self\n";
  for (PathType t :
       {PathType::kSys, PathType::kNode, PathType::kPhb, PathType::kPxb, PathType::kPix}) {
    std::string name = topology::PathTypeName(t);
    out << "  " << name << std::string(5 - name.size(), ' ') << "= "
        << topology::PathTypeDescription(t) << "\n";
  }
  out << "  NV#  = " << topology::PathTypeDescription(PathType::kNvl) << "\n";
  if (g.num_nics() > 0) {
    out << "\nNIC Legend:\n\n";
    for (int i = 0; i < g.num_nics(); ++i) {
      out << "  NIC" << i << ": " << g.node(g.nics()[i]).name << "\n";
    }
  }
}

void RenderText(const Report& r, std::ostream& out) {
  const Graph& g = r.topo.graph;
  int packages = 0;
  std::vector<int> seen;
  for (int cpu : g.cpus()) {
    if (std::find(seen.begin(), seen.end(), g.node(cpu).package) == seen.end()) {
      seen.push_back(g.node(cpu).package);
      ++packages;
    }
  }
  out << "ringo-topo: host " << (g.host.empty() ? "(unknown)" : g.host) << ", from "
      << r.topo.origin << "\n";
  out << g.num_gpus() << " GPUs, " << g.num_nics() << " NICs, " << g.cpus().size()
      << " NUMA nodes in " << packages << " packages\n";
  if (g.num_gpus() == 0) out << "No GPU found: showing the CPUs and the PCI tree.\n";

  out << "\n== Machine tree ==\n";
  RenderTree(g, out);

  out << "\n== GPU path matrix ==\n";
  if (g.num_gpus() == 0) {
    out << "(no GPU)\n";
  } else {
    RenderMatrix(g, r.paths, out);
  }

  out << "\n== Rings ==\n";
  if (r.rings.empty()) {
    out << "no GPU: no rings\n";
  } else {
    out << (r.rings_from_dump ? "(as stored in the dump)\n" : "");
    for (size_t c = 0; c < r.rings.size(); ++c) {
      const topology::Ring& ring = r.rings[c];
      out << "channel " << c << ": ";
      if (ring.nic_in >= 0) out << "NIC" << ring.nic_in << " -> ";
      for (size_t i = 0; i < ring.gpus.size(); ++i) out << (i ? " " : "") << ring.gpus[i];
      if (ring.nic_out >= 0) {
        out << " -> NIC" << ring.nic_out;
      } else if (ring.gpus.size() > 1) {
        out << " -> " << ring.gpus.front();
      }
      topology::RingScore score = topology::ScoreRing(g, r.paths, ring);
      out << "   " << Fmt("%.1f", ring.gbps) << " GB/s (ring bottleneck alone "
          << Fmt("%.1f", score.gbps) << " GB/s)\n";
    }
    out << r.rings.size() << " channel" << (r.rings.size() == 1 ? "" : "s") << ", "
        << Fmt("%.1f", topology::TotalGbps(r.rings)) << " GB/s in total"
        << ", farthest edge " << topology::PathTypeName(r.farthest) << "\n";
  }

  if (!r.plan.empty()) {
    // Each edge as a GPU communicator across hosts makes it: within a host
    // GPU peer-to-peer (one process) or CUDA IPC (processes), between hosts
    // pinned host memory moved by the proxy over TCP or verbs, or with
    // RINGO_NET_GPUDIRECT=1 device memory the NIC reads and writes.
    const topology::RingPlan& ch = r.plan.front();
    out << "\n== Ring across " << r.hosts << " hosts (channel 0 of " << r.plan.size() << ") ==\n";
    const int per_host = static_cast<int>(ch.order.size()) / std::max(1, r.hosts);
    for (const topology::RingEdge& e : ch.edges) {
      out << "rank " << e.from << " (host " << e.from / std::max(1, per_host) << ") -> rank " << e.to << ": "
          << (e.transport == topology::TransportKind::kNet
                  ? (r.gpudirect ? "network, GPU memory over verbs (GPUDirect RDMA, RINGO_NET_GPUDIRECT=1) where "
                                   "both ends have it, else pinned host memory"
                                 : "network, pinned host memory over TCP or verbs (GPUDirect RDMA off)")
                  : std::string(topology::PathTypeName(e.path)) + ", GPU peer-to-peer or CUDA IPC")
          << ", " << Fmt("%.1f", e.gbps) << " GB/s\n";
    }
  }

  if (r.hosts > 1 && g.num_nics() > 0) {
    // How a host communicator across hosts uses them (collectives/plan/
    // planner.h's ChannelsForNetDevices, transport/net/choice.h's
    // DevicesNearFirst, engines/channel_balance.h).
    out << "\n== Network devices across hosts ==\n";
    out << g.num_nics() << " NIC(s): host communicators across hosts run at least "
        << std::min(g.num_nics(), 16) << " ring channel(s), one per device (verbs ports on one fabric, or the interfaces "
        << "RINGO_SOCKET_IFNAME names); each collective of 256 KiB or more "
        << "per channel is split over them by measured rate (RINGO_NET_BALANCE)\n";
    std::vector<int> numas;
    for (int nic : g.nics()) {
      if (std::find(numas.begin(), numas.end(), g.node(nic).numa) == numas.end()) numas.push_back(g.node(nic).numa);
    }
    std::sort(numas.begin(), numas.end());
    for (int numa : numas) {
      out << "ranks on NUMA " << (numa < 0 ? std::string("?") : std::to_string(numa)) << " take first:";
      for (int i = 0; i < g.num_nics(); ++i) {
        const auto& n = g.node(g.nics()[i]);
        if (n.numa == numa) out << " NIC" << i << " (" << (n.netdev.empty() ? n.name : n.netdev) << ")";
      }
      out << "\n";
    }
  }

  out << "\n== Predicted all-reduce ==\n";
  if (!r.has_prediction) {
    out << "no GPU: nothing to predict\n";
    return;
  }
  const topology::Prediction& p = r.prediction;
  out << "ring, " << FormatBytes(r.bytes) << ", " << p.nranks << " ranks"
      << (r.hosts > 1 ? " on " + std::to_string(r.hosts) + " hosts" : "") << "\n";
  out << "alpha " << Fmt("%.2f", p.alpha_us) << " us/step, beta " << Fmt("%.1f", p.beta_gbps)
      << " GB/s: t = 2(N-1) * (alpha + S/(N*beta))\n";
  out << "time " << Fmt("%.1f", p.time_us) << " us   algbw " << Fmt("%.2f", p.algbw_gbps)
      << " GB/s   busbw " << Fmt("%.2f", p.busbw_gbps) << " GB/s\n";
  if (r.hosts > 1) {
    // What a host communicator across these hosts would choose between
    // (collectives/engines/doubling.h): the same model, the same alpha and beta.
    const topology::Prediction d = topology::PredictDoublingAllReduce(p.nranks, p.bytes, p.alpha_us, p.beta_gbps);
    const int rounds = topology::DoublingRounds(p.nranks);
    out << "recursive doubling: t = (log2 p + 2 [N != p]) * (alpha + S/beta), " << rounds
        << ((1 << rounds) != p.nranks ? " + 2" : "") << " steps\n";
    out << "time " << Fmt("%.1f", d.time_us) << " us   algbw " << Fmt("%.2f", d.algbw_gbps) << " GB/s   busbw "
        << Fmt("%.2f", d.busbw_gbps) << " GB/s\n";
    out << "a host communicator across these hosts runs "
        << (topology::PrefersDoubling(p.nranks, p.bytes, p.alpha_us, p.beta_gbps) ? "recursive doubling" : "the ring")
        << " at this size (recursive doubling where the model prefers it, up to 256 KiB; GPU communicators "
           "run the ring)\n";
  }
}

}  // namespace ringo::tools
