// The channel split by measured rate (channel_balance.h): the agreed points,
// the shares, their floor, and what a failed measurement leaves.
#include "collectives/engines/channel_balance.h"

#include <vector>

#include "gtest/gtest.h"
#include "kernels/schedule.h"

namespace ringo::collectives {
namespace {

int Part(const ChannelBalance& b, int c) { return static_cast<int>(b.split()[c + 1] - b.split()[c]); }

TEST(ChannelBalance, StartsInEqualParts) {
  ChannelBalance b(3);
  EXPECT_EQ(b.split()[0], 0u);
  EXPECT_EQ(b.split()[3], ChannelBalance::kTotal);
  EXPECT_NEAR(Part(b, 0), ChannelBalance::kTotal / 3, 1);
  EXPECT_NEAR(Part(b, 2), ChannelBalance::kTotal / 3, 1);
}

TEST(ChannelBalance, FirstCallEndsTheFirstPeriodThenSharesFollowRates) {
  ChannelBalance b(2);
  // Equal parts of 8 MiB each; channel 0 took 1 s, channel 1 4 s: 4:1.
  b.Record(0, 8 << 20, 1.0);
  b.Record(1, 8 << 20, 4.0);
  ASSERT_TRUE(b.CallDone(16 << 20));  // the setup's measurement
  // Two ranks measured alike: the pooled seconds are twice each.
  b.Adopt({2.0, 8.0}, 2);
  EXPECT_EQ(b.adoptions(), 1);
  EXPECT_NEAR(Part(b, 0), 4 * ChannelBalance::kTotal / 5, 1);
  EXPECT_NEAR(Part(b, 1), ChannelBalance::kTotal / 5, 1);
  // The ranges follow: the fast channel takes four fifths of the elements.
  const kernels::Range r = kernels::WeightedChannelRange(1 << 20, b.split(), 2, 0, 16);
  // (within one part of 4096 and one alignment step)
  EXPECT_NEAR(static_cast<double>(r.hi), 0.8 * (1 << 20), (1 << 20) / 4096 + 16);
}

TEST(ChannelBalance, PeriodsLastHalfASecondAtTheAgreedRates) {
  ChannelBalance b(2);
  // The first three periods are a call each.
  for (int k = 0; k < ChannelBalance::kQuickPeriods; ++k) {
    b.Record(0, 50'000'000, 1.0);
    b.Record(1, 50'000'000, 1.0);
    ASSERT_TRUE(b.CallDone(100'000'000)) << k;
    b.Adopt({1.0, 1.0}, 1);  // 100 MB/s in all
  }
  // 10 MB calls take 0.1 s each at that rate: the 5th ends the period.
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(b.CallDone(10'000'000)) << i;
  EXPECT_TRUE(b.CallDone(10'000'000));
}

TEST(ChannelBalance, SlowChannelKeepsAFloorAndRecovers) {
  ChannelBalance b(2);
  b.Record(0, 1 << 20, 0.001);
  b.Record(1, 1 << 20, 10.0);  // 10000 times slower
  ASSERT_TRUE(b.CallDone(2 << 20));
  b.Adopt(b.Seconds(), 1);
  EXPECT_NEAR(Part(b, 1), ChannelBalance::kTotal * ChannelBalance::kMinShare, 1);
  // It recovers: equal rates again give equal parts.
  const int64_t p0 = int64_t{1} << 24, p1 = int64_t{1} << 24;
  b.Record(0, p0, 1.0);
  b.Record(1, p1, 1.0);
  b.Adopt(b.Seconds(), 1);
  EXPECT_NEAR(Part(b, 0), ChannelBalance::kTotal / 2, 1);
}

TEST(ChannelBalance, TheFloorHoldsAfterRescalingAndForManyChannels) {
  // Flooring the slowest lifts the others' total; rescaling pushes the
  // second slowest under the floor in turn: it is floored too.
  ChannelBalance b(3);
  const double rates[] = {100.0, 3.3, 0.1};
  for (int c = 0; c < 3; ++c) b.Record(c, 1 << 20, (1 << 20) / rates[c]);
  b.Adopt(b.Seconds(), 1);
  for (int c = 0; c < 3; ++c) EXPECT_GE(Part(b, c), ChannelBalance::kTotal * ChannelBalance::kMinShare - 1) << c;
  EXPECT_EQ(b.split()[3], ChannelBalance::kTotal);
  // 40 channels (RINGO_NCHANNELS): 1/32 each would not fit; every channel
  // keeps half an equal part, and the next period measures them all again.
  ChannelBalance many(40);
  for (int c = 0; c < 40; ++c) many.Record(c, 1 << 20, c == 0 ? 0.001 : 1.0);
  many.Adopt(many.Seconds(), 1);
  EXPECT_EQ(many.adoptions(), 1);
  for (int c = 0; c < 40; ++c) EXPECT_GE(Part(many, c), static_cast<int>(ChannelBalance::kTotal * 0.5 / 40) - 1) << c;
  EXPECT_EQ(many.split()[40], ChannelBalance::kTotal);
  for (int c = 0; c < 40; ++c) many.Record(c, 1 << 20, 1.0);
  many.Adopt(many.Seconds(), 1);
  EXPECT_EQ(many.adoptions(), 2);
}

TEST(ChannelBalance, NoMeasurementKeepsTheSplit) {
  ChannelBalance b(2);
  b.Record(0, 8 << 20, 1.0);
  b.Record(1, 8 << 20, 3.0);
  b.Adopt(b.Seconds(), 1);
  const int before = Part(b, 0);
  // A period whose channel 1 recorded nothing (or a zero time) changes nothing.
  b.Record(0, 8 << 20, 1.0);
  b.Adopt(b.Seconds(), 1);
  EXPECT_EQ(Part(b, 0), before);
  b.Adopt({0.0, 0.0}, 1);
  EXPECT_EQ(Part(b, 0), before);
  // A pooled vector of the wrong length too.
  b.Record(0, 8 << 20, 1.0);
  b.Record(1, 8 << 20, 1.0);
  b.Adopt({1.0}, 1);
  EXPECT_EQ(Part(b, 0), before);
}

TEST(ChannelBalance, SameInputsSameSplit) {
  // Every rank adopts from the same pooled numbers: bit-identical splits.
  ChannelBalance a(4), b(4);
  const std::vector<double> pooled = {0.37, 1.91, 0.52, 0.88};
  for (ChannelBalance* x : {&a, &b}) {
    for (int c = 0; c < 4; ++c) x->Record(c, 3 << 20, 0.5);
    x->Adopt(pooled, 3);
  }
  for (int c = 0; c <= 4; ++c) EXPECT_EQ(a.split()[c], b.split()[c]);
  EXPECT_EQ(a.split()[4], ChannelBalance::kTotal);
  for (int c = 0; c < 4; ++c) EXPECT_GE(a.split()[c + 1], a.split()[c]);
}

}  // namespace
}  // namespace ringo::collectives
