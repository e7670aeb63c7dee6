// The planner: FIFO geometry at init (channels, slot size, spin and yield
// counts, the one-shot board) and per-collective plans (ring or one-shot,
// channels used, chunk size), swept over rank counts, cores, configurations,
// collectives, datatypes and counts.
#include "collectives/plan/planner.h"

#include <cstdint>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/device/dtype.h"
#include "gtest/gtest.h"
#include "kernels/coll_args.h"

namespace ringo::collectives {
namespace {

using base::Config;
using base::DataType;
using kernels::CollArgs;
using kernels::Coll;

const Coll kColls[] = {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather, Coll::kBroadcast, Coll::kReduce};

Config DefaultConfig() { return Config(); }

TEST(ChooseGeometryTest, Defaults) {
  const Config c = DefaultConfig();
  const CommGeometry g = ChooseGeometry(SettingsFrom(c), 4, 4, 16);
  EXPECT_EQ(g.slot_bytes, 512 * 1024);
  EXPECT_FALSE(g.fixed_channels);
  EXPECT_EQ(g.nchannels, 4);  // 16 cores / 4 local ranks, at most 4
  EXPECT_GT(g.spin_count, 0);
  EXPECT_EQ(g.slot_bytes % 64, 0);
  EXPECT_EQ(g.algorithm, Algorithm::kAuto);
  EXPECT_GT(g.board_bytes, 0) << "all ranks on this host: a one-shot board";
  for (Coll coll : kColls) {
    EXPECT_GT(g.oneshot_auto_bytes[static_cast<int>(coll)], 0);
    EXPECT_GT(g.direct_auto_bytes[static_cast<int>(coll)], g.oneshot_auto_bytes[static_cast<int>(coll)]);
  }
}

TEST(ChooseGeometryTest, BoardOnlyWhenEveryRankIsLocal) {
  const Config c = DefaultConfig();
  EXPECT_GT(ChooseGeometry(SettingsFrom(c), 4, 4, 8).board_bytes, 0);
  EXPECT_EQ(ChooseGeometry(SettingsFrom(c), 8, 4, 8).board_bytes, 0) << "ranks on several hosts";
  EXPECT_EQ(ChooseGeometry(SettingsFrom(c), 1, 1, 8).board_bytes, 0) << "one rank has nobody to exchange with";
  // Thresholds per collective, one core per rank or more ranks than cores:
  // the one-shot below the direct path, both or neither where there is a board.
  for (const CommGeometry& g : {ChooseGeometry(SettingsFrom(c), 2, 2, 8), ChooseGeometry(SettingsFrom(c), 8, 8, 2)}) {
    for (Coll coll : kColls) {
      const int64_t oneshot = g.oneshot_auto_bytes[static_cast<int>(coll)];
      const int64_t direct = g.direct_auto_bytes[static_cast<int>(coll)];
      EXPECT_GE(oneshot, 0);
      EXPECT_GT(direct, oneshot) << static_cast<int>(coll);
    }
  }
  const CommGeometry hosts = ChooseGeometry(SettingsFrom(c), 8, 4, 8);
  for (Coll coll : kColls) {
    EXPECT_EQ(hosts.oneshot_auto_bytes[static_cast<int>(coll)], 0);
    EXPECT_EQ(hosts.direct_auto_bytes[static_cast<int>(coll)], 0);
  }
}

TEST(ChooseGeometryTest, AlgorithmFromConfig) {
  EXPECT_EQ(ParseAlgorithm(""), Algorithm::kAuto);
  EXPECT_EQ(ParseAlgorithm("ring"), Algorithm::kRing);
  EXPECT_EQ(ParseAlgorithm("oneshot"), Algorithm::kOneShot);
  EXPECT_EQ(ParseAlgorithm("direct"), Algorithm::kDirect);
  EXPECT_EQ(ParseAlgorithm("tree"), Algorithm::kAuto);
  Config c = DefaultConfig();
  c.algo = "ring";
  EXPECT_EQ(ChooseGeometry(SettingsFrom(c), 4, 4, 2).algorithm, Algorithm::kRing);
  c.algo = "oneshot";
  EXPECT_EQ(ChooseGeometry(SettingsFrom(c), 4, 4, 2).algorithm, Algorithm::kOneShot);
}

// Every setting a rank of this version sends passes the check of the
// records at init (RINGO_ALGO=doubling was once refused there), and values
// beyond them do not.
TEST(SharedSettingsTest, EveryValueThisVersionSendsIsValid) {
  Config c = DefaultConfig();
  for (const char* algo : {"", "ring", "oneshot", "direct", "doubling"}) {
    c.algo = algo;
    for (bool balance : {false, true}) {
      c.net_balance = balance;
      EXPECT_TRUE(ValidateShared({SettingsFrom(c).shared}).ok()) << "RINGO_ALGO=" << algo;
    }
  }
  SharedSettings bad = SettingsFrom(DefaultConfig()).shared;
  bad.algorithm = static_cast<Algorithm>(static_cast<int32_t>(Algorithm::kDoubling) + 1);
  EXPECT_FALSE(ValidateShared({bad}).ok());
  bad = SettingsFrom(DefaultConfig()).shared;
  bad.net_balance = 2;
  EXPECT_FALSE(ValidateShared({bad}).ok());
}

TEST(ChooseGeometryTest, ChannelsForNetDevices) {
  EXPECT_EQ(ChannelsForNetDevices(2, 1), 2);   // the cores' count stands
  EXPECT_EQ(ChannelsForNetDevices(1, 2), 2);   // a channel per device
  EXPECT_EQ(ChannelsForNetDevices(4, 8), 8);
  EXPECT_EQ(ChannelsForNetDevices(1, 40), 16);  // at most 16
  EXPECT_EQ(ChannelsForNetDevices(3, 0), 3);
}

TEST(ChooseGeometryTest, ChannelsFollowCoresPerRank) {
  const Config c = DefaultConfig();
  EXPECT_EQ(ChooseGeometry(SettingsFrom(c), 2, 2, 2).nchannels, 1);   // CI: 2 ranks on 2 cores
  EXPECT_EQ(ChooseGeometry(SettingsFrom(c), 8, 8, 2).nchannels, 1);   // more ranks than cores
  EXPECT_EQ(ChooseGeometry(SettingsFrom(c), 2, 2, 4).nchannels, 2);
  EXPECT_EQ(ChooseGeometry(SettingsFrom(c), 2, 2, 6).nchannels, 3);
  EXPECT_EQ(ChooseGeometry(SettingsFrom(c), 2, 2, 128).nchannels, 4);  // capped
  EXPECT_EQ(ChooseGeometry(SettingsFrom(c), 1, 1, 64).nchannels, 1);   // one rank: nothing to run side by side
}

TEST(ChooseGeometryTest, SpinCountIsSmallerWhenRanksOutnumberCores) {
  const Config c = DefaultConfig();
  for (int cores = 1; cores <= 16; ++cores) {
    for (int local = 1; local <= 32; ++local) {
      const CommGeometry g = ChooseGeometry(SettingsFrom(c), local, local, cores);
      EXPECT_GE(g.spin_count, 0);
      if (local > cores) {
        const CommGeometry roomy = ChooseGeometry(SettingsFrom(c), local, local, local);
        EXPECT_LT(g.spin_count, roomy.spin_count) << local << " ranks on " << cores << " cores";
      }
    }
  }
  // 8 ranks on the 2 cores of CI must give the core away soon instead of
  // burning the other ranks' cores: fewer pause-spins, yields instead.
  EXPECT_LT(ChooseGeometry(SettingsFrom(c), 8, 8, 2).spin_count, ChooseGeometry(SettingsFrom(c), 2, 2, 2).spin_count);
  EXPECT_LE(ChooseGeometry(SettingsFrom(c), 8, 8, 2).spin_count, 1000);
  EXPECT_GT(ChooseGeometry(SettingsFrom(c), 8, 8, 2).yield_count, 0);
  EXPECT_GE(ChooseGeometry(SettingsFrom(c), 2, 2, 2).yield_count, 0);
  // Crowded board waits exactly when ranks outnumber cores.
  EXPECT_TRUE(ChooseGeometry(SettingsFrom(c), 4, 4, 2).crowded);
  EXPECT_TRUE(ChooseGeometry(SettingsFrom(c), 3, 3, 2).crowded);
  EXPECT_FALSE(ChooseGeometry(SettingsFrom(c), 2, 2, 2).crowded);
  EXPECT_FALSE(ChooseGeometry(SettingsFrom(c), 4, 4, 8).crowded);
}

TEST(ChooseGeometryTest, ConfigurationIsHonoured) {
  Config c = DefaultConfig();
  c.slot_bytes = 4096;
  EXPECT_EQ(ChooseGeometry(SettingsFrom(c), 4, 4, 2).slot_bytes, 4096);
  c.slot_bytes = 64;
  EXPECT_EQ(ChooseGeometry(SettingsFrom(c), 4, 4, 2).slot_bytes, 64);

  Config n = DefaultConfig();
  n.nchannels = 3;
  CommGeometry g = ChooseGeometry(SettingsFrom(n), 4, 4, 2);
  EXPECT_EQ(g.nchannels, 3);  // even with fewer cores than that
  EXPECT_TRUE(g.fixed_channels);
  n.nchannels = 1000;
  EXPECT_EQ(ChooseGeometry(SettingsFrom(n), 4, 4, 2).nchannels, 64);  // bounded
  n.nchannels = 3;
  EXPECT_EQ(ChooseGeometry(SettingsFrom(n), 1, 1, 2).nchannels, 1);  // one rank

  Config s = DefaultConfig();
  s.spin_count = 0;
  EXPECT_EQ(ChooseGeometry(SettingsFrom(s), 4, 4, 2).spin_count, 0);
  s.spin_count = 777;
  EXPECT_EQ(ChooseGeometry(SettingsFrom(s), 8, 8, 2).spin_count, 777);  // even when ranks outnumber cores
  s.spin_count = int64_t{1} << 40;
  EXPECT_EQ(ChooseGeometry(SettingsFrom(s), 2, 2, 2).spin_count, 1 << 30);  // fits an int

  Config y = DefaultConfig();
  y.yield_count = 0;
  EXPECT_EQ(ChooseGeometry(SettingsFrom(y), 8, 8, 2).yield_count, 0);
  y.yield_count = 123;
  EXPECT_EQ(ChooseGeometry(SettingsFrom(y), 2, 2, 8).yield_count, 123);
  y.yield_count = int64_t{1} << 40;
  EXPECT_EQ(ChooseGeometry(SettingsFrom(y), 2, 2, 8).yield_count, 1 << 30);

  Config w = DefaultConfig();
  w.crowded_wait = 0;
  EXPECT_FALSE(ChooseGeometry(SettingsFrom(w), 8, 8, 2).crowded);
  w.crowded_wait = 1;
  EXPECT_TRUE(ChooseGeometry(SettingsFrom(w), 2, 2, 8).crowded);
}

TEST(ChooseGeometryTest, DegenerateCoreAndRankCounts) {
  const Config c = DefaultConfig();
  for (int cores : {0, 1}) {
    for (int local : {0, 1, 3}) {
      const CommGeometry g = ChooseGeometry(SettingsFrom(c), 3, local, cores);
      EXPECT_GE(g.nchannels, 1);
      EXPECT_GT(g.slot_bytes, 0);
      EXPECT_GE(g.spin_count, 0);
      EXPECT_GE(g.yield_count, 0);
    }
  }
}

TEST(ChooseGeometryTest, PureFunctionOfItsInputs) {
  Config c = DefaultConfig();
  c.slot_bytes = 1024;
  const CommGeometry a = ChooseGeometry(SettingsFrom(c), 5, 5, 3);
  const CommGeometry b = ChooseGeometry(SettingsFrom(c), 5, 5, 3);
  EXPECT_EQ(a.nchannels, b.nchannels);
  EXPECT_EQ(a.slot_bytes, b.slot_bytes);
  EXPECT_EQ(a.spin_count, b.spin_count);
  EXPECT_EQ(a.fixed_channels, b.fixed_channels);
  EXPECT_EQ(a.yield_count, b.yield_count);
  EXPECT_EQ(a.board_bytes, b.board_bytes);
  EXPECT_EQ(a.oneshot_auto_bytes, b.oneshot_auto_bytes);
}

CollArgs Args(Coll coll, DataType dtype, int64_t count) {
  CollArgs a;
  a.coll = coll;
  a.dtype = dtype;
  a.count = count;
  return a;
}

// Bytes each rank contributes (what the one-shot board must hold).
int64_t PostBytes(const CollArgs& a, int nranks) {
  const int64_t bytes = a.count * static_cast<int64_t>(base::DataTypeSize(a.dtype));
  return a.coll == Coll::kReduceScatter ? bytes * nranks : bytes;
}

// nccl-tests' message size, which the thresholds compare.
int64_t MessageBytes(const CollArgs& a, int nranks) {
  const int64_t bytes = a.count * static_cast<int64_t>(base::DataTypeSize(a.dtype));
  return a.coll == Coll::kReduceScatter || a.coll == Coll::kAllGather ? bytes * nranks : bytes;
}

// A ring plan: channels within [1, geometry], all of them when fixed; a chunk
// that fits a slot and keeps 64-byte chunk starts whole elements.
::testing::AssertionResult ValidRingPlan(const CollPlan& p, const CommGeometry& g, DataType t) {
  // A direct plan carries the ring plan it falls back to.
  if (p.algorithm != Algorithm::kRing && p.algorithm != Algorithm::kDirect) {
    return ::testing::AssertionFailure() << "not a ring plan";
  }
  if (p.nchannels < 1 || p.nchannels > g.nchannels) {
    return ::testing::AssertionFailure() << p.nchannels << " channels, geometry " << g.nchannels;
  }
  if (g.fixed_channels && p.nchannels != g.nchannels) {
    return ::testing::AssertionFailure() << "fixed " << g.nchannels << " channels, plan " << p.nchannels;
  }
  if (p.slice_bytes <= 0 || p.slice_bytes > g.slot_bytes || p.slice_bytes % 64 != 0 ||
      p.slice_bytes % static_cast<int64_t>(base::DataTypeSize(t)) != 0) {
    return ::testing::AssertionFailure() << "slice " << p.slice_bytes << " bytes, slot " << g.slot_bytes;
  }
  return ::testing::AssertionSuccess();
}

CommGeometry Geometry(int nch, int64_t slot, bool fixed, Algorithm algo, int64_t board, int64_t oneshot) {
  CommGeometry g;
  g.nchannels = nch;
  g.slot_bytes = slot;
  g.spin_count = 10;
  g.fixed_channels = fixed;
  g.algorithm = algo;
  g.board_bytes = board;
  g.oneshot_auto_bytes.fill(oneshot);
  return g;
}

// Every collective x datatype x count x geometry x algorithm setting: ring
// plans are valid; one-shot plans only where the board exists, the post fits
// it, and (unforced) the post is under the automatic threshold.
TEST(PlanCollectiveTest, PlansStayWithinTheGeometry) {
  const int64_t counts[] = {0, 1, 7, 64, 1000, 4096, 16384, 65536, 1 << 20, 3 << 20, int64_t{1} << 28};
  std::vector<CommGeometry> geometries;
  for (int64_t slot : {64, 4096, 128 * 1024}) {
    for (int nch : {1, 2, 3, 4}) {
      for (bool fixed : {false, true}) {
        for (Algorithm algo : {Algorithm::kAuto, Algorithm::kRing, Algorithm::kOneShot}) {
          for (int64_t board : {int64_t{0}, int64_t{64 * 1024}}) {
            geometries.push_back(Geometry(nch, slot, fixed, algo, board, 4096));
          }
        }
      }
    }
  }
  int oneshots = 0, rings = 0;
  for (const CommGeometry& g : geometries) {
    for (int nranks : {1, 2, 3, 8}) {
      for (Coll coll : kColls) {
        for (int t = 0; t < base::kNumDataTypes; ++t) {
          for (int64_t count : counts) {
            const DataType dt = static_cast<DataType>(t);
            const CollArgs args = Args(coll, dt, count);
            const CollPlan p = PlanCollective(args, nranks, g);
            const int64_t post = PostBytes(args, nranks);
            const bool may_oneshot = g.board_bytes > 0 && g.algorithm != Algorithm::kRing && post <= g.board_bytes;
            const bool must_oneshot =
                may_oneshot && (g.algorithm == Algorithm::kOneShot ||
                                MessageBytes(args, nranks) <= g.oneshot_auto_bytes[static_cast<int>(coll)]);
            if (p.algorithm == Algorithm::kOneShot) {
              ++oneshots;
              ASSERT_TRUE(may_oneshot) << "post " << post << " board " << g.board_bytes;
              ASSERT_EQ(p.nchannels, 1);
            } else {
              ++rings;
              ASSERT_FALSE(must_oneshot) << "post " << post << " should go one-shot";
              ASSERT_TRUE(ValidRingPlan(p, g, dt)) << "count " << count << " " << base::DataTypeName(dt);
            }
          }
        }
      }
    }
  }
  EXPECT_GT(oneshots, 0);
  EXPECT_GT(rings, 0);
}

TEST(PlanCollectiveTest, RingForcedNeverGoesOneShot) {
  const CommGeometry g = Geometry(2, 4096, false, Algorithm::kRing, 64 * 1024, 4096);
  for (Coll coll : kColls) {
    for (int64_t count : {0, 1, 100}) {
      EXPECT_EQ(PlanCollective(Args(coll, DataType::kFloat32, count), 4, g).algorithm, Algorithm::kRing);
    }
  }
}

TEST(PlanCollectiveTest, OneShotThresholds) {
  const CommGeometry g = Geometry(4, 128 * 1024, false, Algorithm::kAuto, 64 * 1024, 4096);
  // Up to the automatic threshold: one-shot; one element more: the ring.
  EXPECT_EQ(PlanCollective(Args(Coll::kAllReduce, DataType::kFloat32, 1024), 4, g).algorithm,
            Algorithm::kOneShot);
  EXPECT_EQ(PlanCollective(Args(Coll::kAllReduce, DataType::kFloat32, 1025), 4, g).algorithm, Algorithm::kRing);
  EXPECT_EQ(PlanCollective(Args(Coll::kAllReduce, DataType::kFloat32, 0), 4, g).algorithm, Algorithm::kOneShot);
  // ReduceScatter posts the whole input: nranks times its per-rank count.
  EXPECT_EQ(PlanCollective(Args(Coll::kReduceScatter, DataType::kFloat32, 256), 4, g).algorithm,
            Algorithm::kOneShot);
  EXPECT_EQ(PlanCollective(Args(Coll::kReduceScatter, DataType::kFloat32, 257), 4, g).algorithm,
            Algorithm::kRing);
  // AllGather's message is its output: nranks times the post.
  EXPECT_EQ(PlanCollective(Args(Coll::kAllGather, DataType::kFloat32, 256), 4, g).algorithm, Algorithm::kOneShot);
  EXPECT_EQ(PlanCollective(Args(Coll::kAllGather, DataType::kFloat32, 257), 4, g).algorithm, Algorithm::kRing);
  // Forced one-shot: anything that fits the board, and the ring beyond it.
  const CommGeometry forced = Geometry(4, 128 * 1024, false, Algorithm::kOneShot, 64 * 1024, 4096);
  EXPECT_EQ(PlanCollective(Args(Coll::kAllReduce, DataType::kInt8, 64 * 1024), 4, forced).algorithm,
            Algorithm::kOneShot);
  EXPECT_EQ(PlanCollective(Args(Coll::kAllReduce, DataType::kInt8, 64 * 1024 + 1), 4, forced).algorithm,
            Algorithm::kRing);
  // No board (ranks on several hosts): always the ring.
  const CommGeometry none = Geometry(4, 128 * 1024, false, Algorithm::kOneShot, 0, 4096);
  EXPECT_EQ(PlanCollective(Args(Coll::kAllReduce, DataType::kInt8, 1), 4, none).algorithm, Algorithm::kRing);
}

TEST(PlanCollectiveTest, SmallMessagesUseOneChannelLargeOnesUseMore) {
  const CommGeometry g = Geometry(4, 128 * 1024, false, Algorithm::kRing, 0, 0);
  EXPECT_EQ(PlanCollective(Args(Coll::kAllReduce, DataType::kFloat32, 0), 4, g).nchannels, 1);
  EXPECT_EQ(PlanCollective(Args(Coll::kAllReduce, DataType::kFloat32, 1), 4, g).nchannels, 1);
  EXPECT_EQ(PlanCollective(Args(Coll::kAllReduce, DataType::kFloat32, 1000), 4, g).nchannels, 1);
  EXPECT_EQ(PlanCollective(Args(Coll::kAllReduce, DataType::kFloat32, 64 << 20), 4, g).nchannels, 4);
  // More data never means fewer channels.
  for (Coll coll : kColls) {
    int last = 1;
    for (int64_t count = 1; count <= (int64_t{1} << 30); count *= 2) {
      const int n = PlanCollective(Args(coll, DataType::kInt8, count), 4, g).nchannels;
      EXPECT_GE(n, last) << "count " << count;
      last = n;
    }
    EXPECT_EQ(last, 4);
  }
}

TEST(PlanCollectiveTest, PerRankCountsScaleByRanks) {
  // ReduceScatter and AllGather counts are per rank: their total is nranks times larger.
  const CommGeometry g = Geometry(4, 128 * 1024, false, Algorithm::kRing, 0, 0);
  const int64_t count = 512 * 1024;  // bytes as int8
  const int ar = PlanCollective(Args(Coll::kAllReduce, DataType::kInt8, count), 4, g).nchannels;
  const int rs = PlanCollective(Args(Coll::kReduceScatter, DataType::kInt8, count), 4, g).nchannels;
  const int ag = PlanCollective(Args(Coll::kAllGather, DataType::kInt8, count), 4, g).nchannels;
  EXPECT_EQ(ar, 1);
  EXPECT_EQ(rs, 4);
  EXPECT_EQ(ag, 4);
  // Wider datatypes move more bytes per element.
  EXPECT_GT(PlanCollective(Args(Coll::kAllReduce, DataType::kFloat64, count), 4, g).nchannels, ar);
}

// RINGO_NCHANNELS: every ring collective uses all the channels, even tiny ones
// (small messages may still go one-shot, which uses no channels).
TEST(PlanCollectiveTest, FixedChannelsAreAllUsedByRingPlans) {
  Config c = DefaultConfig();
  c.nchannels = 3;
  for (const char* algo : {"", "ring"}) {
    c.algo = algo;
    const CommGeometry g = ChooseGeometry(SettingsFrom(c), 4, 4, 2);
    for (Coll coll : kColls) {
      for (int64_t count : {0, 1, 5, 100, 100000, 10000000}) {
        const CollPlan p = PlanCollective(Args(coll, DataType::kFloat32, count), 4, g);
        if (p.algorithm == Algorithm::kRing) {
          EXPECT_EQ(p.nchannels, 3) << "count " << count;
        } else {
          EXPECT_STREQ(algo, "") << "RINGO_ALGO=ring planned one-shot";
        }
      }
    }
  }
}

// Direct: among the ranks of one host (a board), from each collective's
// threshold up unless RINGO_ALGO says otherwise.
TEST(PlanCollectiveTest, DirectForLargeCollectivesOnOneHost) {
  Config c = DefaultConfig();
  for (int local : {2, 4}) {  // one rank per core; more ranks than cores
    const CommGeometry g = ChooseGeometry(SettingsFrom(c), local, local, 2);
    for (Coll coll : kColls) {
      const int64_t from = g.direct_auto_bytes[static_cast<int>(coll)];
      ASSERT_GT(from, 0) << static_cast<int>(coll);
      int64_t at = from / 4;  // float32 elements of the whole message
      if (coll == Coll::kReduceScatter || coll == Coll::kAllGather) at /= local;
      // From the threshold up; the one-shot goes first where its post still fits the board.
      const Algorithm at_from = PlanCollective(Args(coll, DataType::kFloat32, at), local, g).algorithm;
      EXPECT_TRUE(at_from == Algorithm::kDirect || at_from == Algorithm::kOneShot)
          << static_cast<int>(coll) << " at " << from << " bytes, " << local << " ranks";
      EXPECT_EQ(PlanCollective(Args(coll, DataType::kFloat32, at * 8), local, g).algorithm, Algorithm::kDirect)
          << static_cast<int>(coll) << " at " << 8 * from << " bytes, " << local << " ranks";
      EXPECT_NE(PlanCollective(Args(coll, DataType::kFloat32, at - 16), local, g).algorithm, Algorithm::kDirect)
          << static_cast<int>(coll) << " below " << from << " bytes";
    }
  }
  const int64_t big = int64_t{64} << 20;
  const CommGeometry hosts = ChooseGeometry(SettingsFrom(c), 4, 2, 2);  // ranks on two hosts: no board
  for (Coll coll : kColls) {
    EXPECT_EQ(hosts.direct_auto_bytes[static_cast<int>(coll)], 0);
    EXPECT_EQ(PlanCollective(Args(coll, DataType::kFloat32, big), 4, hosts).algorithm, Algorithm::kRing);
  }
  c.algo = "ring";
  EXPECT_EQ(PlanCollective(Args(Coll::kAllReduce, DataType::kFloat32, big), 2, ChooseGeometry(SettingsFrom(c), 2, 2, 2)).algorithm,
            Algorithm::kRing);
  c.algo = "direct";  // every collective, whatever its size, even one the one-shot board would take
  for (Coll coll : kColls) {
    EXPECT_EQ(PlanCollective(Args(coll, DataType::kFloat32, 10), 2, ChooseGeometry(SettingsFrom(c), 2, 2, 2)).algorithm,
              Algorithm::kDirect);
  }
}

// A direct plan falls back to the one-shot where the data fits the board and
// the collective goes one-shot at all, to the ring otherwise.
TEST(PlanCollectiveTest, DirectFallsBackToTheOneShotWhereItFits) {
  Config c = DefaultConfig();
  for (int local : {2, 4}) {
    const CommGeometry g = ChooseGeometry(SettingsFrom(c), local, local, 2);
    for (Coll coll : kColls) {
      for (int64_t count : {int64_t{1} << 12, int64_t{1} << 14, int64_t{1} << 20}) {
        const CollArgs args = Args(coll, DataType::kFloat32, count);
        const CollPlan p = PlanCollective(args, local, g);
        if (p.algorithm != Algorithm::kDirect) continue;
        const bool fits = PostBytes(args, local) <= g.board_bytes;
        const bool oneshot_kind = g.oneshot_auto_bytes[static_cast<int>(coll)] > 0;
        EXPECT_EQ(p.fallback, fits && oneshot_kind ? Algorithm::kOneShot : Algorithm::kRing)
            << static_cast<int>(coll) << " count " << count << ", " << local << " ranks";
      }
    }
  }
  // 2 ranks, AllReduce of 32 KiB: direct, or one-shot when a buffer is out of reach.
  const CollPlan p = PlanCollective(Args(Coll::kAllReduce, DataType::kFloat32, 8192), 2, ChooseGeometry(SettingsFrom(c), 2, 2, 2));
  EXPECT_EQ(p.algorithm, Algorithm::kDirect);
  EXPECT_EQ(p.fallback, Algorithm::kOneShot);
}

// The geometry a real configuration produces is always a valid plan input.
TEST(PlanCollectiveTest, FromConfiguredGeometry) {
  for (int64_t slot : {int64_t{0}, int64_t{64}, int64_t{192}, int64_t{4096}}) {
    for (int64_t nch : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{5}}) {
      for (const char* algo : {"", "ring", "oneshot", "direct"}) {
        Config c = DefaultConfig();
        c.slot_bytes = slot;
        c.nchannels = nch;
        c.algo = algo;
        for (int local = 1; local <= 8; ++local) {
          const CommGeometry g = ChooseGeometry(SettingsFrom(c), local, local, 2);
          if (slot > 0) {
            EXPECT_EQ(g.slot_bytes, slot);
          }
          for (Coll coll : kColls) {
            for (int64_t count : {int64_t{0}, int64_t{3}, int64_t{1} << 22}) {
              const CollPlan p = PlanCollective(Args(coll, DataType::kFloat16, count), local, g);
              if (p.algorithm == Algorithm::kDirect) {
                EXPECT_GT(local, 1);
                EXPECT_NE(std::string(algo), "ring");
                EXPECT_NE(std::string(algo), "oneshot");
              }
              if (p.algorithm == Algorithm::kRing || p.algorithm == Algorithm::kDirect) {
                // A direct plan's ring fields are its fallback.
                EXPECT_TRUE(ValidRingPlan(p, g, DataType::kFloat16)) << "slot " << slot << " nch " << nch;
                if (nch > 0 && local > 1) {
                  EXPECT_EQ(p.nchannels, nch);
                }
              } else {
                EXPECT_NE(std::string(algo), "ring");
                EXPECT_GT(local, 1);
                EXPECT_EQ(p.nchannels, 1);
              }
            }
          }
        }
      }
    }
  }
}

// Unset, small collectives take 128 KiB slices of the 512 KiB slots and large
// ones whole slots; RINGO_SLOT_BYTES makes every slice a whole slot.
TEST(PlanCollectiveTest, SliceFollowsSizeUnlessTheSlotIsSet) {
  base::Config c;
  const CommGeometry g = ChooseGeometry(SettingsFrom(c), 2, 2, 2);
  kernels::CollArgs a;
  a.dtype = base::DataType::kFloat32;
  a.count = (1 << 20) / 4;
  EXPECT_EQ(PlanCollective(a, 2, g).slice_bytes, 128 * 1024);
  a.count = (64 << 20) / 4;
  EXPECT_EQ(PlanCollective(a, 2, g).slice_bytes, 512 * 1024);
  c.slot_bytes = 256 * 1024;
  const CommGeometry fixed = ChooseGeometry(SettingsFrom(c), 2, 2, 2);
  a.count = (1 << 20) / 4;
  EXPECT_EQ(PlanCollective(a, 2, fixed).slice_bytes, 256 * 1024);
}

}  // namespace
}  // namespace ringo::collectives

