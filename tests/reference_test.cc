// Tests of the test oracle itself: a wrong reference would make the
// conformance suite pass wrong results or fail right ones.
#include "tests/reference.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace ringo::tests {
namespace {

TEST(HalfConversion, KnownValues) {
  EXPECT_EQ(DoubleToHalfBits(0.0), 0x0000);
  EXPECT_EQ(DoubleToHalfBits(-0.0), 0x8000);
  EXPECT_EQ(DoubleToHalfBits(1.0), 0x3C00);
  EXPECT_EQ(DoubleToHalfBits(-2.0), 0xC000);
  EXPECT_EQ(DoubleToHalfBits(0.1), 0x2E66);
  EXPECT_EQ(DoubleToHalfBits(65504.0), 0x7BFF);  // largest finite
  EXPECT_EQ(DoubleToHalfBits(65519.0), 0x7BFF);  // below the midpoint to 65536
  EXPECT_EQ(DoubleToHalfBits(65520.0), 0x7C00);  // the midpoint rounds to even: infinity
  EXPECT_EQ(DoubleToHalfBits(INFINITY), 0x7C00);
  EXPECT_EQ(DoubleToHalfBits(std::ldexp(1.0, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(DoubleToHalfBits(std::ldexp(1.0, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(DoubleToHalfBits(std::ldexp(1.0, -25)), 0x0000);  // tie to even: 0
  EXPECT_EQ(DoubleToHalfBits(std::ldexp(3.0, -25)), 0x0002);  // tie to even: 2 units
  // Ties between representable integers above 2048 (spacing 2) go to even.
  EXPECT_EQ(DoubleToHalfBits(2049.0), DoubleToHalfBits(2048.0));
  EXPECT_EQ(DoubleToHalfBits(2051.0), DoubleToHalfBits(2052.0));
  EXPECT_TRUE(std::isnan(HalfBitsToDouble(DoubleToHalfBits(NAN))));
}

TEST(HalfConversion, RoundTripsEveryFiniteValue) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const uint16_t b = static_cast<uint16_t>(bits);
    if ((b & 0x7C00) == 0x7C00) continue;  // inf and NaN
    ASSERT_EQ(DoubleToHalfBits(HalfBitsToDouble(b)), b) << std::hex << bits;
  }
}

#ifdef __FLT16_MAX__
// GCC's _Float16 converts with round-to-nearest-even: an independent check.
TEST(HalfConversion, MatchesCompilerFloat16) {
  uint64_t x = 12345;
  for (int i = 0; i < 200000; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    uint32_t fbits = static_cast<uint32_t>(x >> 32);
    float f;
    std::memcpy(&f, &fbits, 4);
    if (std::isnan(f)) continue;
    _Float16 h = static_cast<_Float16>(f);
    uint16_t want;
    std::memcpy(&want, &h, 2);
    ASSERT_EQ(DoubleToHalfBits(f), want) << f;
  }
}
#endif

TEST(Bf16Conversion, KnownValues) {
  EXPECT_EQ(DoubleToBf16Bits(1.0), 0x3F80);
  EXPECT_EQ(DoubleToBf16Bits(3.0), 0x4040);
  EXPECT_EQ(DoubleToBf16Bits(-0.5), 0xBF00);
  // 257 lies halfway between 256 and 258 (spacing 2): ties to even (256).
  EXPECT_EQ(DoubleToBf16Bits(257.0), DoubleToBf16Bits(256.0));
  EXPECT_EQ(DoubleToBf16Bits(259.0), DoubleToBf16Bits(260.0));
  EXPECT_EQ(Bf16BitsToDouble(0x3F80), 1.0);
  EXPECT_EQ(DoubleToBf16Bits(INFINITY), 0x7F80);
}

// bfloat16 is the top half of a float, rounded to nearest even: compare with
// the usual bit trick on random finite floats.
TEST(Bf16Conversion, MatchesFloatBitRounding) {
  uint64_t x = 987654321;
  for (int i = 0; i < 200000; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    uint32_t fbits = static_cast<uint32_t>(x >> 32);
    float f;
    std::memcpy(&f, &fbits, 4);
    if (!std::isfinite(f)) continue;
    uint32_t rounded = fbits + 0x7FFF + ((fbits >> 16) & 1);
    uint16_t want = static_cast<uint16_t>(rounded >> 16);
    if ((want & 0x7F80) == 0x7F80) want &= 0xFF80;  // rounded up to infinity
    ASSERT_EQ(DoubleToBf16Bits(f), want) << f;
  }
}

TEST(Reference, IntegerSumWrapsLikeTheType) {
  const int n = 5;
  const size_t count = 1000;
  ReducedReference ref = ReduceInputs(ringoInt8, ringoSum, 7, n, count);
  std::vector<std::vector<int8_t>> in(n, std::vector<int8_t>(count));
  for (int r = 0; r < n; ++r) FillInput(ringoInt8, ringoSum, 7, r, in[r].data(), count);
  bool wrapped = false;
  for (size_t i = 0; i < count; ++i) {
    int wide = 0;
    int8_t acc = 0;
    for (int r = 0; r < n; ++r) {
      wide += in[r][i];
      acc = static_cast<int8_t>(acc + in[r][i]);
    }
    wrapped = wrapped || wide != acc;
    ASSERT_EQ(static_cast<int8_t>(ref.bytes[i]), acc) << i;
  }
  EXPECT_TRUE(wrapped) << "inputs should exercise wrap-around";
}

TEST(Reference, IntegerAvgTruncatesTowardZeroWithoutOverflow) {
  for (int n : {1, 3, 7, 8}) {
    const size_t count = 500;
    ReducedReference ref = ReduceInputs(ringoInt8, ringoAvg, 3, n, count);
    std::vector<std::vector<int8_t>> in(n, std::vector<int8_t>(count));
    for (int r = 0; r < n; ++r) FillInput(ringoInt8, ringoAvg, 3, r, in[r].data(), count);
    for (size_t i = 0; i < count; ++i) {
      int sum = 0;
      for (int r = 0; r < n; ++r) sum += in[r][i];
      ASSERT_GE(sum, -128);
      ASSERT_LE(sum, 127);
      ASSERT_EQ(static_cast<int8_t>(ref.bytes[i]), sum / n) << "n=" << n << " i=" << i;
    }
  }
}

TEST(Reference, UnsignedMaxMinCompareUnsigned) {
  const int n = 4;
  const size_t count = 300;
  ReducedReference mx = ReduceInputs(ringoUint64, ringoMax, 9, n, count);
  ReducedReference mn = ReduceInputs(ringoUint64, ringoMin, 9, n, count);
  std::vector<std::vector<uint64_t>> in(n, std::vector<uint64_t>(count));
  for (int r = 0; r < n; ++r) FillInput(ringoUint64, ringoMax, 9, r, in[r].data(), count);
  for (size_t i = 0; i < count; ++i) {
    uint64_t hi = 0, lo = UINT64_MAX;
    for (int r = 0; r < n; ++r) {
      hi = std::max(hi, in[r][i]);
      lo = std::min(lo, in[r][i]);
    }
    ASSERT_EQ(ReadInt(ringoUint64, mx.bytes.data(), i), hi);
    ASSERT_EQ(ReadInt(ringoUint64, mn.bytes.data(), i), lo);
  }
}

// Float sums of the chosen inputs are exact in every float type, so the
// reference holds the exact value and a tolerance of 0 is right.
TEST(Reference, FloatSumInputsAreExactInHalf) {
  const int n = 8;
  const size_t count = 2000;
  ReducedReference ref = ReduceInputs(ringoFloat16, ringoSum, 11, n, count);
  std::vector<std::vector<uint16_t>> in(n, std::vector<uint16_t>(count));
  for (int r = 0; r < n; ++r) FillInput(ringoFloat16, ringoSum, 11, r, in[r].data(), count);
  for (size_t i = 0; i < count; ++i) {
    double sum = 0;
    for (int r = 0; r < n; ++r) {
      sum += HalfBitsToDouble(in[r][i]);
      // Every partial sum is representable, whatever the order.
      ASSERT_EQ(HalfBitsToDouble(DoubleToHalfBits(sum)), sum);
    }
    ASSERT_EQ(ReadFloat(ringoFloat16, ref.bytes.data(), i), sum);
  }
}

TEST(Reference, FloatAvgToleranceAcceptsTypeArithmetic) {
  // Emulate Ringo's float avg in float16: x * (1/n) rounded, then summed
  // with a rounding after each addition; the reference must accept it.
  const int n = 7;
  const size_t count = 2000;
  ReducedReference ref = ReduceInputs(ringoFloat16, ringoAvg, 5, n, count);
  std::vector<std::vector<uint16_t>> in(n, std::vector<uint16_t>(count));
  for (int r = 0; r < n; ++r) FillInput(ringoFloat16, ringoAvg, 5, r, in[r].data(), count);
  auto h = [](double v) { return HalfBitsToDouble(DoubleToHalfBits(v)); };
  const double inv = h(1.0 / n);
  std::vector<uint16_t> got(count);
  for (size_t i = 0; i < count; ++i) {
    double acc = 0;
    for (int r = 0; r < n; ++r) acc = h(acc + h(HalfBitsToDouble(in[r][i]) * inv));
    got[i] = DoubleToHalfBits(acc);
  }
  EXPECT_EQ(CompareToReference(ringoFloat16, got.data(), count, ref, 0), "");
  // And it rejects a result that is off by much more than rounding.
  got[17] = DoubleToHalfBits(HalfBitsToDouble(got[17]) + 0.5);
  EXPECT_NE(CompareToReference(ringoFloat16, got.data(), count, ref, 0), "");
}

TEST(Reference, InputsDependOnRankAndIndex) {
  std::vector<float> a(64), b(64);
  FillInput(ringoFloat32, ringoMax, 1, 0, a.data(), a.size());
  FillInput(ringoFloat32, ringoMax, 1, 1, b.data(), b.size());
  EXPECT_NE(a, b);
  int distinct = 0;
  for (size_t i = 1; i < a.size(); ++i) distinct += a[i] != a[0];
  EXPECT_GT(distinct, 50);
}

}  // namespace
}  // namespace ringo::tests
