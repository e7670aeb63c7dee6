// Counts and bus factors as nccl-tests defines them, and the verification
// data: a reduction done in the element type, in any rank order, must match
// the expectation exactly (avg on floats within tolerance), and anything the
// collective failed to write must not.
#include "tools/perf/verify.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "base/device/half.h"

namespace ringo::perf {
namespace {

using base::DataType;
using base::RedOp;

TEST(ComputeCounts, MatchesNcclTests) {
  const CollCounts ar = ComputeCounts(Collective::kAllReduce, 1000, 4, 4);
  EXPECT_EQ(ar.param_count, 250u);
  EXPECT_EQ(ar.Bytes(4), 1000u);

  const CollCounts rs = ComputeCounts(Collective::kReduceScatter, 1000, 4, 4);
  EXPECT_EQ(rs.recv_count, 62u);
  EXPECT_EQ(rs.send_count, 248u);
  EXPECT_EQ(rs.param_count, 62u);
  EXPECT_EQ(rs.recv_inplace_offset, 62u);
  EXPECT_EQ(rs.Bytes(4), 992u);

  const CollCounts ag = ComputeCounts(Collective::kAllGather, 1000, 4, 4);
  EXPECT_EQ(ag.send_count, 62u);
  EXPECT_EQ(ag.recv_count, 248u);
  EXPECT_EQ(ag.param_count, 62u);
  EXPECT_EQ(ag.send_inplace_offset, 62u);
  EXPECT_EQ(ag.Bytes(4), 992u);

  const CollCounts bc = ComputeCounts(Collective::kBroadcast, 7, 2, 3);
  EXPECT_EQ(bc.param_count, 3u);
  EXPECT_EQ(bc.Bytes(2), 6u);
  EXPECT_EQ(ComputeCounts(Collective::kAllGather, 8, 4, 4).Bytes(4), 0u);
}

TEST(BusFactor, RingTraffic) {
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kBroadcast, 4), 1.0);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kReduce, 4), 1.0);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kAllReduce, 1), 0.0);
}

