// The ring schedule, tested exhaustively on the CPU for small rank counts and
// element counts, using nothing but schedule.h and a symbolic simulator of
// the ring (schedule_sim.h). The sweep covers N = 1..8, every collective,
// every root, counts 0..70 and larger odd ones, several slices and
// alignments, 1..3 channels, and ring orders that are not the identity.
#include "kernels/schedule.h"

#include <cmath>

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/schedule_sim.h"

namespace ringo::kernels {
namespace {

using namespace sim;  // NOLINT: the simulator and its case helpers

// ------------------------------------------------------------ the sweep ----

class ScheduleSweep : public ::testing::TestWithParam<int> {};

// N ranks x every collective x every root x counts 0..70 x alignments
// 1,2,4,8,16 x several slices x 1..3 channels, identity ring order.
TEST_P(ScheduleSweep, SmallCounts) {
  const int n = GetParam();
  int64_t cases = 0;
  for (Coll coll : kAllColls) {
    for (int root : Roots(coll, n)) {
      for (int64_t align : {1, 2, 4, 8, 16}) {
        for (int64_t slice : SlicesFor(align)) {
          for (int nch = 1; nch <= 3; ++nch) {
            for (int64_t count = 0; count <= 70; ++count) {
              Case c;
              c.coll = coll;
              c.nranks = n;
              c.count = count;
              c.nchannels = nch;
              c.align = align;
              c.slice = slice;
              c.root = root;
              c.order = Orders(n, false)[0];
              c.in_place = true;
              ASSERT_TRUE(Simulate(c));
              ++cases;
            }
          }
        }
      }
    }
  }
  RecordProperty("cases", static_cast<int>(cases));
}

// Larger and odd counts, including ones far from multiples of N, the slice
// and the alignment, with ring orders that are not the identity.
TEST_P(ScheduleSweep, LargerCountsAndRingOrders) {
  const int n = GetParam();
  const int64_t counts[] = {71, 97, 127, 128, 129, 255, 257, 383, 1021};
  for (Coll coll : kAllColls) {
    for (int root : Roots(coll, n, false)) {
      for (const std::vector<int>& order : Orders(n, true)) {
        for (int64_t align : {1, 4, 16}) {
          for (int64_t slice : {align, 3 * align, 8 * align}) {
            for (int nch = 1; nch <= 3; ++nch) {
              for (int64_t count : counts) {
                Case c;
                c.coll = coll;
                c.nranks = n;
                c.count = count;
                c.nchannels = nch;
                c.align = align;
                c.slice = slice;
                c.root = root;
                c.order = order;
                c.in_place = true;
                ASSERT_TRUE(Simulate(c));
              }
            }
          }
        }
      }
    }
  }
}

// Ring orders that are not the identity, at small counts.
TEST_P(ScheduleSweep, SmallCountsPermutedRing) {
  const int n = GetParam();
  const auto orders = Orders(n, true);
  for (size_t o = 1; o < orders.size(); ++o) {
    for (Coll coll : kAllColls) {
      for (int root : Roots(coll, n)) {
        for (int64_t align : {1, 4}) {
          for (int64_t slice : {align, 2 * align}) {
            for (int nch = 1; nch <= 2; ++nch) {
              for (int64_t count = 0; count <= 40; ++count) {
                Case c;
                c.coll = coll;
                c.nranks = n;
                c.count = count;
                c.nchannels = nch;
                c.align = align;
                c.slice = slice;
                c.root = root;
                c.order = orders[o];
                ASSERT_TRUE(Simulate(c));
              }
            }
          }
        }
      }
    }
  }
}

// Slices that are not multiples of the alignment are outside the
// executor's contract, but the schedule must still move every element
// exactly once (alignment of chunk starts is then not checked).
TEST_P(ScheduleSweep, SlicesNotMultiplesOfTheAlignment) {
  const int n = GetParam();
  for (Coll coll : kAllColls) {
    for (int root : Roots(coll, n)) {
      for (int64_t align : {2, 4, 8, 16}) {
        for (int64_t slice : {align - 1, align + 1, 3 * align / 2 + 1}) {
          for (int nch = 1; nch <= 3; ++nch) {
            for (int64_t count = 0; count <= 50; count += (count < 20 ? 1 : 7)) {
              Case c;
              c.coll = coll;
              c.nranks = n;
              c.count = count;
              c.nchannels = nch;
              c.align = align;
              c.slice = slice;
              c.root = root;
              c.order = Orders(n, false)[0];
              ASSERT_TRUE(Simulate(c));
            }
          }
        }
      }
    }
  }
}

// The ring needs only two slots per edge (a rank holds the slot it received
// while it waits for a free one to send); kSlots is eight.
TEST_P(ScheduleSweep, TwoSlotsPerEdgeSuffice) {
  const int n = GetParam();
  for (Coll coll : kAllColls) {
    for (int root : Roots(coll, n)) {
      for (int nch = 1; nch <= 2; ++nch) {
        for (int64_t count : {0, 1, 5, 17, 33, 64, 100, 257}) {
          Case c;
          c.coll = coll;
          c.nranks = n;
          c.count = count;
          c.nchannels = nch;
          c.align = 4;
          c.slice = 4;
          c.root = root;
          c.order = Orders(n, false)[0];
          c.slots = 2;
          ASSERT_TRUE(Simulate(c));
        }
      }
    }
  }
}

// Every datatype size as the host executor runs it: reductions in elements
// with align = 64 / size and slice = slot_bytes / size; AllGather and
// Broadcast as bytes (align 64, slice = slot_bytes).
TEST_P(ScheduleSweep, EveryDatatypeSize) {
  const int n = GetParam();
  for (int64_t size : {1, 2, 4, 8}) {
    for (int64_t slot_bytes : {64, 192}) {
      for (Coll coll : kAllColls) {
        for (int root : Roots(coll, n, false)) {
          for (int nch = 1; nch <= 3; ++nch) {
            const bool bytes = coll == Coll::kAllGather || coll == Coll::kBroadcast;
            const int64_t align = bytes ? ChunkAlignElems(1) : ChunkAlignElems(size);
            const int64_t slice = bytes ? slot_bytes : slot_bytes / size;
            // Counts in elements of the datatype: 0, 1, odd, around one slot,
            // around N slots, and several loops.
            const int64_t per_slot = slot_bytes / size;
            for (int64_t elems : {int64_t{0}, int64_t{1}, int64_t{3}, per_slot - 1, per_slot, per_slot + 1,
                                  n * per_slot - 1, n * per_slot + 1, 3 * n * per_slot + 7}) {
              if (elems < 0) continue;
              Case c;
              c.coll = coll;
              c.nranks = n;
              c.count = bytes ? elems * size : elems;
              c.nchannels = nch;
              c.align = align;
              c.slice = slice;
              c.root = root;
              c.order = Orders(n, false)[0];
              c.in_place = true;
              ASSERT_TRUE(Simulate(c)) << "datatype size " << size << ", slot " << slot_bytes << " bytes";
            }
          }
        }
      }
    }
  }
}

// Channels of unequal parts (links of unequal speed): every collective
// still delivers every element once, whatever the weights, including a
// channel with nothing to carry.
TEST_P(ScheduleSweep, UnequalChannelParts) {
  const int n = GetParam();
  const std::vector<std::vector<uint32_t>> splits = {{0, 3276, 4096}, {0, 820, 4096}, {0, 1, 2, 4096},
                                                     {0, 2000, 2000, 4096}};
  for (Coll coll : kAllColls) {
    for (int root : Roots(coll, n, false)) {
      for (const auto& split : splits) {
        for (int64_t count : {0, 1, 17, 64, 257, 1000}) {
          Case c;
          c.coll = coll;
          c.nranks = n;
          c.count = count;
          c.nchannels = static_cast<int>(split.size()) - 1;
          c.split = split;
          c.align = 4;
          c.slice = 16;
          c.root = root;
          c.order = Orders(n, false)[0];
          c.in_place = true;
          ASSERT_TRUE(Simulate(c));
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, ScheduleSweep, ::testing::Range(1, 9),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "N" + std::to_string(info.param);
                         });

// ------------------------------------------------- the schedule's tables ----

TEST(ScheduleTest, StepsAndTransfersPerLoop) {
  for (int n = 1; n <= 16; ++n) {
    if (n == 1) {
      for (Coll c : kAllColls) {
        EXPECT_EQ(NumSteps(c, 1), 1);
        EXPECT_EQ(NumTransfers(c, 1), 0);
        EXPECT_EQ(RingStep(c, 1, 0, 0, 0).prim, Prim::kCopy);
      }
      continue;
    }
    EXPECT_EQ(NumSteps(Coll::kAllReduce, n), 2 * n - 1);
    EXPECT_EQ(NumTransfers(Coll::kAllReduce, n), 2 * (n - 1));
    EXPECT_EQ(NumSteps(Coll::kReduceScatter, n), n);
    EXPECT_EQ(NumTransfers(Coll::kReduceScatter, n), n - 1);
    EXPECT_EQ(NumSteps(Coll::kAllGather, n), n);
    EXPECT_EQ(NumTransfers(Coll::kAllGather, n), n - 1);
    EXPECT_EQ(NumSteps(Coll::kBroadcast, n), 1);
    EXPECT_EQ(NumTransfers(Coll::kBroadcast, n), 1);
    EXPECT_EQ(NumSteps(Coll::kReduce, n), 1);
    EXPECT_EQ(NumTransfers(Coll::kReduce, n), 1);
    // Per loop, each rank's sends equal the transfers on its edge (AR/RS/AG).
    for (Coll c : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather}) {
      for (int pos = 0; pos < n; ++pos) {
        int sends = 0, recvs = 0;
        for (int s = 0; s < NumSteps(c, n); ++s) {
          sends += PrimSends(RingStep(c, n, pos, 0, s).prim);
          recvs += PrimRecvs(RingStep(c, n, pos, 0, s).prim);
        }
        EXPECT_EQ(sends, NumTransfers(c, n)) << CollName(c) << " n " << n;
        EXPECT_EQ(recvs, NumTransfers(c, n)) << CollName(c) << " n " << n;
      }
    }
  }
}

// The textbook AllReduce: send, N-2 x recvReduceSend, recvReduceCopySend,
// N-2 x recvCopySend, recv; the chunk finished at step N-1 is the rank's own.
TEST(ScheduleTest, AllReduceIsTheTextbookRing) {
  for (int n = 2; n <= 8; ++n) {
    for (int pos = 0; pos < n; ++pos) {
      for (int s = 0; s < 2 * n - 1; ++s) {
        const Step st = RingStep(Coll::kAllReduce, n, pos, 0, s);
        Prim want;
        if (s == 0) want = Prim::kSend;
        else if (s < n - 1) want = Prim::kRecvReduceSend;
        else if (s == n - 1) want = Prim::kRecvReduceCopySend;
        else if (s < 2 * n - 2) want = Prim::kRecvCopySend;
        else want = Prim::kRecv;
        EXPECT_EQ(st.prim, want) << "n " << n << " pos " << pos << " step " << s;
        EXPECT_EQ(st.chunk, ((pos - s - 1) % n + n) % n);
        // What position p sends at step s, p+1 receives at step s+1.
        if (s + 1 < 2 * n - 1) {
          EXPECT_EQ(RingStep(Coll::kAllReduce, n, (pos + 1) % n, 0, s + 1).chunk, st.chunk);
        }
      }
      EXPECT_EQ(RingStep(Coll::kAllReduce, n, pos, 0, n - 1).chunk, pos);
      EXPECT_EQ(RingStep(Coll::kReduceScatter, n, pos, 0, n - 1).chunk, pos);
      EXPECT_EQ(RingStep(Coll::kReduceScatter, n, pos, 0, n - 1).prim, Prim::kRecvReduceCopy);
      EXPECT_EQ(RingStep(Coll::kAllGather, n, pos, 0, 0).chunk, pos);
      EXPECT_EQ(RingStep(Coll::kAllGather, n, pos, 0, 0).prim, Prim::kCopySend);
    }
  }
}

TEST(ScheduleTest, RootedCollectives) {
  for (int n = 2; n <= 8; ++n) {
    for (int root = 0; root < n; ++root) {
      int copy_sends = 0, recvs = 0, sends = 0, finals = 0;
      for (int pos = 0; pos < n; ++pos) {
        const Step b = RingStep(Coll::kBroadcast, n, pos, root, 0);
        const Step r = RingStep(Coll::kReduce, n, pos, root, 0);
        EXPECT_EQ(b.chunk, 0);
        EXPECT_EQ(r.chunk, 0);
        if (pos == root) {
          EXPECT_EQ(b.prim, Prim::kCopySend);
          EXPECT_EQ(r.prim, Prim::kRecvReduceCopy);
        }
        copy_sends += b.prim == Prim::kCopySend;
        recvs += b.prim == Prim::kRecv;
        sends += r.prim == Prim::kSend;
        finals += r.prim == Prim::kRecvReduceCopy;
      }
      EXPECT_EQ(copy_sends, 1);
      EXPECT_EQ(recvs, 1);
      EXPECT_EQ(sends, 1);
      EXPECT_EQ(finals, 1);
      EXPECT_EQ(RingStep(Coll::kBroadcast, n, (root + n - 1) % n, root, 0).prim, Prim::kRecv);
      EXPECT_EQ(RingStep(Coll::kReduce, n, (root + 1) % n, root, 0).prim, Prim::kSend);
    }
  }
}

// The primitive predicates agree with each primitive's documented meaning.
TEST(ScheduleTest, PrimitivePredicates) {
  struct Row {
    Prim p;
    bool recvs, sends, reads, writes, final_value;
  };
  const Row rows[] = {
      {Prim::kCopy, false, false, true, true, false},
      {Prim::kSend, false, true, true, false, false},
      {Prim::kCopySend, false, true, true, true, false},
      {Prim::kRecvReduceSend, true, true, true, false, false},
      {Prim::kRecvReduceCopySend, true, true, true, true, true},
      {Prim::kRecvReduceCopy, true, false, true, true, true},
      {Prim::kRecvCopySend, true, true, false, true, false},
      {Prim::kRecv, true, false, false, true, false},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(PrimRecvs(r.p), r.recvs) << static_cast<int>(r.p);
    EXPECT_EQ(PrimSends(r.p), r.sends) << static_cast<int>(r.p);
    EXPECT_EQ(PrimReads(r.p), r.reads) << static_cast<int>(r.p);
    EXPECT_EQ(PrimWrites(r.p), r.writes) << static_cast<int>(r.p);
    EXPECT_EQ(PrimFinal(r.p), r.final_value) << static_cast<int>(r.p);
  }
}

TEST(ScheduleTest, ChunkAlignment) {
  EXPECT_EQ(kChunkAlignBytes, 64);
  EXPECT_EQ(ChunkAlignElems(1), 64);
  EXPECT_EQ(ChunkAlignElems(2), 32);
  EXPECT_EQ(ChunkAlignElems(4), 16);
  EXPECT_EQ(ChunkAlignElems(8), 8);
  EXPECT_EQ(ChunkAlignElems(128), 1);
  static_assert(ChunkAlignElems(4) == 16, "constexpr");
}

TEST(ScheduleTest, Arithmetic) {
  EXPECT_EQ(DivUp(0, 4), 0);
  EXPECT_EQ(DivUp(1, 4), 1);
  EXPECT_EQ(DivUp(4, 4), 1);
  EXPECT_EQ(DivUp(5, 4), 2);
  EXPECT_EQ(AlignUp(0, 16), 0);
  EXPECT_EQ(AlignUp(1, 16), 16);
  EXPECT_EQ(AlignUp(16, 16), 16);
  EXPECT_EQ(AlignUp(17, 16), 32);
  EXPECT_EQ(Mod(-1, 5), 4);
  EXPECT_EQ(Mod(-10, 5), 0);
  EXPECT_EQ(Mod(-11, 5), 4);
  EXPECT_EQ(Mod(7, 5), 2);
  EXPECT_EQ(Min64(-3, 2), -3);
  EXPECT_EQ(Max64(-3, 2), 2);
  // Large counts do not overflow the 64-bit arithmetic.
  const int64_t big = int64_t{1} << 40;
  const Range r = ChannelRange(big + 3, 3, 2, 16);
  EXPECT_EQ(r.hi, big + 3);
  EXPECT_EQ(r.lo % 16, 0);
  EXPECT_EQ(NumLoops(Coll::kAllReduce, 8, Range{0, big}, 1 << 15), big / (8 << 15));
}

TEST(ScheduleTest, ChannelRangesPartitionEveryCount) {
  for (int64_t count = 0; count <= 300; ++count) {
    for (int nch = 1; nch <= 8; ++nch) {
      for (int64_t align : {1, 2, 4, 8, 16, 32, 64}) {
        int64_t next = 0;
        for (int c = 0; c < nch; ++c) {
          const Range r = ChannelRange(count, nch, c, align);
          ASSERT_EQ(r.lo, next) << count << " " << nch << " " << align << " channel " << c;
          ASSERT_LE(r.lo, r.hi);
          if (r.hi > r.lo) {
            ASSERT_EQ(r.lo % align, 0);
          }
          // No channel is much larger than its fair share.
          ASSERT_LE(r.hi - r.lo, AlignUp(DivUp(count, nch), align));
          next = r.hi;
        }
        ASSERT_EQ(next, count);
      }
    }
  }
}

TEST(ScheduleTest, WeightedChannelRangesPartitionInProportion) {
  const std::vector<std::vector<uint32_t>> splits = {{0, 1, 2}, {0, 3277, 4096}, {0, 100, 4000, 4096},
                                                     {0, 0, 4096}, {0, 1024, 2048, 3072, 4096}};
  for (const auto& cum : splits) {
    const int nch = static_cast<int>(cum.size()) - 1;
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{63}, int64_t{4096}, int64_t{1000003},
                          (int64_t{1} << 40) + 5}) {
      for (int64_t align : {1, 16, 64}) {
        int64_t next = 0;
        for (int c = 0; c < nch; ++c) {
          const Range r = WeightedChannelRange(count, cum.data(), nch, c, align);
          ASSERT_EQ(r.lo, next) << count << " channel " << c;
          ASSERT_LE(r.lo, r.hi);
          if (r.hi > r.lo) ASSERT_EQ(r.lo % align, 0);
          // Each part within one alignment step of its weight's share.
          const double want = static_cast<double>(count) * (cum[c + 1] - cum[c]) / cum[nch];
          ASSERT_LE(std::abs(static_cast<double>(r.hi - r.lo) - want), 2.0 * align + 1e-6 * want)
              << count << " channel " << c;
          next = r.hi;
        }
        ASSERT_EQ(next, count);
      }
    }
  }
  // 80% / 20%: a fast link's channel takes four times the slow one's.
  const uint32_t cum[] = {0, 3277, 4096};
  EXPECT_EQ(WeightedChannelRange(4096 * 64, cum, 2, 0, 64).hi, 3277 * 64);
}

// The functions are usable in constant expressions (and so on the device).
static_assert(NumSteps(Coll::kAllReduce, 4) == 7, "constexpr");
static_assert(RingStep(Coll::kAllReduce, 4, 2, 0, 3).prim == Prim::kRecvReduceCopySend, "constexpr");
static_assert(RingStep(Coll::kAllReduce, 4, 2, 0, 3).chunk == 2, "constexpr");
static_assert(ChannelRange(100, 3, 1, 8).lo == 40, "constexpr");
static_assert(ChunkSpan(Coll::kAllReduce, 4, Range{0, 100}, 8, 1, 3, 0, 4).offset == 56, "constexpr");
static_assert(AllReduceChunk(4, Range{0, 10}, 8, 0, 4) == 4, "constexpr");

// The simulator itself catches a broken schedule: a hand-made case where
// the receiver expects a different span must fail.
TEST(ScheduleTest, SimulatorDetectsADeadlockWithOneSlot) {
  Case c;
  c.coll = Coll::kAllReduce;
  c.nranks = 3;
  c.count = 300;
  c.align = 1;
  c.slice = 4;
  c.order = {0, 1, 2};
  c.slots = 1;  // a rank holds its received slot while it waits to send: one slot deadlocks
  auto r = Simulate(c);
  EXPECT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("deadlock"), std::string::npos) << r.message();
}

}  // namespace
}  // namespace ringo::kernels
