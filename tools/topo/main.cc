// ringo-topo: shows what Ringo sees of a machine (or of an hwloc XML file, or
// of a dump): the tree, the GPU path matrix, the rings and the predicted
// all-reduce; dumps and loads the graph; Graphviz and JSON; the environment.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "base/config.h"
#include "tools/topo/report.h"
#include "topology/cost_model.h"
#include "topology/ring_plan.h"
#include "topology/topo_file.h"

namespace ringo::tools {
namespace {

constexpr const char* kUsage =
    "usage: ringo-topo [options]\n"
    "  --xml FILE     an hwloc XML file (lstopo --of xml) instead of this machine\n"
    "                 (as RINGO_TOPO_FILE)\n"
    "  --nvlink FILE  NVLink overlay for the XML file or machine (as RINGO_NVLINK_FILE)\n"
    "  --load FILE    a dump written by --dump (graph and rings)\n"
    "  --dump FILE    write the graph and the rings to FILE (as RINGO_TOPO_DUMP_FILE)\n"
    "  --size N       all-reduce size of the prediction, bytes with optional K, M, G\n"
    "                 (binary multiples; default 256M)\n"
    "  --hosts N      predict for N such hosts: rings enter and leave through NICs\n"
    "  --json         JSON instead of text\n"
    "  --dot          Graphviz (dot) instead of text\n"
    "  --env          list Ringo's environment variables, defaults and help\n"
    "  --env-markdown the same as a Markdown document (docs/environment.md)\n"
    "  --help         this text\n";

struct Options {
  std::string xml, nvlink, load, dump;
  double bytes = 256.0 * 1024 * 1024;
  int hosts = 1;
  bool json = false, dot = false, env = false, env_markdown = false, help = false;
};

bool ParseSize(const std::string& text, double* out) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || errno != 0 || end == text.c_str() || v < 0) return false;
  std::string suffix(end);
  double mult = 1;
  if (suffix == "K" || suffix == "k")
    mult = 1024.0;
  else if (suffix == "M" || suffix == "m")
    mult = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g")
    mult = 1024.0 * 1024 * 1024;
  else if (!suffix.empty() && suffix != "B" && suffix != "b")
    return false;
  *out = v * mult;
  return true;
}

// Returns an error message, or "" when the arguments parse.
std::string ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--xml" || a == "--nvlink" || a == "--load" || a == "--dump") {
      if (!value(&v)) return a + " needs a file";
      (a == "--xml" ? o->xml : a == "--nvlink" ? o->nvlink : a == "--load" ? o->load : o->dump) = v;
    } else if (a == "--size") {
      if (!value(&v) || !ParseSize(v, &o->bytes)) return "--size needs a size like 256M";
    } else if (a == "--hosts") {
      if (!value(&v)) return "--hosts needs a number";
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (*end != '\0' || n < 1 || n > 100000) return "--hosts needs a number >= 1";
      o->hosts = static_cast<int>(n);
    } else if (a == "--json") {
      o->json = true;
    } else if (a == "--dot") {
      o->dot = true;
    } else if (a == "--env") {
      o->env = true;
    } else if (a == "--env-markdown") {
      o->env_markdown = true;
    } else if (a == "--help" || a == "-h") {
      o->help = true;
    } else {
      return "unknown argument '" + a + "'";
    }
  }
  if (!o->xml.empty() && !o->load.empty()) return "--xml and --load exclude each other";
  if (o->json && o->dot) return "--json and --dot exclude each other";
  return "";
}

void PrintEnv(std::ostream& out) {
  const base::Config& config = base::GetConfig();
  out << "Ringo's environment variables (declared in base/config.cc):\n\n";
  for (const base::EnvVarInfo& var : base::DeclaredEnvVars()) {
    out << var.name << " (" << var.type << ", default "
        << (var.default_value[0] ? var.default_value : "unset") << ")";
    if (auto set = config.Get(var.name)) out << "  [set: " << *set << "]";
    out << "\n    " << var.help << "\n";
  }
}

// A table cell: pipes escaped, line breaks as spaces.
std::string Cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else out += c == '\n' ? ' ' : c;
  }
  return out;
}

// docs/environment.md: every declared variable, from the registry, in
// three tables (Ringo's, CUDA's, the launchers'), in declaration order.
void PrintEnvMarkdown(std::ostream& out) {
  out << "# Environment variables\n\n"
         "Generated from the configuration registry (`base/config.cc`) by `ringo-topo --env-markdown`;\n"
         "a test fails when this file and the registry differ. Regenerate it with\n\n"
         "    bazel run //tools/topo:ringo-topo -- --env-markdown > docs/environment.md\n\n"
         "Every variable is read once, when the process first needs its configuration; a\n"
         "communicator keeps the snapshot it was made with. `ringo-topo --env` lists the\n"
         "same variables with the values set in the current environment.\n";
  struct Group {
    const char* title;
    const char* intro;
    bool (*takes)(const std::string& name);
  };
  const Group groups[] = {
      {"Ringo's", "What Ringo itself reads.",
       [](const std::string& n) { return n.rfind("RINGO_", 0) == 0; }},
      {"CUDA's", "CUDA's own variables, which Ringo reads and may set.",
       [](const std::string& n) { return n.rfind("CUDA_", 0) == 0; }},
      {"The launchers'",
       "Read by Ringo's tools (ringo-perf, ringo-train, the benchmark peers) to find their rank, the number of "
       "ranks and the rendezvous, so that mpirun, srun and torchrun start them without Ringo linking MPI; the "
       "library itself never reads them.",
       [](const std::string& n) { return n.rfind("RINGO_", 0) != 0 && n.rfind("CUDA_", 0) != 0; }},
  };
  for (const Group& g : groups) {
    out << "\n## " << g.title << "\n\n" << g.intro << "\n\n";
    out << "| variable | type | default | meaning |\n|---|---|---|---|\n";
    for (const base::EnvVarInfo& var : base::DeclaredEnvVars()) {
      if (!g.takes(var.name)) continue;
      out << "| `" << var.name << "` | " << var.type << " | "
          << (var.default_value[0] ? std::string("`") + var.default_value + "`" : std::string("unset")) << " | "
          << Cell(var.help) << " |\n";
    }
  }
}

