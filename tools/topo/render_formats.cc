// ringo-topo's machine-readable outputs: JSON and Graphviz (dot).
#include <cstdio>
#include <string>

#include "tools/topo/report.h"

namespace ringo::tools {
namespace {

using topology::Graph;
using topology::Link;
using topology::LinkKind;
using topology::Node;
using topology::NodeKind;

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Graphviz strings: quotes escaped, "\\n" kept as dot's line break.
std::string DotQuote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3f", v);
  return buf;
}

std::string Endpoint(const Graph& g, int node) {
  const Node& n = g.node(node);
  return n.kind == NodeKind::kNic ? "NIC" + std::to_string(n.ordinal) : n.name;
}

}  // namespace

void RenderJson(const Report& r, std::ostream& out) {
  const Graph& g = r.topo.graph;
  out << "{\n  \"host\": " << Quote(g.host) << ",\n  \"origin\": " << Quote(r.topo.origin)
      << ",\n  \"nodes\": [";
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.node(static_cast<int>(i));
    out << (i ? "," : "") << "\n    {\"index\": " << i
        << ", \"kind\": " << Quote(topology::NodeKindName(n.kind))
        << ", \"name\": " << Quote(n.name) << ", \"parent\": " << n.parent
        << ", \"ordinal\": " << n.ordinal << ", \"bus_id\": " << Quote(n.bus_id)
        << ", \"numa\": " << n.numa << ", \"package\": " << n.package
        << ", \"pci_class\": " << n.pci_class << ", \"pci_vendor\": " << n.pci_vendor
        << ", \"pci_device\": " << n.pci_device << ", \"cpuset\": " << Quote(n.cpuset)
        << ", \"cpu_vendor\": " << Quote(n.cpu_vendor) << ", \"netdev\": " << Quote(n.netdev)
        << "}";
  }
  out << "\n  ],\n  \"links\": [";
  for (size_t i = 0; i < g.links().size(); ++i) {
    const Link& l = g.link(static_cast<int>(i));
    out << (i ? "," : "") << "\n    {\"kind\": " << Quote(topology::LinkKindName(l.kind))
        << ", \"a\": " << l.a << ", \"b\": " << l.b << ", \"count\": " << l.count
        << ", \"generation\": " << l.generation << ", \"gbps\": " << Num(l.gbps) << "}";
  }
  out << "\n  ],\n  \"paths\": [";
  bool first = true;
  std::vector<int> ends = g.gpus();
  ends.insert(ends.end(), g.nics().begin(), g.nics().end());
  for (int a : g.gpus()) {
    for (int b : ends) {
      if (a == b) continue;
      const topology::Path& p = r.paths.Get(a, b);
      out << (first ? "" : ",") << "\n    {\"from\": " << Quote(Endpoint(g, a))
          << ", \"to\": " << Quote(Endpoint(g, b))
          << ", \"type\": " << Quote(topology::PathTypeName(p.type))
          << ", \"label\": " << Quote(p.Label()) << ", \"gbps\": " << Num(p.gbps) << "}";
      first = false;
    }
  }
  out << "\n  ],\n  \"rings\": [";
  for (size_t c = 0; c < r.rings.size(); ++c) {
    const topology::Ring& ring = r.rings[c];
    out << (c ? "," : "") << "\n    {\"channel\": " << c << ", \"gpus\": [";
    for (size_t i = 0; i < ring.gpus.size(); ++i) out << (i ? ", " : "") << ring.gpus[i];
    out << "], \"nic_in\": " << ring.nic_in << ", \"nic_out\": " << ring.nic_out
        << ", \"gbps\": " << Num(ring.gbps) << "}";
  }
  out << "\n  ]";
  if (r.has_prediction) {
    const topology::Prediction& p = r.prediction;
    out << ",\n  \"prediction\": {\"collective\": \"all_reduce\", \"algorithm\": \"ring\", "
        << "\"bytes\": " << static_cast<long long>(p.bytes) << ", \"nranks\": " << p.nranks
        << ", \"hosts\": " << r.hosts << ", \"alpha_us\": " << Num(p.alpha_us)
        << ", \"beta_gbps\": " << Num(p.beta_gbps) << ", \"time_us\": " << Num(p.time_us)
        << ", \"algbw_gbps\": " << Num(p.algbw_gbps) << ", \"busbw_gbps\": " << Num(p.busbw_gbps);
    if (r.hosts > 1) {  // recursive doubling, what a host communicator across the hosts may run instead
      const topology::Prediction d = topology::PredictDoublingAllReduce(p.nranks, p.bytes, p.alpha_us, p.beta_gbps);
      out << ", \"doubling_time_us\": " << Num(d.time_us) << ", \"host_choice\": \""
          << (topology::PrefersDoubling(p.nranks, p.bytes, p.alpha_us, p.beta_gbps) ? "doubling" : "ring") << "\"";
    }
    out << "}";
  }
  out << "\n}\n";
}

void RenderDot(const Report& r, std::ostream& out) {
  const Graph& g = r.topo.graph;
  out << "graph topology {\n  label=" << DotQuote("ringo-topo: " + g.host) << ";\n"
      << "  node [fontname=\"Helvetica\"];\n";
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.node(static_cast<int>(i));
    std::string label = Endpoint(g, static_cast<int>(i));
    if (n.kind == NodeKind::kNic) label += "\\n" + n.name;
    if (!n.bus_id.empty()) label += "\\n" + n.bus_id;
    const char* shape = "box";
    const char* color = "black";
    switch (n.kind) {
      case NodeKind::kCpu:
        shape = "box3d";
        break;
      case NodeKind::kGpu:
        color = "darkgreen";
        break;
      case NodeKind::kNic:
        color = "blue";
        break;
      case NodeKind::kNvSwitch:
        shape = "hexagon";
        color = "darkgreen";
        break;
      case NodeKind::kHostBridge:
      case NodeKind::kPciSwitch:
        shape = "ellipse";
        break;
      case NodeKind::kPciDevice:
        shape = "note";
        color = "gray";
        break;
    }
    out << "  n" << i << " [label=" << DotQuote(label) << ", shape=" << shape << ", color=" << color
        << "];\n";
  }
  for (const Link& l : g.links()) {
    char gbps[32];
    std::snprintf(gbps, sizeof(gbps), "%.1f GB/s", l.gbps);
    std::string label = gbps;
    if (l.kind == LinkKind::kNvlink) label = "NV" + std::to_string(l.count) + " " + label;
    out << "  n" << l.a << " -- n" << l.b << " [label=" << DotQuote(label);
    if (l.kind == LinkKind::kNvlink) out << ", color=darkgreen, penwidth=2";
    if (l.kind == LinkKind::kSmp) out << ", style=dashed";
    out << "];\n";
  }
  out << "}\n";
}

}  // namespace ringo::tools
