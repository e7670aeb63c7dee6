#include "collectives/plan/ring_choice.h"

#include <map>
#include <memory>
#include <mutex>

#include "base/logging.h"
#include "topology/topology.h"

namespace ringo::collectives {
namespace {

std::mutex g_graph_mu;
// Keyed by (RINGO_TOPO_FILE, RINGO_NVLINK_FILE); graphs live for the process.
std::map<std::pair<std::string, std::string>, std::unique_ptr<topology::Graph>>* g_graphs =
    new std::map<std::pair<std::string, std::string>, std::unique_ptr<topology::Graph>>();  // GUARDED_BY(g_graph_mu)

}  // namespace

base::StatusOr<const topology::Graph*> LocalGraph(const base::Config& config) {
  const topology::TopologySource source = topology::SourceFromConfig(config);
  std::lock_guard<std::mutex> lock(g_graph_mu);
  auto key = std::make_pair(source.file, source.nvlink_file);
  auto it = g_graphs->find(key);
  if (it != g_graphs->end()) return it->second.get();
  auto loaded = topology::LoadTopology(source);
  if (!loaded.ok()) return loaded.status().WithContext("topology");
  RETURN_IF_ERROR(topology::DumpTopologyIfRequested(config, loaded->graph, loaded->rings));
  RINGO_LOG(INFO) << "topology from " << loaded->origin << ": " << loaded->graph.gpus().size() << " GPU(s), "
                  << loaded->graph.nics().size() << " NIC(s)";
  auto graph = std::make_unique<topology::Graph>(std::move(loaded->graph));
  const topology::Graph* out = graph.get();
  g_graphs->emplace(key, std::move(graph));
  return out;
}

int LocalNumaNode(const base::Config& config) {
  auto graph = LocalGraph(config);
  return graph.ok() ? topology::CurrentNumaNode(**graph) : -1;
}

std::string RingChoice::Describe() const {
  std::string s;
  for (size_t i = 0; i < order.size(); ++i) {
    s += std::to_string(order[i]);
    if (i < edges.size()) s += std::string(" -(") + topology::TransportKindName(edges[i].transport) + ")-> ";
  }
  if (!order.empty()) s += std::to_string(order[0]);
  return s;
}

base::StatusOr<topology::TransportPolicy> TransportPolicyFor(const base::Config& config) {
  ASSIGN_OR_RETURN(const topology::Graph* graph, LocalGraph(config));
  return topology::PolicyFromConfig(config, graph);
}

base::StatusOr<RingChoice> ChooseRing(const base::Config& config, const std::vector<topology::RankInfo>& ranks,
                                      bool deterministic) {
  ASSIGN_OR_RETURN(const topology::Graph* graph, LocalGraph(config));
  ASSIGN_OR_RETURN(topology::TransportPolicy policy, topology::PolicyFromConfig(config, graph));
  ASSIGN_OR_RETURN(std::vector<topology::RingPlan> plans, topology::PlanRings(graph, ranks, policy));
  if (plans.empty()) return base::Internal("the topology planned no ring");
  RingChoice choice;
  choice.order = plans[0].order;
  choice.edges = plans[0].edges;
  if (deterministic) {
    // Reductions run as a chain in ring order: the ring is the ranks in rank
    // order, whatever the topology prefers, so results do not depend on it.
    const int n = static_cast<int>(ranks.size());
    topology::RingEdge local;  // what the plan uses within a host
    for (const topology::RingEdge& planned : choice.edges) {
      if (ranks[planned.from].host == ranks[planned.to].host) local = planned;
    }
    std::vector<topology::RingEdge> edges;
    for (int r = 0; r < n && n > 1; ++r) {
      const int to = (r + 1) % n;
      topology::RingEdge e = local;
      e.from = r;
      e.to = to;
      if (ranks[r].host != ranks[to].host) e.transport = topology::TransportKind::kNet;
      edges.push_back(e);
    }
    for (int r = 0; r < n; ++r) choice.order[r] = r;
    choice.edges = edges;
  }
  for (const topology::RingEdge& e : choice.edges) {
    if (ranks.size() > 1 && e.transport == topology::TransportKind::kP2p) {
      return base::InvalidUsage("the ring edge rank " + std::to_string(e.from) + " -> rank " + std::to_string(e.to) +
                                " needs the p2p transport, which host memory cannot use");
    }
  }
  return choice;
}

}  // namespace ringo::collectives
