// The communicator's ring plan: order of ranks, transport per edge, the
// RINGO_P2P_LEVEL / RINGO_P2P_DISABLE / RINGO_SHM_DISABLE knobs.
#include "topology/ring_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "base/config.h"
#include "topology/test_fixtures.h"

namespace ringo::topology {
namespace {

using testing::LoadFixture;

std::vector<RingPlan> Plan(const Graph* g, const std::vector<RankInfo>& ranks,
                           const TransportPolicy& policy = {}) {
  auto plan = PlanRings(g, ranks, policy);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan.ok() ? plan.value() : std::vector<RingPlan>{};
}

int Count(const RingPlan& p, TransportKind kind) {
  return static_cast<int>(std::count_if(p.edges.begin(), p.edges.end(),
                                        [&](const RingEdge& e) { return e.transport == kind; }));
}

int CountPath(const RingPlan& p, PathType type) {
  return static_cast<int>(std::count_if(p.edges.begin(), p.edges.end(),
                                        [&](const RingEdge& e) { return e.path == type; }));
}

bool IsPermutation(std::vector<int> order, int n) {
  std::sort(order.begin(), order.end());
  for (int i = 0; i < n; ++i) {
    if (i >= static_cast<int>(order.size()) || order[i] != i) return false;
  }
  return static_cast<int>(order.size()) == n;
}

// Sets or clears a variable and reloads the configuration; restores on exit.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    setenv(name, value, 1);
    base::ReloadConfigForTesting();
  }
  ~ScopedEnv() {
    unsetenv(name_);
    base::ReloadConfigForTesting();
  }

 private:
  const char* name_;
};

TEST(RingPlan, HostMemoryRanksGroupBySocketAndNuma) {
  Graph g = LoadFixture("pcie_8gpu");  // NUMA 0 on package 0, NUMA 1 on package 1
  std::vector<RankInfo> ranks;
  for (int r = 0; r < 8; ++r) ranks.push_back({0, -1, r % 2});
  std::vector<RingPlan> plan = Plan(&g, ranks);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].order, (std::vector<int>{0, 2, 4, 6, 1, 3, 5, 7}));
  ASSERT_EQ(plan[0].edges.size(), 8u);
  EXPECT_EQ(Count(plan[0], TransportKind::kShm), 8);
  EXPECT_EQ(CountPath(plan[0], PathType::kSys), 2);  // into socket 1 and back
  EXPECT_EQ(plan[0].edges[0].from, 0);
  EXPECT_EQ(plan[0].edges[0].to, 2);
  EXPECT_EQ(plan[0].edges[7].to, 0);
  // Without a graph NUMA nodes still group.
  plan = Plan(nullptr, ranks);
  EXPECT_EQ(plan[0].order, (std::vector<int>{0, 2, 4, 6, 1, 3, 5, 7}));
}

TEST(RingPlan, EachHostIsOneStretchOfTheRing) {
  std::vector<RankInfo> ranks;
  for (int r = 0; r < 9; ++r) ranks.push_back({(r % 3) * 10, -1, 0});  // hosts 0, 10, 20
  std::vector<RingPlan> plan = Plan(nullptr, ranks);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].order, (std::vector<int>{0, 3, 6, 1, 4, 7, 2, 5, 8}));
  EXPECT_EQ(Count(plan[0], TransportKind::kNet), 3);
  EXPECT_EQ(Count(plan[0], TransportKind::kShm), 6);
  EXPECT_EQ(CountPath(plan[0], PathType::kNet), 3);
}

TEST(RingPlan, NvswitchGpusUseP2p) {
  Graph g = LoadFixture("dgx_h100");
  std::vector<RankInfo> ranks;
  for (int r = 0; r < 8; ++r) ranks.push_back({0, 7 - r, 0});  // rank r on GPU 7-r
  std::vector<RingPlan> plan = Plan(&g, ranks);
  ASSERT_EQ(plan.size(), 9u);
  for (const RingPlan& p : plan) {
    EXPECT_TRUE(IsPermutation(p.order, 8));
    EXPECT_EQ(Count(p, TransportKind::kP2p), 8);
    EXPECT_EQ(CountPath(p, PathType::kNvl), 8);
    EXPECT_DOUBLE_EQ(p.gbps, 40.0);
  }
}

