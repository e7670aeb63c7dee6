// The fp8 datatypes and premul-sum operators through the collectives, on
// host communicators of 1 to 8 ranks (threads of ringoCommInitAll):
// - fp8 sums, maxima and minima whose partial results are exact;
// - fp8 sums of arbitrary finite values with RINGO_DETERMINISTIC=1 (a chain
//   in rank order) against a reference that adds in fp32 and rounds each
//   partial result to the nearest code, ties to even, saturating, found by
//   searching all 256 codes (not by Ringo's conversion);
// - premul-sum for every kind of datatype, each rank's own scalar, read at
//   creation (ringoScalarHostImmediate) or when each collective runs
//   (ringoScalarDevice), on AllReduce, Reduce and ReduceScatter;
// - the operators' errors.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ringo/ringo.h"
#include "tests/api_test_util.h"
#include "tests/harness.h"
#include "tests/reference.h"

namespace ringo::tests {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kDeadline{120000};

// ---- an fp8 reference from the formats' definitions ----

struct Fp8Ref {
  int mantissa;
  int bias;
  bool ieee;
  double Decode(uint8_t b) const {
    const int e = (b & 0x7f) >> mantissa, m = b & ((1 << mantissa) - 1);
    const int top = (1 << (7 - mantissa)) - 1;
    if ((ieee && e == top) || (!ieee && (b & 0x7f) == 0x7f)) return NAN;
    const double mag = e == 0 ? std::ldexp(m, 1 - bias - mantissa) : std::ldexp(1.0 + m / double(1 << mantissa), e - bias);
    return (b & 0x80) ? -mag : mag;
  }
  uint8_t Max() const { return ieee ? 0x7b : 0x7e; }
  uint8_t Encode(double v) const {
    if (std::isnan(v)) return 0x7f;
    if (std::fabs(v) >= Decode(Max())) return static_cast<uint8_t>((v < 0 ? 0x80 : 0) | Max());
    uint8_t best = v < 0 ? 0x80 : 0;
    double err = std::fabs(v);
    for (int c = 1; c < 128; ++c) {
      const uint8_t b = static_cast<uint8_t>((v < 0 ? 0x80 : 0) | c);
      const double d = Decode(b);
      if (std::isnan(d)) continue;
      const double e = std::fabs(d - v);
      if (e < err || (e == err && (b & 1) == 0)) {
        best = b;
        err = e;
      }
    }
    return best;
  }
};
const Fp8Ref kE4M3{3, 7, false};
const Fp8Ref kE5M2{2, 15, true};

const Fp8Ref& RefOf(ringoDataType_t dt) { return dt == ringoFloat8e4m3 ? kE4M3 : kE5M2; }

// Runs `body(rank, comm)` on every rank of a fresh ringoCommInitAll set.
void OnRanks(int n, const std::function<std::string(int, ringoComm_t)>& body) {
  std::vector<ringoComm_t> comms(n, nullptr);
  ASSERT_EQ(ringoCommInitAll(comms.data(), n, nullptr), ringoSuccess) << ringoGetLastError(nullptr);
  HarnessOptions options;
  options.make_unique_id = false;
  auto results = RunRanks(
      n, RankMode::kThreads, kDeadline, [&](int rank, int, const ringoUniqueId&) { return body(rank, comms[rank]); },
      options);
  EXPECT_ALL_RANKS_OK(results);
  for (ringoComm_t c : comms) ringoCommDestroy(c);
}

std::string Failed(const char* what, ringoComm_t comm) { return std::string(what) + ": " + ringoGetLastError(comm); }

class Fp8Exact : public ::testing::TestWithParam<int> {};

TEST_P(Fp8Exact, SumMaxMinOfSmallValues) {
  const int n = GetParam();
  OnRanks(n, [&](int rank, ringoComm_t comm) -> std::string {
    for (ringoDataType_t dt : {ringoFloat8e4m3, ringoFloat8e5m2}) {
      const Fp8Ref& ref = RefOf(dt);
      for (size_t count : {size_t{1}, size_t{7}, size_t{300}}) {
        std::vector<uint8_t> in(count * n), out(count * n);
        auto value = [&](int r, size_t i) { return static_cast<double>((r + i) % 2); };  // 0 or 1: sums exact
        for (size_t i = 0; i < in.size(); ++i) in[i] = ref.Encode(value(rank, i));
        for (ringoRedOp_t op : {ringoSum, ringoMax, ringoMin}) {
          if (ringoAllReduce(in.data(), out.data(), count, dt, op, comm, nullptr) != ringoSuccess) {
            return Failed("fp8 AllReduce", comm);
          }
          for (size_t i = 0; i < count; ++i) {
            double want = value(0, i);
            for (int r = 1; r < n; ++r) {
              const double v = value(r, i);
              want = op == ringoSum ? want + v : op == ringoMax ? std::max(want, v) : std::min(want, v);
            }
            if (out[i] != ref.Encode(want)) {
              return "fp8 AllReduce element " + std::to_string(i) + ": code " + std::to_string(out[i]) + ", want " +
                     std::to_string(ref.Encode(want));
            }
          }
        }
        if (ringoReduceScatter(in.data(), out.data(), count, dt, ringoSum, comm, nullptr) != ringoSuccess) {
          return Failed("fp8 ReduceScatter", comm);
        }
        for (size_t i = 0; i < count; ++i) {
          double want = 0;
          for (int r = 0; r < n; ++r) want += value(r, rank * count + i);
          if (out[i] != ref.Encode(want)) return "fp8 ReduceScatter element " + std::to_string(i);
        }
      }
    }
    return "";
  });
}

INSTANTIATE_TEST_SUITE_P(Fp8, Fp8Exact, ::testing::Values(1, 2, 3, 4, 8));

class Fp8Rounding : public ::testing::TestWithParam<int> {};

TEST_P(Fp8Rounding, ChainInRankOrderRoundsEveryPartialResult) {
  const int n = GetParam();
  ScopedEnv env({{"RINGO_DETERMINISTIC", "1"}});
  OnRanks(n, [&](int rank, ringoComm_t comm) -> std::string {
    for (ringoDataType_t dt : {ringoFloat8e4m3, ringoFloat8e5m2}) {
      const Fp8Ref& ref = RefOf(dt);
      for (size_t count : {size_t{5}, size_t{4099}}) {
        // Every rank builds every rank's input (same seed), finite codes only.
        std::vector<std::vector<uint8_t>> in(n, std::vector<uint8_t>(count));
        std::mt19937 rng(static_cast<uint32_t>(count * 31 + dt));
        for (int r = 0; r < n; ++r) {
          for (uint8_t& b : in[r]) {
            do {
              b = static_cast<uint8_t>(rng());
            } while (std::isnan(ref.Decode(b)) || std::isinf(ref.Decode(b)));
          }
        }
        std::vector<uint8_t> out(count);
        if (ringoAllReduce(in[rank].data(), out.data(), count, dt, ringoSum, comm, nullptr) != ringoSuccess) {
          return Failed("fp8 AllReduce", comm);
        }
        for (size_t i = 0; i < count; ++i) {
          uint8_t acc = in[0][i];
          for (int r = 1; r < n; ++r) {
            const float sum = static_cast<float>(ref.Decode(acc)) + static_cast<float>(ref.Decode(in[r][i]));
            acc = ref.Encode(sum);
          }
          const bool both_nan = std::isnan(ref.Decode(acc)) && std::isnan(ref.Decode(out[i]));
          if (out[i] != acc && !both_nan) {
            return std::string(dt == ringoFloat8e4m3 ? "e4m3" : "e5m2") + " element " + std::to_string(i) +
                   ": code " + std::to_string(out[i]) + ", want " + std::to_string(acc);
          }
        }
      }
    }
    return "";
  });
}

INSTANTIATE_TEST_SUITE_P(Fp8, Fp8Rounding, ::testing::Values(2, 3, 5));

// ---- premul-sum ----

// Stores v as one element of dt at p (integers, floats, halves, fp8).
void Put(ringoDataType_t dt, void* p, size_t i, double v) {
  switch (dt) {
    case ringoUint8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); break;
    case ringoInt32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
    case ringoInt64: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); break;
    case ringoFloat32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case ringoFloat64: static_cast<double*>(p)[i] = v; break;
    case ringoFloat16: static_cast<uint16_t*>(p)[i] = DoubleToHalfBits(v); break;
    case ringoBfloat16: static_cast<uint16_t*>(p)[i] = DoubleToBf16Bits(v); break;
    default: static_cast<uint8_t*>(p)[i] = RefOf(dt).Encode(v); break;
  }
}

