// --ranks-per-gpu's mapping of ranks to GPUs and the refusal of more ranks
// than the visible GPUs hold.
#include "tools/perf/devices.h"

#include <gtest/gtest.h>

namespace ringo::perf {
namespace {

TEST(RankDevice, OneRankPerGpu) {
  for (int r = 0; r < 8; ++r) EXPECT_EQ(RankDevice(r, 1, 8), r);
}

TEST(RankDevice, SeveralRanksShareEachGpuInRankOrder) {
  // 8 ranks, 4 per GPU, 2 GPUs: 0-3 on device 0, 4-7 on device 1.
  const int want[] = {0, 0, 0, 0, 1, 1, 1, 1};
  for (int r = 0; r < 8; ++r) EXPECT_EQ(RankDevice(r, 4, 2), want[r]) << "rank " << r;
  // Every rank on one GPU.
  for (int r = 0; r < 5; ++r) EXPECT_EQ(RankDevice(r, 5, 1), 0);
}

TEST(RankDevice, WrapsPastTheLastGpu) {
  // A launcher's global ranks beyond this host's GPUs (only ever with room
  // checked elsewhere) wrap round.
  EXPECT_EQ(RankDevice(9, 2, 4), 0);
  EXPECT_EQ(RankDevice(11, 1, 8), 3);
}

TEST(CheckDeviceCount, AcceptsWhatFits) {
  EXPECT_TRUE(CheckDeviceCount(8, 1, 8).ok());
  EXPECT_TRUE(CheckDeviceCount(3, 1, 8).ok());
  EXPECT_TRUE(CheckDeviceCount(4, 4, 1).ok());
  EXPECT_TRUE(CheckDeviceCount(7, 4, 2).ok());
}

TEST(CheckDeviceCount, SuggestsRanksPerGpu) {
  const base::Status s = CheckDeviceCount(4, 1, 1);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), base::Code::kInvalidUsage);
  EXPECT_EQ(s.message(),
            "4 ranks at 1 per GPU need 4 GPUs, but 1 are visible: pass --ranks-per-gpu 4 to share "
            "GPUs (several ranks on one GPU are supported), or --host for host memory");
  const base::Status t = CheckDeviceCount(9, 2, 2);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.message().find("9 ranks at 2 per GPU need 5 GPUs, but 2 are visible"),
            std::string::npos);
  EXPECT_NE(t.message().find("--ranks-per-gpu 5"), std::string::npos);
}

}  // namespace
}  // namespace ringo::perf
