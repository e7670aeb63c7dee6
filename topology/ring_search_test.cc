// Ring search on the fixtures and on synthetic machines: the rings chosen,
// their channels and bandwidth, chains through NICs for several hosts, and
// the heuristic against the exhaustive search.
#include "topology/ring_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "topology/link_speed.h"
#include "topology/test_fixtures.h"

namespace ringo::topology {
namespace {

using testing::LoadFixture;

std::vector<Ring> Search(const Graph& g, RingSearchOptions options = {}) {
  PathMatrix paths(g);
  auto rings = SearchRings(g, paths, options);
  EXPECT_TRUE(rings.ok()) << rings.status().ToString();
  return rings.ok() ? *rings : std::vector<Ring>{};
}

// Path types of a closed ring's edges.
std::vector<PathType> EdgeTypes(const Graph& g, const Ring& ring) {
  PathMatrix paths(g);
  std::vector<PathType> types;
  const size_t n = ring.gpus.size();
  for (size_t i = 0; i < n; ++i)
    types.push_back(paths.Gpu(ring.gpus[i], ring.gpus[(i + 1) % n]).type);
  return types;
}

bool IsPermutation(const std::vector<int>& order, int n) {
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < n; ++i) {
    if (i >= static_cast<int>(sorted.size()) || sorted[i] != i) return false;
  }
  return static_cast<int>(sorted.size()) == n;
}

TEST(RingSearch, NvswitchGivesSeveralChannels) {
  Graph h100 = LoadFixture("dgx_h100");
  std::vector<Ring> rings = Search(h100);
  ASSERT_EQ(rings.size(), 9u);  // 360 GB/s of NVLink per GPU in 40 GB/s channels
  for (const Ring& r : rings) {
    EXPECT_TRUE(IsPermutation(r.gpus, 8));
    EXPECT_DOUBLE_EQ(r.gbps, 40.0);
    for (PathType t : EdgeTypes(h100, r)) EXPECT_EQ(t, PathType::kNvl);
  }
  EXPECT_DOUBLE_EQ(TotalGbps(rings), 360.0);
  EXPECT_DOUBLE_EQ(ScoreRing(h100, PathMatrix(h100), rings[0]).gbps, 360.0);
  Graph a100 = LoadFixture("dgx_a100");
  rings = Search(a100);
  EXPECT_EQ(rings.size(), 6u);
  EXPECT_DOUBLE_EQ(TotalGbps(rings), 240.0);
}

TEST(RingSearch, PcieRingCrossesSocketsTwice) {
  Graph g = LoadFixture("pcie_8gpu");
  std::vector<Ring> rings = Search(g);
  ASSERT_EQ(rings.size(), 1u);  // both directions of the socket link are used
  std::vector<PathType> types = EdgeTypes(g, rings[0]);
  EXPECT_EQ(std::count(types.begin(), types.end(), PathType::kSys), 2);
  // GPUs of one switch are ring neighbours.
  EXPECT_EQ(std::count(types.begin(), types.end(), PathType::kPix), 4);
  EXPECT_DOUBLE_EQ(rings[0].gbps, 22.0);  // the UPI link, once each way
  // A ring that crosses four times halves it, eight times quarters it.
  EXPECT_DOUBLE_EQ(ScoreRing(g, PathMatrix(g), Ring{{0, 1, 4, 5, 2, 3, 6, 7}}).gbps, 11.0);
  EXPECT_DOUBLE_EQ(ScoreRing(g, PathMatrix(g), Ring{{0, 4, 1, 5, 2, 6, 3, 7}}).gbps, 5.5);
}

TEST(RingSearch, EveryNvlinkBridgeIsARingEdge) {
  Graph g = LoadFixture("nvlink_bridge_4gpu");
  std::vector<Ring> rings = Search(g);
  ASSERT_EQ(rings.size(), 2u);  // the second runs the other way round
  for (const Ring& r : rings) {
    std::vector<PathType> types = EdgeTypes(g, r);
    EXPECT_EQ(std::count(types.begin(), types.end(), PathType::kNvl), 2) << "bridges 0-1, 2-3";
    EXPECT_DOUBLE_EQ(r.gbps, 25.206);
  }
  EXPECT_EQ(rings[0].gpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(rings[1].gpus, (std::vector<int>{0, 3, 2, 1}));
}

TEST(RingSearch, TwoGpusOnTwoSockets) {
  Graph g = LoadFixture("two_socket_2gpu");
  std::vector<Ring> rings = Search(g);
  ASSERT_EQ(rings.size(), 1u);
  EXPECT_EQ(rings[0].gpus, (std::vector<int>{0, 1}));
  EXPECT_DOUBLE_EQ(rings[0].gbps, 22.0);
}

TEST(RingSearch, SubsetAndSingleGpu) {
  Graph g = LoadFixture("pcie_8gpu");
  RingSearchOptions options;
  options.gpus = {1, 0};
  std::vector<Ring> rings = Search(g, options);
  ASSERT_FALSE(rings.empty());
  EXPECT_DOUBLE_EQ(rings[0].gbps, 25.206);
  options.gpus = {5};
  rings = Search(g, options);
  ASSERT_EQ(rings.size(), 1u);
  EXPECT_EQ(rings[0].gpus, (std::vector<int>{5}));
  EXPECT_DOUBLE_EQ(rings[0].gbps, 40.0);  // no link: the channel cap
}

TEST(RingSearch, BadOptions) {
  Graph g = LoadFixture("two_socket_2gpu");
  PathMatrix paths(g);
  RingSearchOptions options;
  options.gpus = {0, 0};
  EXPECT_FALSE(SearchRings(g, paths, options).ok());
  options.gpus = {2};
  EXPECT_FALSE(SearchRings(g, paths, options).ok());
  options.gpus = {};
  options.multi_host = true;  // no NIC in this machine
  EXPECT_FALSE(SearchRings(g, paths, options).ok());
}

TEST(RingSearch, MultiHostChainsUseTheNicNearestTheEnds) {
  Graph g = LoadFixture("dgx_h100");
  PathMatrix paths(g);
  RingSearchOptions options;
  options.multi_host = true;
  std::vector<Ring> rings = Search(g, options);
  ASSERT_EQ(rings.size(), 8u);  // one per NIC: 50 GB/s each, 40 per channel
  std::set<int> nics_in, nics_out;
  for (const Ring& r : rings) {
    ASSERT_TRUE(IsPermutation(r.gpus, 8));
    EXPECT_EQ(paths.NicGpu(r.nic_in, r.gpus.front()).type, PathType::kPix);
    EXPECT_EQ(paths.GpuNic(r.gpus.back(), r.nic_out).type, PathType::kPix);
    EXPECT_DOUBLE_EQ(r.gbps, 40.0);
    nics_in.insert(r.nic_in);
    nics_out.insert(r.nic_out);
  }
  EXPECT_EQ(nics_in.size(), 8u);
  EXPECT_EQ(nics_out.size(), 8u);

  Graph pcie = LoadFixture("pcie_8gpu");
  rings = Search(pcie, options);
  ASSERT_EQ(rings.size(), 1u);
  // In by NIC0 next to GPU0-1, once across the sockets, out by NIC1 next to GPU4-5.
  const Ring& r = rings[0];
  EXPECT_EQ(r.nic_in, 0);
  EXPECT_EQ(r.nic_out, 1);
  EXPECT_TRUE(r.gpus.front() == 0 || r.gpus.front() == 1);
  EXPECT_TRUE(r.gpus.back() == 4 || r.gpus.back() == 5);
  int sys = 0;
  PathMatrix pp(pcie);
  for (size_t i = 0; i + 1 < r.gpus.size(); ++i)
    sys += pp.Gpu(r.gpus[i], r.gpus[i + 1]).type == PathType::kSys;
  EXPECT_EQ(sys, 1);
  EXPECT_DOUBLE_EQ(r.gbps, 22.0);
}

// --- Heuristic against exhaustive -------------------------------------------

void ExpectSameAnswer(const Graph& g, RingSearchOptions options, const std::string& what) {
  options.method = SearchMethod::kExhaustive;
  std::vector<Ring> exact = Search(g, options);
  options.method = SearchMethod::kHeuristic;
  std::vector<Ring> heuristic = Search(g, options);
  ASSERT_FALSE(exact.empty()) << what;
  ASSERT_FALSE(heuristic.empty()) << what;
  EXPECT_NEAR(heuristic[0].gbps, exact[0].gbps, 1e-6) << what;
  PathMatrix paths(g);
  RingScore a = ScoreRing(g, paths, exact[0]), b = ScoreRing(g, paths, heuristic[0]);
  EXPECT_NEAR(b.gbps, a.gbps, 1e-6) << what;
  EXPECT_EQ(b.saturated, a.saturated) << what;
  EXPECT_EQ(b.cost, a.cost) << what;
  EXPECT_EQ(heuristic.size(), exact.size()) << what;
  EXPECT_NEAR(TotalGbps(heuristic), TotalGbps(exact), 1e-6) << what;
}

TEST(RingSearch, HeuristicMatchesExhaustiveOnFixtures) {
  for (const std::string& name : testing::FixtureNames()) {
    Graph g = LoadFixture(name);
    RingSearchOptions options;
    ExpectSameAnswer(g, options, name);
    if (g.num_nics() > 0) {
      options.multi_host = true;
      ExpectSameAnswer(g, options, name + " multi-host");
    }
  }
}

TEST(RingSearch, HeuristicMatchesExhaustiveOnGpuSubsets) {
  Graph g = LoadFixture("pcie_8gpu");
  for (int mask = 0; mask < 256; mask += 7) {
    RingSearchOptions options;
    for (int gpu = 0; gpu < 8; ++gpu) {
      if (mask & (1 << gpu)) options.gpus.push_back(gpu);
    }
    if (options.gpus.size() < 3) continue;
    ExpectSameAnswer(g, options, "pcie_8gpu subset " + std::to_string(mask));
  }
}

// A machine of `sockets` CPUs, each with `switches` PCIe switches on their own
// host bridges holding `per_switch` GPUs, NVLink pairs chosen by `rng`, and a
// NIC under each socket's first switch.
Graph SyntheticMachine(int sockets, int switches, int per_switch, std::mt19937* rng,
                       int nvlink_pairs, bool vary_speeds = true) {
  Graph g;
  std::vector<int> cpus, gpus;
  auto add = [&](NodeKind kind, int parent, double gbps) {
    Node n;
    n.kind = kind;
    n.parent = parent;
    n.name = NodeKindName(kind);
    if (kind == NodeKind::kGpu) n.ordinal = static_cast<int>(gpus.size());
    int i = g.AddNode(n);
    if (parent >= 0) g.AddLink({LinkKind::kPcie, i, parent, 1, 0, gbps});
    if (kind == NodeKind::kGpu) gpus.push_back(i);
    return i;
  };
  int nics = 0;
  std::uniform_int_distribution<int> speed(0, 2);
  const double speeds[] = {12.6, 25.206, 50.412};
  auto some_speed = [&] { return vary_speeds ? speeds[speed(*rng)] : 25.206; };
  for (int s = 0; s < sockets; ++s) {
    int cpu = add(NodeKind::kCpu, -1, 0);
    g.mutable_node(cpu).numa = s;
    g.mutable_node(cpu).package = s;
    for (int c : cpus) g.AddLink({LinkKind::kSmp, c, cpu, 1, 0, 16.0 + 6 * s});
    cpus.push_back(cpu);
    for (int w = 0; w < switches; ++w) {
      int hb = add(NodeKind::kHostBridge, cpu, kLocalGbps);
      int sw = add(NodeKind::kPciSwitch, hb, some_speed());
      for (int k = 0; k < per_switch; ++k) add(NodeKind::kGpu, sw, some_speed());
      if (w == 0) {
        int nic = add(NodeKind::kNic, sw, 25.206);
        g.mutable_node(nic).ordinal = nics++;
      }
    }
  }
  std::uniform_int_distribution<int> pick(0, static_cast<int>(gpus.size()) - 1);
  std::set<std::pair<int, int>> used;
  for (int i = 0; i < nvlink_pairs; ++i) {
    int a = pick(*rng), b = pick(*rng);
    if (a == b || used.count({std::min(a, b), std::max(a, b)})) continue;
    used.insert({std::min(a, b), std::max(a, b)});
    g.AddLink({LinkKind::kNvlink, gpus[a], gpus[b], 2, 3, NvlinkGbps(2, 3)});
  }
  EXPECT_TRUE(g.Finalize().ok());
  return g;
}

TEST(RingSearch, HeuristicMatchesExhaustiveOnRandomMachines) {
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 24; ++trial) {
    int sockets = 1 + trial % 2, switches = 1 + (trial / 2) % 2, per_switch = 2;
    if (sockets * switches * per_switch < 4) per_switch = 3;
    Graph g = SyntheticMachine(sockets, switches, per_switch, &rng, trial % 5);
    RingSearchOptions options;
    ExpectSameAnswer(g, options, "trial " + std::to_string(trial));
    options.multi_host = true;
    ExpectSameAnswer(g, options, "trial " + std::to_string(trial) + " multi-host");
  }
}

TEST(RingSearch, HeuristicBeyondEightGpus) {
  // 16 GPUs: 2 sockets x 4 switches x 2 GPUs, Gen4 everywhere; the best ring
  // crosses the sockets twice and keeps switch pairs together.
  std::mt19937 rng(7);
  Graph g = SyntheticMachine(2, 4, 2, &rng, 0, /*vary_speeds=*/false);
  ASSERT_EQ(g.num_gpus(), 16);
  std::vector<Ring> rings = Search(g);  // kAuto: heuristic above 8 GPUs
  ASSERT_FALSE(rings.empty());
  ASSERT_TRUE(IsPermutation(rings[0].gpus, 16));
  std::vector<PathType> types = EdgeTypes(g, rings[0]);
  EXPECT_EQ(std::count(types.begin(), types.end(), PathType::kSys), 2);
  EXPECT_EQ(std::count(types.begin(), types.end(), PathType::kPix), 8);
}

}  // namespace
}  // namespace ringo::topology