double Get(ringoDataType_t dt, const void* p, size_t i) {
  switch (dt) {
    case ringoUint8: return static_cast<const uint8_t*>(p)[i];
    case ringoInt32: return static_cast<const int32_t*>(p)[i];
    case ringoInt64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case ringoFloat32: return static_cast<const float*>(p)[i];
    case ringoFloat64: return static_cast<const double*>(p)[i];
    case ringoFloat16: return HalfBitsToDouble(static_cast<const uint16_t*>(p)[i]);
    case ringoBfloat16: return Bf16BitsToDouble(static_cast<const uint16_t*>(p)[i]);
    default: return RefOf(dt).Decode(static_cast<const uint8_t*>(p)[i]);
  }
}

class PreMulSum : public ::testing::TestWithParam<int> {};

TEST_P(PreMulSum, EachRankScalesItsOwnInput) {
  const int n = GetParam();
  OnRanks(n, [&](int rank, ringoComm_t comm) -> std::string {
    const ringoDataType_t types[] = {ringoFloat32, ringoFloat64,    ringoFloat16,   ringoBfloat16, ringoInt32,
                                     ringoInt64,   ringoUint8,      ringoFloat8e4m3, ringoFloat8e5m2};
    for (ringoDataType_t dt : types) {
      const size_t elem = DataTypeSize(dt), count = 37;
      // Scalars 1 or 2, inputs 0 or 1 (fp8), else small integers: every partial result is exact.
      const bool fp8 = dt == ringoFloat8e4m3 || dt == ringoFloat8e5m2;
      auto scalar_of = [](int r, int round) { return static_cast<double>(1 + (r + round) % 2); };
      auto input = [&](int r, size_t i) { return static_cast<double>(fp8 ? (r + i) % 2 : (r + i) % 5); };
      for (ringoScalarResidence_t residence : {ringoScalarHostImmediate, ringoScalarDevice}) {
        std::vector<unsigned char> scalar(8);
        Put(dt, scalar.data(), 0, scalar_of(rank, 0));
        ringoRedOp_t op;
        if (ringoRedOpCreatePreMulSum(&op, scalar.data(), dt, residence, comm) != ringoSuccess) {
          return Failed("ringoRedOpCreatePreMulSum", comm);
        }
        for (int round = 0; round < 2; ++round) {
          // A scalar read when the collective runs sees this change; one read at creation does not.
          Put(dt, scalar.data(), 0, scalar_of(rank, round));
          const int used = residence == ringoScalarDevice ? round : 0;
          std::vector<unsigned char> in(count * n * elem), out(count * n * elem);
          for (size_t i = 0; i < count * n; ++i) Put(dt, in.data(), i, input(rank, i));
          auto want = [&](size_t i) {
            double w = 0;
            for (int r = 0; r < n; ++r) w += scalar_of(r, used) * input(r, i);
            return w;
          };
          const std::string what = std::string(DataTypeName(dt)) + (used ? " (scalar read at run time)" : "");
          if (ringoAllReduce(in.data(), out.data(), count, dt, op, comm, nullptr) != ringoSuccess) {
            return Failed(("premul-sum AllReduce " + what).c_str(), comm);
          }
          for (size_t i = 0; i < count; ++i) {
            if (Get(dt, out.data(), i) != want(i)) {
              return "premul-sum AllReduce " + what + " element " + std::to_string(i) + ": " +
                     std::to_string(Get(dt, out.data(), i)) + ", want " + std::to_string(want(i));
            }
          }
          if (ringoReduce(in.data(), out.data(), count, dt, op, n - 1, comm, nullptr) != ringoSuccess) {
            return Failed(("premul-sum Reduce " + what).c_str(), comm);
          }
          if (rank == n - 1 && Get(dt, out.data(), count - 1) != want(count - 1)) return "premul-sum Reduce " + what;
          if (ringoReduceScatter(in.data(), out.data(), count, dt, op, comm, nullptr) != ringoSuccess) {
            return Failed(("premul-sum ReduceScatter " + what).c_str(), comm);
          }
          if (Get(dt, out.data(), 3) != want(rank * count + 3)) return "premul-sum ReduceScatter " + what;
        }
        if (ringoRedOpDestroy(op, comm) != ringoSuccess) return Failed("ringoRedOpDestroy", comm);
      }
    }
    return "";
  });
}

