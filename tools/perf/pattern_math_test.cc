// The per-element arithmetic the device kernels run (pattern_math.h:
// InputValue, IsWrongElement, compiled here for the host) against the host
// verifier (verify.h: FillInput, CountWrong, which compute one period and
// repeat it): the same inputs byte for byte, and the same #wrong on correct,
// corrupted and poisoned results, for every collective, op and datatype.
#include "tools/perf/pattern_math.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tools/perf/collective.h"
#include "tools/perf/verify.h"

namespace ringo::perf {
namespace {

using base::DataType;
using base::RedOp;

constexpr Collective kCollectives[] = {Collective::kAllReduce, Collective::kReduceScatter,
                                       Collective::kAllGather, Collective::kBroadcast,
                                       Collective::kReduce};
constexpr RedOp kOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg};

struct Case {
  Collective coll;
  RedOp op;
  DataType type;
  int rank;
  int nranks;
  size_t bytes;

  std::string Name() const {
    return std::string(CollectiveName(coll)) + " " + base::RedOpName(op) + " " +
           base::DataTypeName(type) + " rank " + std::to_string(rank) + "/" +
           std::to_string(nranks) + " " + std::to_string(bytes) + " B";
  }
};

std::vector<Case> Sweep() {
  std::vector<Case> cases;
  for (Collective c : kCollectives) {
    for (RedOp op : kOps) {
      if (!HasOp(c) && op != RedOp::kSum) continue;
      for (int t = 0; t < kPerfDataTypes; ++t) {
        for (int nranks : {1, 2, 3, 8}) {
          // More than one period of every op (101 elements for owned data,
          // 64 for products), odd sizes and allgather blocks.
          for (size_t bytes : {size_t{0}, size_t{8}, size_t{1000}, size_t{4104}}) {
            cases.push_back({c, op, static_cast<DataType>(t), nranks - 1, nranks, bytes});
            if (nranks > 2) cases.push_back({c, op, static_cast<DataType>(t), 1, nranks, bytes});
          }
        }
      }
    }
  }
  return cases;
}

TEST(PatternMath, DeviceInputsEqualTheHostFill) {
  for (const Case& k : Sweep()) {
    const size_t ts = base::DataTypeSize(k.type);
    const CollCounts counts = ComputeCounts(k.coll, k.bytes, ts, k.nranks);
    const Pattern pattern(k.coll, k.op, k.type, k.rank, k.nranks, 0, counts);
    if (!pattern.HasInput()) continue;
    const size_t n = counts.send_count;
    std::vector<char> host(n * ts + 1), device(n * ts + 1);
    FillInput(k.type, pattern, pattern.InputFirst(), n, host.data());
    WithDataType(k.type, [&](auto zero) {
      using T = decltype(zero);
      for (size_t i = 0; i < n; ++i) {
        const T v = FromDouble<T>(InputValue(pattern.spec(), pattern.InputFirst() + i));
        std::memcpy(device.data() + i * ts, &v, ts);
      }
    });
    ASSERT_EQ(std::memcmp(host.data(), device.data(), n * ts), 0) << k.Name();
  }
}

// Results as a correct collective leaves them, then with every 7th element
// off by one and every 11th poisoned (never written).
TEST(PatternMath, DeviceCheckCountsWhatTheHostCounts) {
  int64_t corrupted_cases = 0;
  for (const Case& k : Sweep()) {
    const size_t ts = base::DataTypeSize(k.type);
    const CollCounts counts = ComputeCounts(k.coll, k.bytes, ts, k.nranks);
    const Pattern pattern(k.coll, k.op, k.type, k.rank, k.nranks, 0, counts);
    if (!pattern.HasOutput()) continue;
    const size_t n = counts.recv_count;
    const uint64_t first = pattern.OutputFirst();
    WithDataType(k.type, [&](auto zero) {
      using T = decltype(zero);
      std::vector<T> got(n);
      for (size_t i = 0; i < n; ++i)
        got[i] = FromDouble<T>(ExpectedValue(pattern.spec(), first + i));
      const auto device_count = [&] {
        int64_t wrong = 0;
        for (size_t i = 0; i < n; ++i)
          wrong += IsWrongElement<T>(pattern.spec(), first + i, got[i]);
        return wrong;
      };
      EXPECT_EQ(CountWrong(k.type, pattern, first, n, got.data()), 0) << k.Name();
      EXPECT_EQ(device_count(), 0) << k.Name();

      int64_t spoiled = 0;
      for (size_t i = 0; i < n; ++i) {
        if (i % 11 == 5) {
          std::memset(&got[i], kPoisonByte, ts);
          ++spoiled;
        } else if (i % 7 == 3) {
          got[i] = FromDouble<T>(ExpectedValue(pattern.spec(), first + i) + 1);
          ++spoiled;
        }
      }
      const int64_t host_wrong = CountWrong(k.type, pattern, first, n, got.data());
      EXPECT_EQ(device_count(), host_wrong) << k.Name();
      EXPECT_EQ(host_wrong, spoiled) << k.Name();
      if (spoiled > 0) ++corrupted_cases;
    });
  }
  EXPECT_GT(corrupted_cases, 100);
}

TEST(PatternMath, SpecDescribesThePattern) {
  const CollCounts counts = ComputeCounts(Collective::kAllGather, 4096, 4, 4);
  const Pattern ag(Collective::kAllGather, RedOp::kSum, DataType::kFloat32, 2, 4, 0, counts);
  EXPECT_EQ(ag.spec().source, PatternSource::kAllGather);
  EXPECT_EQ(ag.spec().block_count, counts.send_count);
  EXPECT_EQ(ag.spec().rank, 2);
  const Pattern bc(Collective::kBroadcast, RedOp::kSum, DataType::kInt8, 1, 3, 2, counts);
  EXPECT_EQ(bc.spec().source, PatternSource::kBroadcast);
  EXPECT_EQ(bc.spec().root, 2);
  const Pattern rs(Collective::kReduceScatter, RedOp::kAvg, DataType::kFloat16, 0, 8, 0, counts);
  EXPECT_EQ(rs.spec().source, PatternSource::kReduce);
  EXPECT_EQ(rs.spec().sum_modulus, SumModulus(8));
  EXPECT_EQ(SumModulus(1), 16u);  // 120 / 1 clamped to 15, plus one
  EXPECT_EQ(SumModulus(8), 16u);
  EXPECT_EQ(SumModulus(16), 8u);
  EXPECT_EQ(SumModulus(200), 2u);
}

}  // namespace
}  // namespace ringo::perf
