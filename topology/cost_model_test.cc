// The alpha-beta model: the formula, its limits, and the predictions for the
// fixtures' rings.
#include "topology/cost_model.h"

#include <gtest/gtest.h>

#include "topology/test_fixtures.h"

namespace ringo::topology {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

TEST(CostModel, RingAllReduceFormula) {
  // 8 ranks, 256 MiB, alpha 1 us, beta 100 GB/s: 14 steps of 1 us + 32 MiB / 100 GB/s.
  Prediction p = PredictRingAllReduce(8, 256 * kMiB, 1.0, 100.0);
  double step_us = 1.0 + 256 * kMiB / 8 / (100.0 * 1e3);
  EXPECT_DOUBLE_EQ(p.time_us, 14 * step_us);
  EXPECT_DOUBLE_EQ(p.algbw_gbps, 256 * kMiB / (p.time_us * 1e3));
  EXPECT_DOUBLE_EQ(p.busbw_gbps, p.algbw_gbps * 14 / 8);
}

TEST(CostModel, Limits) {
  // Large messages: bus bandwidth tends to beta. Small ones: 2(N-1) alphas.
  Prediction big = PredictRingAllReduce(4, 64.0 * 1024 * kMiB, 2.0, 50.0);
  EXPECT_NEAR(big.busbw_gbps, 50.0, 0.01);
  Prediction small = PredictRingAllReduce(4, 8, 2.0, 50.0);
  EXPECT_NEAR(small.time_us, 12.0, 1e-3);
  Prediction one = PredictRingAllReduce(1, 1e6, 2.0, 50.0);
  EXPECT_EQ(one.time_us, 0.0);
  EXPECT_EQ(one.busbw_gbps, 0.0);
}

TEST(CostModel, DoublingAllReduceFormulaAndTheCrossover) {
  // 8 ranks: 3 exchanges of the whole message. 6 ranks: 2 exchanges, and
  // the 2 of the extra ranks' inputs in and results out.
  Prediction p8 = PredictDoublingAllReduce(8, 8, 5.0, 12.5);
  EXPECT_DOUBLE_EQ(p8.time_us, 3 * (5.0 + 8 / 12.5e3));
  EXPECT_DOUBLE_EQ(PredictDoublingAllReduce(6, 8, 5.0, 12.5).time_us, 4 * (5.0 + 8 / 12.5e3));
  EXPECT_DOUBLE_EQ(PredictDoublingAllReduce(2, 1e6, 1.0, 10.0).time_us, 1.0 + 1e6 / 10e3);
  EXPECT_EQ(PredictDoublingAllReduce(1, 8, 5.0, 12.5).time_us, 0.0);
  // 8 B over 16 ranks: 4 alphas against the ring's 30 (the 8-host case: 3 against 14).
  EXPECT_NEAR(PredictRingAllReduce(16, 8, 5.0, 12.5).time_us / PredictDoublingAllReduce(16, 8, 5.0, 12.5).time_us,
              30.0 / 4.0, 0.01);
  // Large messages: the ring moves 2(N-1)/N S per rank, doubling log2(N) S.
  EXPECT_LT(PredictRingAllReduce(8, 256 * kMiB, 5.0, 12.5).time_us,
            PredictDoublingAllReduce(8, 256 * kMiB, 5.0, 12.5).time_us);
  // 8 ranks: doubling is faster while 11 alpha > 1.25 S / beta, below 8.8 alpha beta.
  const double crossover = 8.8 * 5.0 * 12.5e3;
  EXPECT_LT(PredictDoublingAllReduce(8, 0.9 * crossover, 5.0, 12.5).time_us,
            PredictRingAllReduce(8, 0.9 * crossover, 5.0, 12.5).time_us);
  EXPECT_GT(PredictDoublingAllReduce(8, 1.1 * crossover, 5.0, 12.5).time_us,
            PredictRingAllReduce(8, 1.1 * crossover, 5.0, 12.5).time_us);
}

TEST(CostModel, WireAllReduceAndWhereItYieldsToDoubling) {
  // 2(N-1) steps of a shard of S/N in the wire's bytes.
  EXPECT_DOUBLE_EQ(PredictWireAllReduce(4, 1e6, 5.0, 1.25, 0.5).time_us, 6 * (5.0 + 0.5 * 1e6 / (4 * 1.25e3)));
  EXPECT_EQ(PredictWireAllReduce(1, 8, 5.0, 1.25, 0.5).time_us, 0.0);
  // At 1.25 GB/s and 5 us, bf16 (half the bytes): 4 ranks yield below 20 KB
  // (2 alpha + 2S/beta < 6 alpha + 0.75 S/beta), 2 ranks below 12.5 KB.
  EXPECT_TRUE(WireYieldsToDoubling(4, 19e3, 0.5));
  EXPECT_FALSE(WireYieldsToDoubling(4, 21e3, 0.5));
  EXPECT_TRUE(WireYieldsToDoubling(2, 12e3, 0.5));
  EXPECT_FALSE(WireYieldsToDoubling(2, 13e3, 0.5));
  // More ranks, more of the wire's steps: a larger crossover; 8-bit (about a
  // quarter of the bytes) a smaller one than bf16.
  EXPECT_TRUE(WireYieldsToDoubling(16, 50e3, 0.5));
  EXPECT_FALSE(WireYieldsToDoubling(4, 19e3, 0.26));
  // Never past recursive doubling's own limit, never for one rank.
  EXPECT_FALSE(WireYieldsToDoubling(64, kDoublingMaxBytes + 1, 0.5));
  EXPECT_FALSE(WireYieldsToDoubling(1, 8, 0.5));
}

TEST(CostModel, PredictedBandwidthOfFixtures) {
  CostModel model = CostModel::Default();
  struct Case {
    const char* fixture;
    double beta;
    double alpha;
  } cases[] = {
      {"dgx_h100", 360.0, model.alpha_us[static_cast<int>(PathType::kNvl)]},
      {"dgx_a100", 240.0, model.alpha_us[static_cast<int>(PathType::kNvl)]},
      {"pcie_8gpu", 22.0, model.alpha_us[static_cast<int>(PathType::kSys)]},
      {"nvlink_bridge_4gpu", 50.412, model.alpha_us[static_cast<int>(PathType::kPhb)]},
      {"two_socket_2gpu", 22.0, model.alpha_us[static_cast<int>(PathType::kSys)]},
  };
  for (const Case& c : cases) {
    Graph g = testing::LoadFixture(c.fixture);
    PathMatrix paths(g);
    auto rings = SearchRings(g, paths, {});
    ASSERT_TRUE(rings.ok());
    Prediction p = PredictAllReduce(model, paths, *rings, 256 * kMiB);
    EXPECT_NEAR(p.beta_gbps, c.beta, 1e-9) << c.fixture;
    EXPECT_DOUBLE_EQ(p.alpha_us, c.alpha) << c.fixture;
    EXPECT_EQ(p.nranks, g.num_gpus()) << c.fixture;
    // 256 MiB is bandwidth-bound: busbw within 2% of beta.
    EXPECT_GT(p.busbw_gbps, 0.98 * c.beta) << c.fixture;
    EXPECT_LT(p.busbw_gbps, c.beta) << c.fixture;
  }
}

TEST(CostModel, PlanPrediction) {
  // Host-memory ranks on two NUMA nodes: the SYS alpha, the SYS default beta.
  Graph g = testing::LoadFixture("pcie_8gpu");
  std::vector<RankInfo> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back({0, -1, r / 2});
  auto plan = PlanRings(&g, ranks, TransportPolicy{});
  ASSERT_TRUE(plan.ok());
  CostModel model = CostModel::Default();
  Prediction p = PredictAllReduce(model, *plan, 64 * kMiB);
  EXPECT_EQ(p.nranks, 4);
  EXPECT_DOUBLE_EQ(p.alpha_us, model.alpha_us[static_cast<int>(PathType::kSys)]);
  EXPECT_DOUBLE_EQ(p.beta_gbps, model.beta_gbps[static_cast<int>(PathType::kSys)]);
  EXPECT_GT(p.time_us, 0);
}

// GPU ranks on two hosts: each channel crosses the network, so the staging
// through pinned host memory adds its alpha to the network's and caps each
// channel's bandwidth; without it (host ranks) neither applies.
TEST(CostModel, GpuStagingAcrossHosts) {
  Graph g = testing::LoadFixture("dgx_h100");
  std::vector<RankInfo> ranks;
  for (int h = 0; h < 2; ++h) {
    for (int gpu = 0; gpu < g.num_gpus(); ++gpu) ranks.push_back({h, gpu, -1});
  }
  auto plan = PlanRings(&g, ranks, TransportPolicy{});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const CostModel model = CostModel::Default();
  const Prediction direct = PredictAllReduce(model, *plan, 1 << 30, false);
  const Prediction staged = PredictAllReduce(model, *plan, 1 << 30, true);
  EXPECT_DOUBLE_EQ(staged.alpha_us, direct.alpha_us + model.staging_alpha_us);
  EXPECT_LE(staged.beta_gbps, model.staging_gbps * plan->size() + 1e-9);
  EXPECT_LT(staged.busbw_gbps, direct.busbw_gbps);
}

}  // namespace
}  // namespace ringo::topology
