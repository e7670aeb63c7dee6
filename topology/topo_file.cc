#include "topology/topo_file.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

namespace ringo::topology {
namespace {

std::string Text(const std::string& s) { return s.empty() ? "-" : s; }

std::string Hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%04x", v);
  return buf;
}

std::string Fixed3(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3f", v);
  return buf;
}

// One "keyword index key=value ..." line.
class Fields {
 public:
  Fields(const std::string& line, std::string where) : where_(std::move(where)) {
    std::istringstream in(line);
    in >> keyword_;
    std::string token;
    while (in >> token) {
      auto eq = token.find('=');
      if (eq == std::string::npos) {
        positional_.push_back(token);
      } else {
        values_[token.substr(0, eq)] = token.substr(eq + 1);
      }
    }
  }

  const std::string& keyword() const { return keyword_; }
  const std::vector<std::string>& positional() const { return positional_; }

  base::Status Str(const char* key, std::string* out) const {
    auto it = values_.find(key);
    if (it == values_.end()) return Error(std::string("missing ") + key + "=");
    *out = it->second == "-" ? "" : it->second;
    return base::OkStatus();
  }

  base::Status Int(const char* key, long long min, long long max, int64_t* out) const {
    std::string s;
    RETURN_IF_ERROR(Str(key, &s));
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 0);
    if (s.empty() || errno != 0 || *end != '\0' || v < min || v > max) {
      return Error(std::string("bad ") + key + "='" + s + "'");
    }
    *out = v;
    return base::OkStatus();
  }

  template <typename T>
  base::Status Num(const char* key, long long min, long long max, T* out) const {
    int64_t v = 0;
    RETURN_IF_ERROR(Int(key, min, max, &v));
    *out = static_cast<T>(v);
    return base::OkStatus();
  }

  base::Status Gbps(const char* key, double* out) const {
    std::string s;
    RETURN_IF_ERROR(Str(key, &s));
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || !(v >= 0) || v > 1e9) {
      return Error(std::string("bad ") + key + "='" + s + "'");
    }
    *out = v;
    return base::OkStatus();
  }

  base::Status Error(const std::string& what) const {
    return base::InvalidArgument(where_ + ": " + what);
  }

 private:
  std::string where_;
  std::string keyword_;
  std::vector<std::string> positional_;
  std::map<std::string, std::string> values_;
};

base::Status ParseNode(const Fields& f, Graph* graph) {
  Node n;
  std::string kind;
  RETURN_IF_ERROR(f.Str("kind", &kind));
  auto k = ParseNodeKind(kind);
  if (!k) return f.Error("unknown node kind '" + kind + "'");
  n.kind = *k;
  RETURN_IF_ERROR(f.Str("name", &n.name));
  RETURN_IF_ERROR(f.Num("parent", -1, 1 << 20, &n.parent));
  RETURN_IF_ERROR(f.Num("ordinal", -1, 1 << 20, &n.ordinal));
  RETURN_IF_ERROR(f.Str("bus", &n.bus_id));
  RETURN_IF_ERROR(f.Num("numa", -1, 1 << 20, &n.numa));
  RETURN_IF_ERROR(f.Num("package", -1, 1 << 20, &n.package));
  RETURN_IF_ERROR(f.Num("class", 0, 0xffffff, &n.pci_class));
  RETURN_IF_ERROR(f.Num("vendor", 0, 0xffff, &n.pci_vendor));
  RETURN_IF_ERROR(f.Num("device", 0, 0xffff, &n.pci_device));
  RETURN_IF_ERROR(f.Str("cpuset", &n.cpuset));
  RETURN_IF_ERROR(f.Str("cpu_vendor", &n.cpu_vendor));
  RETURN_IF_ERROR(f.Str("netdev", &n.netdev));
  graph->AddNode(n);
  return base::OkStatus();
}

base::Status ParseLink(const Fields& f, Graph* graph) {
  Link l;
  std::string kind;
  RETURN_IF_ERROR(f.Str("kind", &kind));
  auto k = ParseLinkKind(kind);
  if (!k) return f.Error("unknown link kind '" + kind + "'");
  l.kind = *k;
  RETURN_IF_ERROR(f.Num("a", 0, 1 << 20, &l.a));
  RETURN_IF_ERROR(f.Num("b", 0, 1 << 20, &l.b));
  RETURN_IF_ERROR(f.Num("count", 1, 1024, &l.count));
  RETURN_IF_ERROR(f.Num("gen", 0, 64, &l.generation));
  RETURN_IF_ERROR(f.Gbps("gbps", &l.gbps));
  graph->AddLink(l);
  return base::OkStatus();
}

base::Status ParseRing(const Fields& f, std::vector<Ring>* rings) {
  Ring r;
  RETURN_IF_ERROR(f.Gbps("gbps", &r.gbps));
  RETURN_IF_ERROR(f.Num("nic_in", -1, 1 << 20, &r.nic_in));
  RETURN_IF_ERROR(f.Num("nic_out", -1, 1 << 20, &r.nic_out));
  std::string list;
  RETURN_IF_ERROR(f.Str("gpus", &list));
  std::istringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0 || v > (1 << 20)) {
      return f.Error("bad GPU '" + item + "' in gpus=");
    }
    r.gpus.push_back(static_cast<int>(v));
  }
  rings->push_back(r);
  return base::OkStatus();
}