INSTANTIATE_TEST_SUITE_P(Ops, PreMulSum, ::testing::Values(1, 2, 3, 4));

TEST(PreMulSumErrors, WrongDatatypeDestroyedAndBuiltInOperators) {
  std::vector<ringoComm_t> comms = MakeHostComms(1);
  ASSERT_EQ(comms.size(), 1u);
  float scalar = 2.0f, x = 1.0f, y = 0.0f;
  ringoRedOp_t op;
  ASSERT_EQ(ringoRedOpCreatePreMulSum(&op, &scalar, ringoFloat32, ringoScalarHostImmediate, comms[0]), ringoSuccess);
  EXPECT_EQ(static_cast<int>(op), 5);
  EXPECT_EQ(ringoAllReduce(&x, &y, 1, ringoFloat32, op, comms[0], nullptr), ringoSuccess);
  EXPECT_EQ(y, 2.0f);
  EXPECT_TRUE(FailsWith(ringoAllReduce(&x, &y, 1, ringoFloat64, op, comms[0], nullptr), ringoInvalidArgument,
                        comms[0], {"datatype"}));
  EXPECT_TRUE(FailsWith(ringoRedOpDestroy(ringoSum, comms[0]), ringoInvalidArgument, comms[0], {"built in"}));
  EXPECT_EQ(ringoRedOpDestroy(op, comms[0]), ringoSuccess);
  EXPECT_TRUE(FailsWith(ringoAllReduce(&x, &y, 1, ringoFloat32, op, comms[0], nullptr), ringoInvalidArgument,
                        comms[0], {"ringoredopcreatepremulsum"}));
  EXPECT_TRUE(FailsWith(ringoRedOpCreatePreMulSum(&op, nullptr, ringoFloat32, ringoScalarHostImmediate, comms[0]),
                        ringoInvalidArgument, comms[0], {"scalar"}));
  DestroyComms(comms);
}

}  // namespace
}  // namespace ringo::tests