// Element arithmetic as a reducing kernel does it: 16-bit floats in float,
// each partial result stored back in the element type.
template <typename T>
double ToF(T v) {
  if constexpr (std::is_same_v<T, base::Half> || std::is_same_v<T, base::BFloat16>) {
    return v.ToFloat();
  } else {
    return static_cast<double>(v);
  }
}
template <typename T>
T FromF(double v) {
  if constexpr (std::is_same_v<T, base::Half> || std::is_same_v<T, base::BFloat16>) {
    return T::FromFloat(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
T Combine(RedOp op, T a, T b) {
  const double x = ToF(a), y = ToF(b);
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg: return FromF<T>(x + y);
    case RedOp::kProd: return FromF<T>(x * y);
    case RedOp::kMax: return FromF<T>(std::max(x, y));
    case RedOp::kMin: return FromF<T>(std::min(x, y));
    case RedOp::kPreMulSum: break;  // not measured by ringo-perf
  }
  return a;
}

template <typename T>
constexpr bool kIsFloat = !std::is_integral_v<T>;

// All-reduces the inputs of `nranks` Patterns, combining ranks in `order`.
template <typename T>
std::vector<T> ReduceInType(DataType type, RedOp op, int nranks, size_t count,
                            const std::vector<int>& order) {
  const CollCounts counts =
      ComputeCounts(Collective::kAllReduce, count * sizeof(T), sizeof(T), nranks);
  std::vector<std::vector<T>> in(nranks, std::vector<T>(count));
  for (int r = 0; r < nranks; ++r) {
    Pattern p(Collective::kAllReduce, op, type, r, nranks, 0, counts);
    FillInput(type, p, 0, count, in[r].data());
    if (op == RedOp::kAvg && kIsFloat<T>) {  // ringo.h: floats are scaled before the sum
      using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
      for (T& v : in[r]) v = FromF<T>(static_cast<Acc>(ToF(v)) * (Acc{1} / nranks));
    }
  }
  std::vector<T> out = in[order[0]];
  for (size_t k = 1; k < order.size(); ++k) {
    for (size_t i = 0; i < count; ++i) out[i] = Combine(op, out[i], in[order[k]][i]);
  }
  if constexpr (!kIsFloat<T>) {
    if (op == RedOp::kAvg) {
      for (T& v : out) v = static_cast<T>(v / nranks);
    }
  }
  return out;
}

template <typename T>
void ExpectExactInAnyOrder(DataType type) {
  constexpr size_t kCount = 1000;
  for (int nranks : {1, 2, 3, 4, 7, 8, 16, 64}) {
    std::vector<int> forward(nranks), backward(nranks);
    for (int r = 0; r < nranks; ++r) forward[r] = backward[nranks - 1 - r] = r;
    for (RedOp op : {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg}) {
      const CollCounts counts =
          ComputeCounts(Collective::kAllReduce, kCount * sizeof(T), sizeof(T), nranks);
      const Pattern p(Collective::kAllReduce, op, type, 0, nranks, 0, counts);
      for (const auto& order : {forward, backward}) {
        std::vector<T> out = ReduceInType<T>(type, op, nranks, kCount, order);
        EXPECT_EQ(CountWrong(type, p, 0, kCount, out.data()), 0)
            << base::DataTypeName(type) << " " << base::RedOpName(op) << " n=" << nranks;
        // One element off by one unit, and the poison, are caught.
        out[17] = FromF<T>(ToF(out[17]) + 1);
        EXPECT_EQ(CountWrong(type, p, 0, kCount, out.data()), 1);
        std::memset(out.data(), kPoisonByte, kCount * sizeof(T));
        EXPECT_EQ(CountWrong(type, p, 0, kCount, out.data()), int64_t{kCount});
      }
    }
  }
}

TEST(Pattern, ReductionsAreExactInEveryType) {
  ExpectExactInAnyOrder<int8_t>(DataType::kInt8);
  ExpectExactInAnyOrder<uint8_t>(DataType::kUint8);
  ExpectExactInAnyOrder<int32_t>(DataType::kInt32);
  ExpectExactInAnyOrder<uint32_t>(DataType::kUint32);
  ExpectExactInAnyOrder<int64_t>(DataType::kInt64);
  ExpectExactInAnyOrder<uint64_t>(DataType::kUint64);
  ExpectExactInAnyOrder<base::Half>(DataType::kFloat16);
  ExpectExactInAnyOrder<float>(DataType::kFloat32);
  ExpectExactInAnyOrder<double>(DataType::kFloat64);
  ExpectExactInAnyOrder<base::BFloat16>(DataType::kBFloat16);
}

// FillInput and CountWrong repeat one period; they must agree with Input and
// Expected element by element, from any first index and across allgather blocks.
TEST(Pattern, PeriodicFillAndCheckMatchEveryElement) {
  const int n = 5;
  for (Collective c : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                       Collective::kBroadcast}) {
    for (RedOp op : {RedOp::kSum, RedOp::kProd, RedOp::kMin}) {
      const CollCounts counts = ComputeCounts(c, 4 * 1003, 4, n);
      const Pattern p(c, op, DataType::kInt32, 3, n, 1, counts);
      const size_t first = 37, count = counts.recv_count - first;
      std::vector<int32_t> filled(count), expected(count);
      FillInput(DataType::kInt32, p, first, count, filled.data());
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(filled[i], static_cast<int32_t>(p.Input(first + i))) << i;
        expected[i] = static_cast<int32_t>(p.Expected(first + i));
      }
      EXPECT_EQ(CountWrong(DataType::kInt32, p, first, count, expected.data()), 0);
      expected[count - 1] += 1;
      EXPECT_EQ(CountWrong(DataType::kInt32, p, first, count, expected.data()), 1);
    }
  }
}

TEST(Pattern, InputsVaryWithRankAndIndex) {
  const CollCounts counts = ComputeCounts(Collective::kAllReduce, 4096, 4, 4);
  for (RedOp op : {RedOp::kSum, RedOp::kProd, RedOp::kMax}) {
    const Pattern p0(Collective::kAllReduce, op, DataType::kFloat32, 0, 4, 0, counts);
    const Pattern p1(Collective::kAllReduce, op, DataType::kFloat32, 1, 4, 0, counts);
    int differ_by_rank = 0, differ_by_index = 0;
    for (size_t g = 0; g < 64; ++g) {
      differ_by_rank += p0.Input(g) != p1.Input(g);
      differ_by_index += p0.Input(g) != p0.Input(g + 1);
    }
    EXPECT_GT(differ_by_rank, 16) << base::RedOpName(op);
    EXPECT_GT(differ_by_index, 16) << base::RedOpName(op);
  }
}

TEST(Pattern, AllGatherOutputIsEveryRanksInput) {
  const int n = 3;
  const CollCounts counts = ComputeCounts(Collective::kAllGather, 40, 4, n);  // 3 per rank
  std::vector<float> gathered(counts.recv_count);
  for (int r = 0; r < n; ++r) {
    const Pattern p(Collective::kAllGather, RedOp::kSum, DataType::kFloat32, r, n, 0, counts);
    EXPECT_TRUE(p.HasInput());
    EXPECT_EQ(p.InputFirst(), r * counts.send_count);
    FillInput(DataType::kFloat32, p, p.InputFirst(), counts.send_count,
              gathered.data() + p.InputFirst());
  }
  for (int r = 0; r < n; ++r) {
    const Pattern p(Collective::kAllGather, RedOp::kSum, DataType::kFloat32, r, n, 0, counts);
    EXPECT_EQ(p.OutputFirst(), 0u);
    EXPECT_EQ(CountWrong(DataType::kFloat32, p, 0, counts.recv_count, gathered.data()), 0);
  }
}