TEST(RingPlan, PcieTransportsFollowTheP2pLevel) {
  Graph g = LoadFixture("pcie_8gpu");  // Intel: default level PXB
  EXPECT_EQ(DefaultP2pLevel(&g), PathType::kPxb);
  std::vector<RankInfo> ranks;
  for (int r = 0; r < 8; ++r) ranks.push_back({0, r, -1});
  TransportPolicy policy;
  policy.p2p_level = PathType::kPxb;
  std::vector<RingPlan> plan = Plan(&g, ranks, policy);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(CountPath(plan[0], PathType::kPix), 4);
  EXPECT_EQ(CountPath(plan[0], PathType::kSys), 2);
  EXPECT_EQ(Count(plan[0], TransportKind::kP2p), 4);  // the PIX edges
  EXPECT_EQ(Count(plan[0], TransportKind::kShm), 4);  // NODE and SYS
  for (const RingEdge& e : plan[0].edges) {
    EXPECT_EQ(e.transport == TransportKind::kP2p, e.path == PathType::kPix);
  }
  policy.p2p_level = PathType::kSys;
  EXPECT_EQ(Count(Plan(&g, ranks, policy)[0], TransportKind::kP2p), 8);
  policy.p2p_disable = true;
  EXPECT_EQ(Count(Plan(&g, ranks, policy)[0], TransportKind::kShm), 8);
  policy.shm_disable = true;
  EXPECT_EQ(Count(Plan(&g, ranks, policy)[0], TransportKind::kNet), 8);
}

TEST(RingPlan, NvlinkBridgesAreP2pEdges) {
  Graph g = LoadFixture("nvlink_bridge_4gpu");  // AMD: default level SYS
  EXPECT_EQ(DefaultP2pLevel(&g), PathType::kSys);
  std::vector<RankInfo> ranks = {{0, 2, -1}, {0, 0, -1}, {0, 3, -1}, {0, 1, -1}};
  std::vector<RingPlan> plan = Plan(&g, ranks, {PathType::kPxb, false, false});
  ASSERT_EQ(plan.size(), 2u);
  // Ring GPU 0 1 2 3 is ranks 1 3 0 2.
  EXPECT_EQ(plan[0].order, (std::vector<int>{1, 3, 0, 2}));
  EXPECT_EQ(Count(plan[0], TransportKind::kP2p), 2);  // the bridges
  EXPECT_EQ(Count(plan[0], TransportKind::kShm), 2);  // PHB above PXB
  EXPECT_DOUBLE_EQ(plan[0].gbps, 25.206);
}

TEST(RingPlan, SeveralRanksOnOneGpuAreNeighbours) {
  Graph g = LoadFixture("two_socket_2gpu");
  std::vector<RankInfo> ranks = {{0, 1, -1}, {0, 0, -1}, {0, 1, -1}, {0, 0, -1}};
  std::vector<RingPlan> plan = Plan(&g, ranks, {PathType::kPxb, false, false});
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].order, (std::vector<int>{1, 3, 0, 2}));
  ASSERT_EQ(plan[0].edges.size(), 4u);
  EXPECT_EQ(plan[0].edges[0].path, PathType::kLoc);  // rank 1 -> 3, both GPU 0
  EXPECT_EQ(plan[0].edges[0].transport, TransportKind::kP2p);
  EXPECT_EQ(plan[0].edges[1].path, PathType::kSys);
  EXPECT_EQ(plan[0].edges[1].transport, TransportKind::kShm);
  // P2P disabled: even one GPU goes through shared memory.
  plan = Plan(&g, ranks, {PathType::kSys, true, false});
  EXPECT_EQ(Count(plan[0], TransportKind::kShm), 4);
}