// ---- GPU communicators: geometry and protocol choice ----

namespace ringo::collectives {
namespace {

using kernels::gpu::Proto;

// What a connector of `g` carries (kernels::gpu::MaxSliceBytes).
int64_t LLSlice(const DeviceGeometry& g) {
  return g.ll_slot_bytes / kernels::gpu::kLLLineBytes * kernels::gpu::kLLDataBytesPerLine;
}

// The largest Simple slice: the slot less the room for the shift.
int64_t SimpleSlice(const DeviceGeometry& g) { return g.slot_bytes - kernels::gpu::kSlotShiftPad; }

DevicePlan Plan(const DeviceGeometry& g, Coll coll, DataType dt, int64_t count, int nranks) {
  CollArgs a;
  a.coll = coll;
  a.dtype = dt;
  a.count = count;
  const DeviceSlices slices = MaxDeviceSlices(g);
  EXPECT_EQ(slices.simple, SimpleSlice(g));
  EXPECT_EQ(slices.ll, LLSlice(g));
  return PlanDeviceCollective(a, nranks, g, slices.simple, slices.ll);
}

TEST(DeviceGeometryTest, Defaults) {
  const DeviceGeometry g = ChooseDeviceGeometry(SettingsFrom(DefaultConfig()), 4);
  EXPECT_EQ(SimpleSlice(g), 512 * 1024);
  EXPECT_EQ(g.slot_bytes % 16, 0);
  EXPECT_EQ(LLSlice(g), 16 * 1024);
  EXPECT_EQ(g.ll_slot_bytes, 32 * 1024);
  EXPECT_GE(g.nchannels, 1);
  EXPECT_LE(g.nchannels, kernels::gpu::kMaxChannels);
  EXPECT_EQ(ChooseDeviceGeometry(SettingsFrom(DefaultConfig()), 1).nchannels, 1);
}

TEST(DeviceGeometryTest, SmallSlotsShrinkBothProtocols) {
  Config c = DefaultConfig();
  c.slot_bytes = 1024;
  c.nchannels = 100;
  const DeviceGeometry g = ChooseDeviceGeometry(SettingsFrom(c), 3);
  EXPECT_EQ(SimpleSlice(g), 1024);
  EXPECT_EQ(LLSlice(g), 1024);
  EXPECT_TRUE(g.fixed_slot);
  EXPECT_TRUE(g.fixed_channels);
  EXPECT_EQ(g.nchannels, kernels::gpu::kMaxChannels);
}

TEST(DevicePlanTest, LLForSmallSimpleForLarge) {
  const DeviceGeometry g = ChooseDeviceGeometry(SettingsFrom(DefaultConfig()), 4);
  for (int n : {1, 2, 4, 8}) {
    const int64_t limit = n * LLSlice(g);  // bytes: one LL slice per rank
    EXPECT_EQ(Plan(g, Coll::kAllReduce, DataType::kFloat32, 1, n).proto, Proto::kLL);
    EXPECT_EQ(Plan(g, Coll::kAllReduce, DataType::kUint8, limit, n).proto, Proto::kLL) << n;
    EXPECT_EQ(Plan(g, Coll::kAllReduce, DataType::kUint8, limit + 1, n).proto, Proto::kSimple) << n;
    // Per-rank counts are multiplied by the ranks.
    EXPECT_EQ(Plan(g, Coll::kAllGather, DataType::kUint8, limit / n, n).proto, Proto::kLL) << n;
    EXPECT_EQ(Plan(g, Coll::kAllGather, DataType::kUint8, limit / n + 1, n).proto, Proto::kSimple) << n;
  }
}

TEST(DevicePlanTest, SlicesFitTheProtocolAndChannelsGrowWithSize) {
  const DeviceGeometry g = ChooseDeviceGeometry(SettingsFrom(DefaultConfig()), 8);
  for (Coll coll : kColls) {
    for (DataType dt : {DataType::kInt8, DataType::kFloat16, DataType::kFloat32, DataType::kFloat64}) {
      for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{4097}, int64_t{1} << 20, int64_t{1} << 26}) {
        const DevicePlan p = Plan(g, coll, dt, count, 8);
        const int64_t limit = p.proto == Proto::kLL ? LLSlice(g) : SimpleSlice(g);
        EXPECT_LE(p.slice_bytes, limit);
        EXPECT_GE(p.slice_bytes, static_cast<int64_t>(base::DataTypeSize(dt)));
        EXPECT_GE(p.nchannels, 1);
        EXPECT_LE(p.nchannels, g.nchannels);
      }
    }
  }
  EXPECT_EQ(Plan(g, Coll::kAllReduce, DataType::kFloat32, 1 << 20, 8).nchannels, g.nchannels);  // 4 MiB
  EXPECT_EQ(Plan(g, Coll::kAllReduce, DataType::kFloat32, 1 << 26, 8).slice_bytes, SimpleSlice(g));
}