// Every rank's sendrecv input, shifted one rank on, is every rank's expected output.
TEST(Pattern, SendRecvOutputIsThePreviousRanksInput) {
  const int n = 3;
  const CollCounts counts = ComputeCounts(Collective::kSendRecv, 4 * 500, 4, n);
  std::vector<std::vector<int32_t>> in(n, std::vector<int32_t>(counts.send_count));
  for (int r = 0; r < n; ++r) {
    const Pattern p(Collective::kSendRecv, RedOp::kSum, DataType::kInt32, r, n, 0, counts);
    FillInput(DataType::kInt32, p, p.InputFirst(), counts.send_count, in[r].data());
  }
  for (int r = 0; r < n; ++r) {
    const Pattern p(Collective::kSendRecv, RedOp::kSum, DataType::kInt32, r, n, 0, counts);
    EXPECT_EQ(CountWrong(DataType::kInt32, p, 0, counts.recv_count, in[(r + n - 1) % n].data()), 0);
    EXPECT_GT(CountWrong(DataType::kInt32, p, 0, counts.recv_count, in[r].data()), 0);
  }
}

// Block p of rank r's input lands as block r of rank p's output.
TEST(Pattern, AllToAllOutputIsEveryRanksBlock) {
  const int n = 4;
  const CollCounts counts = ComputeCounts(Collective::kAllToAll, 8 * 4 * 250, 8, n);  // 250 per block
  std::vector<std::vector<double>> in(n, std::vector<double>(counts.send_count));
  for (int r = 0; r < n; ++r) {
    const Pattern p(Collective::kAllToAll, RedOp::kSum, DataType::kFloat64, r, n, 0, counts);
    FillInput(DataType::kFloat64, p, 0, counts.send_count, in[r].data());
  }
  const size_t b = counts.param_count;
  for (int r = 0; r < n; ++r) {
    std::vector<double> out(counts.recv_count);
    for (int q = 0; q < n; ++q) {
      for (size_t k = 0; k < b; ++k) out[q * b + k] = in[q][r * b + k];
    }
    const Pattern p(Collective::kAllToAll, RedOp::kSum, DataType::kFloat64, r, n, 0, counts);
    EXPECT_EQ(CountWrong(DataType::kFloat64, p, 0, counts.recv_count, out.data()), 0) << "rank " << r;
    out[b + 3] += 1;
    EXPECT_EQ(CountWrong(DataType::kFloat64, p, 0, counts.recv_count, out.data()), 1);
  }
}

TEST(Pattern, ReduceScatterChecksThisRanksBlock) {
  const CollCounts counts = ComputeCounts(Collective::kReduceScatter, 64, 4, 4);  // 4 per rank
  const Pattern p(Collective::kReduceScatter, RedOp::kMax, DataType::kFloat32, 2, 4, 0, counts);
  EXPECT_EQ(p.OutputFirst(), 8u);
  std::vector<float> block(counts.recv_count);
  for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<float>(p.Expected(8 + i));
  EXPECT_EQ(CountWrong(DataType::kFloat32, p, 8, block.size(), block.data()), 0);
  EXPECT_EQ(CountWrong(DataType::kFloat32, p, 0, block.size(), block.data()), 4);
}

TEST(Pattern, BroadcastAndReduceRoots) {
  const CollCounts counts = ComputeCounts(Collective::kBroadcast, 32, 1, 4);
  const Pattern root(Collective::kBroadcast, RedOp::kSum, DataType::kUint8, 1, 4, 1, counts);
  const Pattern other(Collective::kBroadcast, RedOp::kSum, DataType::kUint8, 2, 4, 1, counts);
  EXPECT_TRUE(root.HasInput());
  EXPECT_FALSE(other.HasInput());
  EXPECT_TRUE(other.HasOutput());
  for (size_t g = 0; g < 32; ++g) EXPECT_EQ(other.Expected(g), root.Input(g));

  const Pattern reduce_other(Collective::kReduce, RedOp::kSum, DataType::kUint8, 2, 4, 1, counts);
  EXPECT_TRUE(reduce_other.HasInput());
  EXPECT_FALSE(reduce_other.HasOutput());
}

}  // namespace
}  // namespace ringo::perf
