// The ring kernels' residency arithmetic (residency.h) and the Simple slots'
// shift encoding (internal/slot_shift.h): CPU only.
#include "kernels/cuda/residency.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/internal/slot_shift.h"

namespace ringo::kernels::gpu {
namespace {

// An H100 SXM: 132 multiprocessors; the ring kernel (512 threads,
// __launch_bounds__(512, 1)) fits one to four blocks on each.
constexpr RingResidency kH100{132, 1};

TEST(Residency, ResidentBlocksIsMultiprocessorsTimesBlocks) {
  EXPECT_EQ(ResidentRingBlocks(kH100), 132);
  EXPECT_EQ(ResidentRingBlocks(RingResidency{132, 2}), 264);
  EXPECT_EQ(ResidentRingBlocks(RingResidency{}), 0);
  EXPECT_EQ(ResidentRingBlocks(RingResidency{-1, 3}), 0);
}

TEST(Residency, ChannelsSplitTheMultiprocessorsAmongTheRanks) {
  EXPECT_EQ(ChannelsPerRank(kH100, 1, 64), 64);  // capped
  EXPECT_EQ(ChannelsPerRank(kH100, 2, 64), 64);  // 66 -> cap
  EXPECT_EQ(ChannelsPerRank(kH100, 3, 64), 44);
  EXPECT_EQ(ChannelsPerRank(kH100, 4, 64), 33);
  EXPECT_EQ(ChannelsPerRank(kH100, 8, 64), 16);
  EXPECT_EQ(ChannelsPerRank(kH100, 200, 64), 1);                 // never below one
  EXPECT_EQ(ChannelsPerRank(kH100, 0, 64), 64);                  // no rank counted: as one
  EXPECT_EQ(ChannelsPerRank(RingResidency{108, 1}, 8, 64), 13);  // an A100
  // What it chooses always fits, whatever the occupancy (at least one block per SM).
  for (int ranks = 1; ranks <= 132; ++ranks) {
    const int c = ChannelsPerRank(kH100, ranks, 64);
    EXPECT_TRUE(CheckResidency(kH100, ranks, c, "GPU 0").ok())
        << ranks << " ranks, " << c << " channels";
  }
}

TEST(Residency, RefusesMoreBlocksThanTheGpuHolds) {
  EXPECT_TRUE(CheckResidency(kH100, 2, 66, "GPU 0").ok());
  EXPECT_TRUE(CheckResidency(kH100, 132, 1, "GPU 0").ok());
  const base::Status st = CheckResidency(kH100, 8, 17, "CUDA device 0 (NVIDIA H100)");
  EXPECT_EQ(st.code(), base::Code::kInvalidUsage);
  EXPECT_NE(st.message().find("136 blocks"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("holds 132"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("CUDA device 0 (NVIDIA H100)"), std::string::npos) << st.message();
  EXPECT_TRUE(CheckResidency(RingResidency{132, 2}, 8, 33, "GPU 0").ok());
  EXPECT_FALSE(CheckResidency(RingResidency{132, 0}, 1, 1, "GPU 0")
                   .ok());  // a kernel that does not fit at all
}

TEST(SlotShift, FollowsTheUserPointerModulo16) {
  alignas(16) unsigned char buf[64];
  for (int off = 0; off < 32; ++off) {
    EXPECT_EQ(internal::SlotShiftFor(buf + off), static_cast<uint32_t>(off % 16));
    EXPECT_EQ(internal::SendShift(buf + off, buf + 3),
              static_cast<uint32_t>(off % 16));  // the input first
    EXPECT_EQ(internal::SendShift(nullptr, buf + off),
              static_cast<uint32_t>(off % 16));  // else the output
  }
}

TEST(SlotShift, SizeWordCarriesBytesAndShift) {
  for (uint64_t bytes :
       {uint64_t{0}, uint64_t{1}, uint64_t{4096}, uint64_t{512} << 10, (uint64_t{1} << 40) + 3}) {
    for (uint32_t shift = 0; shift < 16; ++shift) {
      const uint64_t w = internal::EncodeSlotSize(bytes, shift);
      EXPECT_EQ(internal::SlotSizeBytes(w), bytes);
      EXPECT_EQ(internal::SlotSizeShift(w), shift);
    }
  }
  // A word written without a shift (as before shifts existed) reads as shift 0.
  EXPECT_EQ(internal::SlotSizeShift(4096), 0u);
  EXPECT_EQ(internal::SlotSizeBytes(4096), 4096u);
}

}  // namespace
}  // namespace ringo::kernels::gpu