// Channels from the GPU: one block per multiprocessor shared among the ranks
// on a GPU (an H100's 132), capped; RINGO_NCHANNELS still wins; what is chosen
// fits the GPU.
TEST(DeviceGeometryTest, ChannelsFromTheMultiprocessorsAndTheRanksPerGpu) {
  const kernels::gpu::RingResidency h100{132, 1};
  EXPECT_EQ(ChooseDeviceGeometry(SettingsFrom(DefaultConfig()), 2, h100, 2).nchannels,
            kernels::gpu::kMaxChannels);
  EXPECT_EQ(ChooseDeviceGeometry(SettingsFrom(DefaultConfig()), 4, h100, 4).nchannels, 33);
  EXPECT_EQ(ChooseDeviceGeometry(SettingsFrom(DefaultConfig()), 8, h100, 8).nchannels, 16);
  EXPECT_EQ(ChooseDeviceGeometry(SettingsFrom(DefaultConfig()), 8, h100, 1).nchannels,
            kernels::gpu::kMaxChannels);  // 8 GPUs
  EXPECT_EQ(ChooseDeviceGeometry(SettingsFrom(DefaultConfig()), 1, h100, 1).nchannels, 1);
  for (int n = 2; n <= 16; ++n) {
    const int c = ChooseDeviceGeometry(SettingsFrom(DefaultConfig()), n, h100, n).nchannels;
    EXPECT_TRUE(kernels::gpu::CheckResidency(h100, n, c, "GPU").ok()) << n;
  }
  Config forced = DefaultConfig();
  forced.nchannels = 3;
  EXPECT_EQ(ChooseDeviceGeometry(SettingsFrom(forced), 8, h100, 8).nchannels, 3);
  // A 256 MiB all-reduce on 2 ranks of one H100 uses them all.
  const DeviceGeometry g = ChooseDeviceGeometry(SettingsFrom(DefaultConfig()), 2, h100, 2);
  EXPECT_EQ(Plan(g, Coll::kAllReduce, DataType::kFloat32, 1 << 26, 2).nchannels, g.nchannels);
}

