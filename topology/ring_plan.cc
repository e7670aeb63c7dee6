#include "topology/ring_plan.h"

#include <algorithm>
#include <climits>
#include <memory>
#include <tuple>

#include "topology/cost_model.h"
#include "topology/link_speed.h"

namespace ringo::topology {
namespace {

// One host's share of the ring.
struct HostPart {
  int host = 0;
  const Graph* graph = nullptr;
  std::unique_ptr<PathMatrix> paths;
  std::vector<int> gpu_ranks;   // ranks with a GPU
  std::vector<int> host_ranks;  // host-memory ranks, in ring order
  std::vector<Ring> rings;      // GPU channels (empty without GPU ranks)
};

int PackageOfNuma(const Graph* graph, int numa) {
  if (graph == nullptr || numa < 0) return -1;
  for (int cpu : graph->cpus()) {
    if (graph->node(cpu).numa == numa) return graph->node(cpu).package;
  }
  return -1;
}

// The NUMA node a rank's data lives on: its GPU's, or its own.
int EffectiveNuma(const HostPart& part, const RankInfo& r) {
  if (r.gpu >= 0) return part.graph->node(part.graph->gpus()[r.gpu]).numa;
  return r.numa;
}

base::Status SearchHost(HostPart* part, const std::vector<RankInfo>& ranks, bool multi_host,
                        const RingSearchOptions& search) {
  std::vector<int> gpus;
  for (int r : part->gpu_ranks) gpus.push_back(ranks[r].gpu);
  std::sort(gpus.begin(), gpus.end());
  gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
  RingSearchOptions options = search;
  options.gpus = gpus;
  // A host graph without NICs (the network is reached some other way): order
  // the GPUs as a closed ring and cut it where it enters the host.
  options.multi_host = multi_host && part->graph->num_nics() > 0;
  part->paths = std::make_unique<PathMatrix>(*part->graph);
  ASSIGN_OR_RETURN(part->rings, SearchRings(*part->graph, *part->paths, options));
  if (part->rings.empty()) {
    return base::Internal("ring search found no ring on host " + std::to_string(part->host));
  }
  return base::OkStatus();
}

// Appends host `part`'s ranks for channel `c` to `order`.
void AppendHost(const HostPart& part, const std::vector<RankInfo>& ranks, size_t c,
                std::vector<int>* order) {
  if (!part.rings.empty()) {
    for (int gpu : part.rings[c].gpus) {
      for (int r : part.gpu_ranks) {
        if (ranks[r].gpu == gpu) order->push_back(r);
      }
    }
  }
  order->insert(order->end(), part.host_ranks.begin(), part.host_ranks.end());
}

RingEdge MakeEdge(const HostPart& from_part, const HostPart& to_part,
                  const std::vector<RankInfo>& ranks, size_t channel, int from, int to,
                  const TransportPolicy& policy) {
  RingEdge e;
  e.from = from;
  e.to = to;
  const RankInfo& a = ranks[from];
  const RankInfo& b = ranks[to];
  if (a.host != b.host) {
    e.path = PathType::kNet;
    e.gbps = DefaultBetaGbps(PathType::kNet);
    const HostPart& out = from_part;
    if (!out.rings.empty() && out.rings[channel].nic_out >= 0) {
      int nic = out.graph->nics()[out.rings[channel].nic_out];
      e.gbps = out.graph->link(out.graph->Uplink(nic)).gbps;
    }
  } else if (a.gpu >= 0 && b.gpu >= 0) {
    const Path& p = from_part.paths->Gpu(a.gpu, b.gpu);
    e.path = p.type;
    e.gbps = p.gbps;
  } else {
    int na = EffectiveNuma(from_part, a), nb = EffectiveNuma(to_part, b);
    bool same = na < 0 || nb < 0 || na == nb;
    bool with_gpu = a.gpu >= 0 || b.gpu >= 0;
    e.path = same ? (with_gpu ? PathType::kPhb : PathType::kLoc) : PathType::kSys;
    e.gbps = DefaultBetaGbps(e.path);
  }
  e.transport = ChooseTransport(a, b, e.path, policy);
  return e;
}

}  // namespace

const char* TransportKindName(TransportKind kind) {
  switch (kind) {
    case TransportKind::kP2p:
      return "p2p";
    case TransportKind::kShm:
      return "shm";
    case TransportKind::kNet:
      return "net";
  }
  return "?";
}

PathType DefaultP2pLevel(const Graph* graph) {
  if (graph == nullptr || graph->cpus().empty()) return PathType::kPxb;
  for (int cpu : graph->cpus()) {
    if (graph->node(cpu).cpu_vendor != "AuthenticAMD") return PathType::kPxb;
  }
  return PathType::kSys;
}

base::StatusOr<TransportPolicy> PolicyFromConfig(const base::Config& config, const Graph* graph) {
  TransportPolicy policy;
  policy.p2p_level = DefaultP2pLevel(graph);
  if (auto level = config.Get("RINGO_P2P_LEVEL")) {
    std::optional<PathType> type = ParsePathType(*level);
    if (!type || *type == PathType::kLoc || *type == PathType::kNet) {
      return base::InvalidArgument("RINGO_P2P_LEVEL='" + *level +
                                   "' is not one of NVL, PIX, PXB, PHB, NODE, SYS");
    }
    policy.p2p_level = *type;
  }
  policy.p2p_disable = config.Get("RINGO_P2P_DISABLE").value_or("0") == "1";
  policy.shm_disable = config.Get("RINGO_SHM_DISABLE").value_or("0") == "1";
  return policy;
}

TransportKind ChooseTransport(const RankInfo& from, const RankInfo& to, PathType path,
                              const TransportPolicy& policy) {
  if (from.host != to.host) return TransportKind::kNet;
  if (from.gpu >= 0 && to.gpu >= 0 && !policy.p2p_disable &&
      (from.gpu == to.gpu || path <= policy.p2p_level)) {
    return TransportKind::kP2p;
  }
  return policy.shm_disable ? TransportKind::kNet : TransportKind::kShm;
}

base::StatusOr<std::vector<RingPlan>> PlanRings(const std::map<int, const Graph*>& graph_for_host,
                                                const std::vector<RankInfo>& ranks,
                                                const TransportPolicy& policy,
                                                const RingSearchOptions& search) {
  if (ranks.empty()) return base::InvalidArgument("PlanRings: no ranks");
  std::vector<std::unique_ptr<HostPart>> parts;  // in order of each host's lowest rank
  std::map<int, HostPart*> by_host;
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    const RankInfo& info = ranks[r];
    HostPart*& part = by_host[info.host];
    if (part == nullptr) {
      parts.push_back(std::make_unique<HostPart>());
      part = parts.back().get();
      part->host = info.host;
      auto g = graph_for_host.find(info.host);
      part->graph = g == graph_for_host.end() ? nullptr : g->second;
    }
    if (info.gpu >= 0) {
      if (part->graph == nullptr || info.gpu >= part->graph->num_gpus()) {
        return base::InvalidArgument("PlanRings: rank " + std::to_string(r) + " names GPU " +
                                     std::to_string(info.gpu) + " which host " +
                                     std::to_string(info.host) + "'s graph does not have");
      }
      part->gpu_ranks.push_back(r);
    } else {
      part->host_ranks.push_back(r);
    }
  }
  const bool multi_host = parts.size() > 1;
  size_t channels = 0;
  for (auto& part : parts) {
    // Host-memory ranks by socket, then NUMA node, then rank.
    std::stable_sort(part->host_ranks.begin(), part->host_ranks.end(), [&](int x, int y) {
      auto key = [&](int r) {
        return std::make_tuple(PackageOfNuma(part->graph, ranks[r].numa), ranks[r].numa, r);
      };
      return key(x) < key(y);
    });
    if (part->gpu_ranks.empty()) continue;
    RETURN_IF_ERROR(SearchHost(part.get(), ranks, multi_host, search));
    channels = channels == 0 ? part->rings.size() : std::min(channels, part->rings.size());
  }
  channels = std::max<size_t>(channels, 1);
  std::vector<RingPlan> plan(channels);
  for (size_t c = 0; c < channels; ++c) {
    RingPlan& ring = plan[c];
    std::vector<const HostPart*> part_at;  // position -> host part
    for (const auto& part : parts) {
      size_t before = ring.order.size();
      AppendHost(*part, ranks, c, &ring.order);
      part_at.insert(part_at.end(), ring.order.size() - before, part.get());
    }
    const size_t n = ring.order.size();
    ring.gbps = kLocalGbps;
    for (const auto& part : parts) {
      if (!part->rings.empty()) ring.gbps = std::min(ring.gbps, part->rings[c].gbps);
    }
    for (size_t i = 0; n > 1 && i < n; ++i) {
      size_t j = (i + 1) % n;
      RingEdge e =
          MakeEdge(*part_at[i], *part_at[j], ranks, c, ring.order[i], ring.order[j], policy);
      // GPU pairs on one host are already inside the searched ring's figure.
      bool searched =
          ranks[e.from].gpu >= 0 && ranks[e.to].gpu >= 0 && ranks[e.from].host == ranks[e.to].host;
      if (!searched) ring.gbps = std::min(ring.gbps, e.gbps);
      ring.edges.push_back(e);
    }
    if (n == 1) ring.gbps = DefaultBetaGbps(PathType::kLoc);
  }
  return plan;
}

base::StatusOr<std::vector<RingPlan>> PlanRings(const Graph* graph,
                                                const std::vector<RankInfo>& ranks,
                                                const TransportPolicy& policy,
                                                const RingSearchOptions& search) {
  std::map<int, const Graph*> graphs;
  for (const RankInfo& r : ranks) graphs[r.host] = graph;
  return PlanRings(graphs, ranks, policy, search);
}

}  // namespace ringo::topology