base::Status BuildReport(const Options& o, Report* r) {
  const base::Config& config = base::GetConfig();
  topology::TopologySource source = topology::SourceFromConfig(config);
  if (!o.xml.empty()) source.file = o.xml;
  if (!o.nvlink.empty()) source.nvlink_file = o.nvlink;
  if (!o.load.empty()) {
    ASSIGN_OR_RETURN(topology::TopoFile file, topology::ReadTopologyFile(o.load));
    r->topo.graph = std::move(file.graph);
    r->topo.rings = std::move(file.rings);
    r->topo.origin = "dump " + o.load;
  } else {
    ASSIGN_OR_RETURN(r->topo, topology::LoadTopology(source));
  }
  const topology::Graph& g = r->topo.graph;
  r->paths = topology::PathMatrix(g);
  r->hosts = o.hosts;
  r->bytes = o.bytes;
  if (g.num_gpus() == 0) return base::OkStatus();
  if (!r->topo.rings.empty() && o.hosts == 1) {
    r->rings = r->topo.rings;
    r->rings_from_dump = true;
  } else {
    topology::RingSearchOptions search;
    search.multi_host = o.hosts > 1 && g.num_nics() > 0;
    ASSIGN_OR_RETURN(r->rings, topology::SearchRings(g, r->paths, search));
  }
  const topology::CostModel model = topology::CostModel::Default();
  if (o.hosts == 1) {
    r->prediction = topology::PredictAllReduce(model, r->paths, r->rings, o.bytes);
    for (const topology::Ring& ring : r->rings) {
      for (size_t i = 0; i < ring.gpus.size() && ring.gpus.size() > 1; ++i) {
        auto t = r->paths.Gpu(ring.gpus[i], ring.gpus[(i + 1) % ring.gpus.size()]).type;
        if (t > r->farthest) r->farthest = t;
      }
    }
  } else {
    // Every host alike: one rank per GPU on each.
    std::vector<topology::RankInfo> ranks;
    for (int h = 0; h < o.hosts; ++h) {
      for (int gpu = 0; gpu < g.num_gpus(); ++gpu) ranks.push_back({h, gpu, -1});
    }
    ASSIGN_OR_RETURN(topology::TransportPolicy policy, topology::PolicyFromConfig(config, &g));
    ASSIGN_OR_RETURN(auto plan, topology::PlanRings(&g, ranks, policy));
    // GPU ranks: their network edges stage through pinned host memory,
    // unless RINGO_NET_GPUDIRECT=1 (GPUDirect RDMA where both ends have it).
    r->gpudirect = config.net_gpudirect;
    r->prediction = topology::PredictAllReduce(model, plan, o.bytes, /*gpu_staged=*/!r->gpudirect);
    for (const auto& e : plan.front().edges) {
      if (e.path > r->farthest) r->farthest = e.path;
    }
    r->plan = plan;
  }
  r->has_prediction = true;
  return base::OkStatus();
}

int Main(int argc, char** argv) {
  Options o;
  std::string error = ParseArgs(argc, argv, &o);
  if (!error.empty()) {
    std::cerr << "ringo-topo: " << error << "\n" << kUsage;
    return 2;
  }
  if (o.help) {
    std::cout << kUsage;
    return 0;
  }
  if (o.env) {
    PrintEnv(std::cout);
    return 0;
  }
  if (o.env_markdown) {
    PrintEnvMarkdown(std::cout);
    return 0;
  }
  Report report;
  base::Status st = BuildReport(o, &report);
  if (!st.ok()) {
    std::cerr << "ringo-topo: " << st.ToString() << "\n";
    return 1;
  }
  // --dump, else RINGO_TOPO_DUMP_FILE if set.
  st = o.dump.empty()
           ? topology::DumpTopologyIfRequested(base::GetConfig(), report.topo.graph, report.rings)
           : topology::WriteTopologyFile(o.dump, report.topo.graph, report.rings);
  if (!st.ok()) {
    std::cerr << "ringo-topo: " << st.ToString() << "\n";
    return 1;
  }
  if (o.json) {
    RenderJson(report, std::cout);
  } else if (o.dot) {
    RenderDot(report, std::cout);
  } else {
    RenderText(report, std::cout);
    if (!o.dump.empty()) std::cout << "\nwrote " << o.dump << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace ringo::tools

int main(int argc, char** argv) { return ringo::tools::Main(argc, argv); }