// A GPU ring across hosts: a channel is a network connection each way, so
// 4 channels, not one per multiprocessor (64 on an H100 alone), unless
// RINGO_NCHANNELS says; one GPU per host gets no more for it.
TEST(DeviceGeometryTest, AcrossHostsTheNetworkSizesTheChannels) {
  const kernels::gpu::RingResidency h100{132, 1};
  EXPECT_EQ(ChooseDeviceGeometry(SettingsFrom(DefaultConfig()), 2, h100, 1, /*hosts_spanned=*/true).nchannels, 4);
  EXPECT_EQ(ChooseDeviceGeometry(SettingsFrom(DefaultConfig()), 16, h100, 8, true).nchannels, 4);
  EXPECT_EQ(ChooseDeviceGeometry(SettingsFrom(DefaultConfig()), 2, h100, 1, false).nchannels,
            kernels::gpu::kMaxChannels);
  Config forced = DefaultConfig();
  forced.nchannels = 12;
  EXPECT_EQ(ChooseDeviceGeometry(SettingsFrom(forced), 2, h100, 1, true).nchannels, 12);
  EXPECT_EQ(ChooseDeviceGeometry(SettingsFrom(DefaultConfig()), 1, h100, 1, true).nchannels, 1);
}

TEST(DevicePlanTest, RingoProtoForcesOne) {
  DeviceGeometry g = ChooseDeviceGeometry(SettingsFrom(DefaultConfig()), 2);
  g.proto = ProtoChoice::kSimple;
  EXPECT_EQ(Plan(g, Coll::kAllReduce, DataType::kFloat32, 1, 2).proto, Proto::kSimple);
  g.proto = ProtoChoice::kLL;
  const DevicePlan big = Plan(g, Coll::kAllReduce, DataType::kFloat32, 1 << 24, 2);
  EXPECT_EQ(big.proto, Proto::kLL);
  EXPECT_EQ(big.slice_bytes, LLSlice(g));
}

}  // namespace
}  // namespace ringo::collectives