// The index after the keyword must be the next one expected.
base::Status CheckIndex(const Fields& f, size_t expected) {
  if (f.positional().size() != 1 || f.positional()[0] != std::to_string(expected)) {
    return f.Error("expected " + f.keyword() + " " + std::to_string(expected));
  }
  return base::OkStatus();
}

}  // namespace

std::string DumpTopology(const Graph& graph, const std::vector<Ring>& rings) {
  std::ostringstream out;
  out << kTopoFileHeader << "\n";
  out << "host " << Text(graph.host) << "\n";
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    const Node& n = graph.node(static_cast<int>(i));
    out << "node " << i << " kind=" << NodeKindName(n.kind) << " name=" << Text(n.name)
        << " parent=" << n.parent << " ordinal=" << n.ordinal << " bus=" << Text(n.bus_id)
        << " numa=" << n.numa << " package=" << n.package << " class=" << Hex(n.pci_class)
        << " vendor=" << Hex(n.pci_vendor) << " device=" << Hex(n.pci_device)
        << " cpuset=" << Text(n.cpuset) << " cpu_vendor=" << Text(n.cpu_vendor)
        << " netdev=" << Text(n.netdev) << "\n";
  }
  for (size_t i = 0; i < graph.links().size(); ++i) {
    const Link& l = graph.link(static_cast<int>(i));
    out << "link " << i << " kind=" << LinkKindName(l.kind) << " a=" << l.a << " b=" << l.b
        << " count=" << l.count << " gen=" << l.generation << " gbps=" << Fixed3(l.gbps) << "\n";
  }
  for (size_t i = 0; i < rings.size(); ++i) {
    const Ring& r = rings[i];
    out << "ring " << i << " gbps=" << Fixed3(r.gbps) << " nic_in=" << r.nic_in
        << " nic_out=" << r.nic_out << " gpus=";
    for (size_t k = 0; k < r.gpus.size(); ++k) out << (k ? "," : "") << r.gpus[k];
    if (r.gpus.empty()) out << "-";
    out << "\n";
  }
  out << "end\n";
  return out.str();
}

base::StatusOr<TopoFile> ParseTopology(const std::string& text, const std::string& origin) {
  if (!LooksLikeTopologyDump(text)) {
    return base::InvalidArgument(origin + ": not a Ringo topology dump (no '" +
                                 std::string(kTopoFileHeader) + "' line)");
  }
  TopoFile file;
  std::istringstream in(text);
  std::string line;
  bool ended = false;
  std::getline(in, line);  // the header
  for (int lineno = 2; std::getline(in, line); ++lineno) {
    if (line.empty() || line[0] == '#') continue;
    Fields f(line, origin + ":" + std::to_string(lineno));
    if (ended) return f.Error("text after 'end'");
    if (f.keyword() == "host") {
      if (f.positional().size() != 1) return f.Error("expected 'host NAME'");
      file.graph.host = f.positional()[0] == "-" ? "" : f.positional()[0];
    } else if (f.keyword() == "node") {
      RETURN_IF_ERROR(CheckIndex(f, file.graph.nodes().size()));
      RETURN_IF_ERROR(ParseNode(f, &file.graph));
    } else if (f.keyword() == "link") {
      RETURN_IF_ERROR(CheckIndex(f, file.graph.links().size()));
      RETURN_IF_ERROR(ParseLink(f, &file.graph));
    } else if (f.keyword() == "ring") {
      RETURN_IF_ERROR(CheckIndex(f, file.rings.size()));
      RETURN_IF_ERROR(ParseRing(f, &file.rings));
    } else if (f.keyword() == "end") {
      ended = true;
    } else {
      return f.Error("unknown line '" + f.keyword() + "'");
    }
  }
  if (!ended) return base::InvalidArgument(origin + ": truncated (no 'end' line)");
  base::Status st = file.graph.Finalize();
  if (!st.ok()) return st.WithContext(origin);
  for (const Ring& r : file.rings) {
    for (int g : r.gpus) {
      if (g >= file.graph.num_gpus()) {
        return base::InvalidArgument(origin + ": a ring names GPU " + std::to_string(g));
      }
    }
    if (r.nic_in >= file.graph.num_nics() || r.nic_out >= file.graph.num_nics()) {
      return base::InvalidArgument(origin + ": a ring names a NIC the graph does not have");
    }
  }
  return file;
}

base::Status WriteTopologyFile(const std::string& path, const Graph& graph,
                               const std::vector<Ring>& rings) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return base::SystemError("cannot write '" + path + "': " + std::strerror(errno));
  out << DumpTopology(graph, rings);
  out.close();
  if (!out) return base::SystemError("error writing '" + path + "'");
  return base::OkStatus();
}

base::StatusOr<TopoFile> ReadTopologyFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return base::InvalidArgument("cannot read '" + path + "': " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return ParseTopology(text.str(), path);
}

bool LooksLikeTopologyDump(std::string_view text) {
  return text.substr(0, kTopoFileHeader.size()) == kTopoFileHeader;
}

}  // namespace ringo::topology