TEST(RingPlan, GpuRanksAcrossHostsEnterAndLeaveByNics) {
  Graph g = LoadFixture("dgx_h100");
  PathMatrix paths(g);
  std::vector<RankInfo> ranks;
  for (int h = 0; h < 2; ++h) {
    for (int gpu = 0; gpu < 8; ++gpu) ranks.push_back({h, gpu, -1});
  }
  std::vector<RingPlan> plan = Plan(&g, ranks);
  ASSERT_EQ(plan.size(), 8u);
  for (const RingPlan& p : plan) {
    ASSERT_TRUE(IsPermutation(p.order, 16));
    EXPECT_EQ(Count(p, TransportKind::kNet), 2);
    EXPECT_EQ(Count(p, TransportKind::kP2p), 14);
    // Host 0's ranks first, then host 1's, in the same order.
    for (int i = 0; i < 8; ++i) {
      EXPECT_LT(p.order[i], 8);
      EXPECT_EQ(p.order[i + 8], p.order[i] + 8);
    }
    EXPECT_DOUBLE_EQ(p.gbps, 40.0);
  }
  // Channels enter by different GPUs (and so NICs).
  std::vector<int> firsts;
  for (const RingPlan& p : plan) firsts.push_back(p.order[0]);
  std::sort(firsts.begin(), firsts.end());
  EXPECT_EQ(std::unique(firsts.begin(), firsts.end()), firsts.end());
}

TEST(RingPlan, SingleRankAndErrors) {
  std::vector<RingPlan> plan = Plan(nullptr, {{0, -1, 0}});
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].order, std::vector<int>{0});
  EXPECT_TRUE(plan[0].edges.empty());
  Graph g = LoadFixture("two_socket_2gpu");
  EXPECT_FALSE(PlanRings(&g, {}, TransportPolicy{}).ok());
  EXPECT_FALSE(PlanRings(&g, {{0, 2, -1}}, TransportPolicy{}).ok());       // no GPU 2
  EXPECT_FALSE(PlanRings(nullptr, {{0, 0, -1}}, TransportPolicy{}).ok());  // GPU without graph
  std::map<int, const Graph*> graphs = {{0, &g}};                          // host 1 has no graph
  EXPECT_FALSE(PlanRings(graphs, {{0, 0, -1}, {1, 0, -1}}, TransportPolicy{}).ok());
}

TEST(RingPlan, PolicyFromConfig) {
  Graph intel = LoadFixture("pcie_8gpu");
  Graph amd = LoadFixture("nvlink_bridge_4gpu");
  auto p = PolicyFromConfig(base::GetConfig(), &intel);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->p2p_level, PathType::kPxb);
  EXPECT_FALSE(p->p2p_disable);
  EXPECT_FALSE(p->shm_disable);
  EXPECT_EQ(PolicyFromConfig(base::GetConfig(), &amd)->p2p_level, PathType::kSys);
  EXPECT_EQ(PolicyFromConfig(base::GetConfig(), nullptr)->p2p_level, PathType::kPxb);
  {
    ScopedEnv level("RINGO_P2P_LEVEL", "node");
    EXPECT_EQ(PolicyFromConfig(base::GetConfig(), &intel)->p2p_level, PathType::kNode);
  }
  {
    ScopedEnv level("RINGO_P2P_LEVEL", "LOC");
    EXPECT_FALSE(PolicyFromConfig(base::GetConfig(), &intel).ok());
  }
  {
    ScopedEnv level("RINGO_P2P_LEVEL", "3");
    EXPECT_FALSE(PolicyFromConfig(base::GetConfig(), &intel).ok());
  }
  {
    ScopedEnv p2p("RINGO_P2P_DISABLE", "1");
    ScopedEnv shm("RINGO_SHM_DISABLE", "1");
    auto q = PolicyFromConfig(base::GetConfig(), &intel);
    ASSERT_TRUE(q.ok());
    EXPECT_TRUE(q->p2p_disable);
    EXPECT_TRUE(q->shm_disable);
  }
}

}  // namespace
}  // namespace ringo::topology
