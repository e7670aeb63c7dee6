// ReduceFunc for every datatype x op: integer wrap-around, max/min, avg
// (premultiplied for floats, sum-then-truncating-divide for integers),
// fp16/bf16 combined in fp32 and rounded to nearest even. A chain of
// Pre/Apply/Partial/Post calls as the ring runs them is compared with a
// reference computed independently (wider integers, double, the conversion
// functions).
#include "kernels/reduce_op.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "base/device/dtype.h"
#include "base/device/half.h"
#include "gtest/gtest.h"

namespace ringo::kernels {
namespace {

using base::BFloat16;
using base::DataType;
using base::Half;
using base::RedOp;

template <typename T, RedOp kOp>
T Combine(T a, T b, int nranks = 2) {
  auto f = ReduceFunc<T, kOp>::Make(nranks);
  return f.Partial(f.Apply(ToAcc(a), ToAcc(b)));
}

// ------------------------------------------------------------- integers ----

TEST(ReduceOpTest, IntegerSumWrapsAround) {
  EXPECT_EQ((Combine<int8_t, RedOp::kSum>(100, 100)), -56);
  EXPECT_EQ((Combine<int8_t, RedOp::kSum>(-100, -100)), 56);
  EXPECT_EQ((Combine<int8_t, RedOp::kSum>(127, 1)), -128);
  EXPECT_EQ((Combine<uint8_t, RedOp::kSum>(200, 100)), 44);
  EXPECT_EQ((Combine<uint8_t, RedOp::kSum>(255, 1)), 0);
  EXPECT_EQ((Combine<int32_t, RedOp::kSum>(std::numeric_limits<int32_t>::max(), 1)),
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ((Combine<int32_t, RedOp::kSum>(std::numeric_limits<int32_t>::min(), -1)),
            std::numeric_limits<int32_t>::max());
  EXPECT_EQ((Combine<uint32_t, RedOp::kSum>(0xffffffffu, 2u)), 1u);
  EXPECT_EQ((Combine<int64_t, RedOp::kSum>(std::numeric_limits<int64_t>::max(), 1)),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ((Combine<uint64_t, RedOp::kSum>(~uint64_t{0}, ~uint64_t{0})), ~uint64_t{0} - 1);
  EXPECT_EQ((Combine<int32_t, RedOp::kSum>(-5, 3)), -2);
}

TEST(ReduceOpTest, IntegerProdWrapsAround) {
  EXPECT_EQ((Combine<uint8_t, RedOp::kProd>(200, 2)), 144);
  EXPECT_EQ((Combine<uint8_t, RedOp::kProd>(255, 255)), 1);
  EXPECT_EQ((Combine<uint8_t, RedOp::kProd>(16, 16)), 0);
  EXPECT_EQ((Combine<int8_t, RedOp::kProd>(-128, -1)), -128);
  EXPECT_EQ((Combine<int8_t, RedOp::kProd>(16, 8)), -128);
  EXPECT_EQ((Combine<int8_t, RedOp::kProd>(-3, 5)), -15);
  EXPECT_EQ((Combine<int8_t, RedOp::kProd>(100, 3)), 44);  // 300 - 256
  EXPECT_EQ((Combine<int32_t, RedOp::kProd>(65536, 65536)), 0);
  EXPECT_EQ((Combine<int32_t, RedOp::kProd>(std::numeric_limits<int32_t>::min(), -1)),
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ((Combine<int32_t, RedOp::kProd>(-46341, 46341)), -2147488281LL + 4294967296LL);
  EXPECT_EQ((Combine<uint32_t, RedOp::kProd>(0xffffffffu, 0xffffffffu)), 1u);
  EXPECT_EQ((Combine<uint32_t, RedOp::kProd>(0x10000u, 0x10001u)), 0x10000u);
  EXPECT_EQ((Combine<int64_t, RedOp::kProd>(std::numeric_limits<int64_t>::min(), -1)),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ((Combine<int64_t, RedOp::kProd>(int64_t{1} << 32, int64_t{1} << 32)), 0);
  EXPECT_EQ((Combine<uint64_t, RedOp::kProd>(~uint64_t{0}, ~uint64_t{0})), 1u);
  EXPECT_EQ((Combine<uint64_t, RedOp::kProd>(3, 0x5555555555555556ull)), 2u);
}

TEST(ReduceOpTest, IntegerMaxMin) {
  EXPECT_EQ((Combine<int8_t, RedOp::kMax>(-128, 127)), 127);
  EXPECT_EQ((Combine<int8_t, RedOp::kMin>(-128, 127)), -128);
  EXPECT_EQ((Combine<int8_t, RedOp::kMax>(-5, -7)), -5);
  EXPECT_EQ((Combine<uint8_t, RedOp::kMax>(0, 255)), 255);
  EXPECT_EQ((Combine<uint8_t, RedOp::kMin>(255, 0)), 0);
  EXPECT_EQ((Combine<int32_t, RedOp::kMin>(-1, 1)), -1);
  EXPECT_EQ((Combine<uint32_t, RedOp::kMin>(0xffffffffu, 1u)), 1u);  // not a signed comparison
  EXPECT_EQ((Combine<uint32_t, RedOp::kMax>(0xffffffffu, 1u)), 0xffffffffu);
  EXPECT_EQ((Combine<int64_t, RedOp::kMax>(std::numeric_limits<int64_t>::min(), -1)), -1);
  EXPECT_EQ((Combine<uint64_t, RedOp::kMax>(~uint64_t{0}, 1)), ~uint64_t{0});
  EXPECT_EQ((Combine<uint64_t, RedOp::kMin>(~uint64_t{0}, 1)), 1u);
}

TEST(ReduceOpTest, MakeSetsPremulOrDivisor) {
  for (int n = 1; n <= 8; ++n) {
    auto fi = ReduceFunc<int32_t, RedOp::kAvg>::Make(n);
    EXPECT_EQ(fi.divisor, n);
    EXPECT_EQ(fi.premul, 1);
    auto ff = ReduceFunc<float, RedOp::kAvg>::Make(n);
    EXPECT_EQ(ff.divisor, 1);
    EXPECT_EQ(ff.premul, 1.0f / static_cast<float>(n));
    auto fd = ReduceFunc<double, RedOp::kAvg>::Make(n);
    EXPECT_EQ(fd.premul, 1.0 / n);
    auto fh = ReduceFunc<Half, RedOp::kAvg>::Make(n);
    EXPECT_EQ(fh.premul, 1.0f / static_cast<float>(n));  // in the accumulation type
    auto fs = ReduceFunc<float, RedOp::kSum>::Make(n);
    EXPECT_EQ(fs.premul, 1.0f);
    EXPECT_EQ(fs.divisor, 1);
    auto fu = ReduceFunc<uint8_t, RedOp::kSum>::Make(n);
    EXPECT_EQ(fu.divisor, 1);
  }
  static_assert(std::is_same<ReduceFunc<Half, RedOp::kSum>::Acc, float>::value, "fp16 accumulates in fp32");
  static_assert(std::is_same<ReduceFunc<BFloat16, RedOp::kSum>::Acc, float>::value, "bf16 accumulates in fp32");
  static_assert(std::is_same<ReduceFunc<double, RedOp::kSum>::Acc, double>::value, "");
  static_assert(std::is_same<ReduceFunc<int8_t, RedOp::kSum>::Acc, int8_t>::value, "");
  static_assert(kIsFloating<Half> && kIsFloating<BFloat16> && kIsFloating<float> && !kIsFloating<int64_t>, "");
}

// Integer avg: a sum in the type (wrapping), then Post divides truncating toward zero.
template <typename T>
T IntAvg(const std::vector<T>& xs) {
  auto f = ReduceFunc<T, RedOp::kAvg>::Make(static_cast<int>(xs.size()));
  auto acc = f.Pre(xs[0]);
  for (size_t i = 1; i < xs.size(); ++i) acc = f.Apply(ToAcc(f.Partial(acc)), f.Pre(xs[i]));
  return f.Post(acc);
}

TEST(ReduceOpTest, IntegerAvgTruncatesTowardZero) {
  EXPECT_EQ(IntAvg<int32_t>({7, 0}), 3);
  EXPECT_EQ(IntAvg<int32_t>({-7, 0}), -3);  // not -4 (floor)
  EXPECT_EQ(IntAvg<int32_t>({-7, 0, 0}), -2);
  EXPECT_EQ(IntAvg<int32_t>({-1, 0, 0, 0}), 0);
  EXPECT_EQ(IntAvg<int32_t>({-9, -9, -9}), -9);
  EXPECT_EQ(IntAvg<int32_t>({10, 20, 31}), 20);
  EXPECT_EQ(IntAvg<int8_t>({-7, 0}), -3);
  EXPECT_EQ(IntAvg<int8_t>({-128, -128}), 0);  // the sum wraps to 0 first, as NCCL's sum-then-divide does
  EXPECT_EQ(IntAvg<int8_t>({100, 100}), -28);  // -56 / 2
  EXPECT_EQ(IntAvg<int8_t>({-100, -27, 0}), -42);
  EXPECT_EQ(IntAvg<uint8_t>({255, 0, 0}), 85);
  EXPECT_EQ(IntAvg<uint8_t>({200, 100}), 22);  // (300 mod 256) / 2
  EXPECT_EQ(IntAvg<uint32_t>({0xffffffffu, 1u}), 0u);
  EXPECT_EQ(IntAvg<uint32_t>({0xfffffffeu, 0u}), 0x7fffffffu);  // an unsigned divide, not a signed one
  EXPECT_EQ(IntAvg<int64_t>({-5, -6, -7, -8, -9, -10, -11}), -8);
  EXPECT_EQ(IntAvg<int64_t>({std::numeric_limits<int64_t>::min(), 0}), std::numeric_limits<int64_t>::min() / 2);
  EXPECT_EQ(IntAvg<uint64_t>({~uint64_t{0}, 0, 0}), ~uint64_t{0} / 3);  // an unsigned divide
  EXPECT_EQ(IntAvg<uint64_t>({~uint64_t{0} - 1, 0}), (~uint64_t{0} - 1) / 2);
}

// Integer Pre and Partial are identities: integer avg divides only at the end.
TEST(ReduceOpTest, IntegerPreAndPartialAreIdentities) {
  auto f = ReduceFunc<int32_t, RedOp::kAvg>::Make(4);
  EXPECT_EQ(f.Pre(-17), -17);
  EXPECT_EQ(f.Partial(-17), -17);
  EXPECT_EQ(f.Post(-17), -4);
  auto s = ReduceFunc<int32_t, RedOp::kSum>::Make(4);
  EXPECT_EQ(s.Post(-17), -17);
}

// -------------------------------------------------------------- floats ----

TEST(ReduceOpTest, FloatOps) {
  EXPECT_EQ((Combine<float, RedOp::kSum>(1.5f, 2.25f)), 3.75f);
  EXPECT_EQ((Combine<float, RedOp::kProd>(1.5f, -2.0f)), -3.0f);
  EXPECT_EQ((Combine<float, RedOp::kMax>(-1.0f, -2.0f)), -1.0f);
  EXPECT_EQ((Combine<float, RedOp::kMin>(-1.0f, -2.0f)), -2.0f);
  EXPECT_EQ((Combine<float, RedOp::kMax>(-INFINITY, 3.0f)), 3.0f);
  EXPECT_EQ((Combine<float, RedOp::kMin>(INFINITY, 3.0f)), 3.0f);
  EXPECT_EQ((Combine<double, RedOp::kSum>(1e300, 1e300)), 2e300);
  EXPECT_EQ((Combine<double, RedOp::kProd>(1e300, 1e300)), INFINITY);
  EXPECT_EQ((Combine<float, RedOp::kSum>(3e38f, 3e38f)), INFINITY);
  EXPECT_TRUE(std::isnan(Combine<float, RedOp::kSum>(NAN, 1.0f)));
  EXPECT_TRUE(std::isnan(Combine<double, RedOp::kProd>(1.0, NAN)));
  EXPECT_TRUE(std::isnan(Combine<float, RedOp::kSum>(INFINITY, -INFINITY)));
}

TEST(ReduceOpTest, FloatAvgPremultiplies) {
  auto f = ReduceFunc<float, RedOp::kAvg>::Make(4);
  EXPECT_EQ(f.Pre(8.0f), 2.0f);
  EXPECT_EQ(f.Partial(2.0f), 2.0f);
  EXPECT_EQ(f.Post(5.0f), 5.0f);  // no division at the end for floats
  EXPECT_EQ(f.Apply(f.Pre(8.0f), f.Pre(4.0f)), 3.0f);
  // A non-power-of-two count: each input times the rounded 1/n, then a plain sum.
  auto g = ReduceFunc<float, RedOp::kAvg>::Make(3);
  const float third = 1.0f / 3.0f;
  float expect = (1.0f * third + 2.0f * third) + 6.0f * third;
  float got = g.Apply(g.Apply(g.Pre(1.0f), g.Pre(2.0f)), g.Pre(6.0f));
  EXPECT_EQ(got, expect);
  EXPECT_NEAR(got, 3.0f, 1e-6f);
  auto d = ReduceFunc<double, RedOp::kAvg>::Make(3);
  EXPECT_NEAR(d.Apply(d.Apply(d.Pre(-1.0), d.Pre(-2.0)), d.Pre(-6.0)), -3.0, 1e-15);
  // Averages of large values do not overflow the way sum-then-divide would.
  EXPECT_EQ(f.Apply(f.Pre(3e38f), f.Pre(3e38f)), 1.5e38f);
}

// ------------------------------------------------------------ fp16/bf16 ----

// Rounds an exact double to a 16-bit float format, nearest even, without
// the library's code: integer significand by the FPU's nearbyint.
uint16_t RoundDoubleRef(double x, int mant_bits, int bias, int exp_bits) {
  const uint16_t sign = std::signbit(x) ? static_cast<uint16_t>(0x8000u) : 0;
  const double a = std::fabs(x);
  const uint32_t inf = ((1u << exp_bits) - 1u) << mant_bits;
  if (std::isnan(a)) return static_cast<uint16_t>(sign | inf | (1u << (mant_bits - 1)));
  if (std::isinf(a)) return static_cast<uint16_t>(sign | inf);
  if (a == 0) return sign;
  const int min_exp = 1 - bias;
  const int e = std::ilogb(a);
  const bool subnormal = e < min_exp;
  const int q = subnormal ? min_exp - mant_bits : e - mant_bits;
  const double m = std::nearbyint(std::ldexp(a, -q));
  if (m >= std::ldexp(1.0, exp_bits + mant_bits + 1)) return static_cast<uint16_t>(sign | inf);
  uint64_t bits = subnormal ? static_cast<uint64_t>(m)
                            : static_cast<uint64_t>(e + bias - 1) * (uint64_t{1} << mant_bits) +
                                  static_cast<uint64_t>(m);
  if (bits >= inf) bits = inf;
  return static_cast<uint16_t>(sign | bits);
}
uint16_t HalfFromDouble(double x) { return RoundDoubleRef(x, 10, 15, 5); }
uint16_t BFloat16FromDouble(double x) { return RoundDoubleRef(x, 7, 127, 8); }

bool HalfIsNan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool BFloat16IsNan(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0; }

// Operand patterns: specials, boundaries and random finite values.
std::vector<uint16_t> SampleHalves(int random_count, uint32_t seed) {
  std::vector<uint16_t> v = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x3c01, 0x7bff,
                             0xfbff, 0x7bfe, 0x7800, 0x5bff, 0x1400, 0x3555, 0x7c00, 0xfc00, 0x4000, 0xc000};
  std::mt19937 rng(seed);
  while (static_cast<int>(v.size()) < random_count) {
    uint16_t h = static_cast<uint16_t>(rng());
    if ((h & 0x7c00u) != 0x7c00u) v.push_back(h);
  }
  return v;
}

std::vector<uint16_t> SampleBFloat16s(int random_count, uint32_t seed) {
  std::vector<uint16_t> v = {0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x0080, 0x3f80, 0xbf80, 0x3f81, 0x7f7f,
                             0xff7f, 0x7f7e, 0x7f00, 0x4780, 0x0100, 0x3eab, 0x7f80, 0xff80, 0x4000, 0xc000};
  std::mt19937 rng(seed);
  while (static_cast<int>(v.size()) < random_count) {
    uint16_t b = static_cast<uint16_t>(rng());
    if ((b & 0x7f80u) != 0x7f80u) v.push_back(b);
  }
  return v;
}

// For every fp16 a (all 65536) and a sample of b: sum and prod combined in fp32
// and stored as fp16 give the correctly rounded result of the exact operation
// (fp32 has 24 >= 2*11+2 bits, so rounding twice is harmless), and agree with
// FloatToHalfBits of the fp32 result; max/min pick an operand.
TEST(ReduceOpTest, HalfOpsAreCorrectlyRounded) {
  const std::vector<uint16_t> bs = SampleHalves(96, 7);
  const auto sum = ReduceFunc<Half, RedOp::kSum>::Make(2);
  const auto prod = ReduceFunc<Half, RedOp::kProd>::Make(2);
  const auto mx = ReduceFunc<Half, RedOp::kMax>::Make(2);
  const auto mn = ReduceFunc<Half, RedOp::kMin>::Make(2);
  int failures = 0;
  for (uint32_t ai = 0; ai < 65536 && failures < 10; ++ai) {
    const Half a{static_cast<uint16_t>(ai)};
    if (HalfIsNan(a.bits)) continue;
    const double da = base::HalfBitsToFloat(a.bits);
    for (uint16_t bbits : bs) {
      const Half b{bbits};
      const double db = base::HalfBitsToFloat(b.bits);
      const uint16_t s = sum.Partial(sum.Apply(ToAcc(a), ToAcc(b))).bits;
      const uint16_t p = prod.Partial(prod.Apply(ToAcc(a), ToAcc(b))).bits;
      const double exact_sum = da + db;   // exact: at most 40 significant bits
      const double exact_prod = da * db;  // exact: 22 significant bits
      if (std::isnan(exact_sum)) {
        if (!HalfIsNan(s)) {
          ADD_FAILURE() << std::hex << ai << " + " << bbits << " -> " << s;
          ++failures;
        }
      } else if (s != HalfFromDouble(exact_sum) && !(exact_sum == 0 && (s & 0x7fffu) == 0)) {
        ADD_FAILURE() << std::hex << "fp16 0x" << ai << " + 0x" << bbits << " -> 0x" << s << ", want 0x"
                      << HalfFromDouble(exact_sum);
        ++failures;
      }
      if (std::isnan(exact_prod)) {
        if (!HalfIsNan(p)) {
          ADD_FAILURE() << std::hex << ai << " * " << bbits << " -> " << p;
          ++failures;
        }
      } else if (p != HalfFromDouble(exact_prod)) {
        ADD_FAILURE() << std::hex << "fp16 0x" << ai << " * 0x" << bbits << " -> 0x" << p << ", want 0x"
                      << HalfFromDouble(exact_prod);
        ++failures;
      }
      // And exactly what the conversion functions give for the fp32 result.
      ASSERT_EQ(s, base::FloatToHalfBits(base::HalfBitsToFloat(a.bits) + base::HalfBitsToFloat(b.bits)));
      ASSERT_EQ(p, base::FloatToHalfBits(base::HalfBitsToFloat(a.bits) * base::HalfBitsToFloat(b.bits)));
      const uint16_t hi = mx.Partial(mx.Apply(ToAcc(a), ToAcc(b))).bits;
      const uint16_t lo = mn.Partial(mn.Apply(ToAcc(a), ToAcc(b))).bits;
      if (da != db) {
        ASSERT_EQ(hi, da > db ? a.bits : b.bits) << std::hex << ai << " max " << bbits;
        ASSERT_EQ(lo, da < db ? a.bits : b.bits) << std::hex << ai << " min " << bbits;
      } else {
        ASSERT_EQ(base::HalfBitsToFloat(hi), da);
        ASSERT_EQ(base::HalfBitsToFloat(lo), da);
      }
    }
  }
}

TEST(ReduceOpTest, BFloat16OpsAreCorrectlyRounded) {
  const std::vector<uint16_t> bs = SampleBFloat16s(96, 11);
  const auto sum = ReduceFunc<BFloat16, RedOp::kSum>::Make(2);
  const auto prod = ReduceFunc<BFloat16, RedOp::kProd>::Make(2);
  const auto mx = ReduceFunc<BFloat16, RedOp::kMax>::Make(2);
  const auto mn = ReduceFunc<BFloat16, RedOp::kMin>::Make(2);
  int failures = 0;
  for (uint32_t ai = 0; ai < 65536 && failures < 10; ++ai) {
    const BFloat16 a{static_cast<uint16_t>(ai)};
    if (BFloat16IsNan(a.bits)) continue;
    const double da = base::BFloat16BitsToFloat(a.bits);
    for (uint16_t bbits : bs) {
      const BFloat16 b{bbits};
      const double db = base::BFloat16BitsToFloat(b.bits);
      const uint16_t s = sum.Partial(sum.Apply(ToAcc(a), ToAcc(b))).bits;
      const uint16_t p = prod.Partial(prod.Apply(ToAcc(a), ToAcc(b))).bits;
      // The double sum may round (exponents span 2^-133..2^127), but 53 >= 2*8+2
      // bits make that rounding harmless; the product is exact.
      const double ref_sum = da + db;
      const double ref_prod = da * db;
      if (std::isnan(ref_sum)) {
        if (!BFloat16IsNan(s)) {
          ADD_FAILURE() << std::hex << ai << " + " << bbits << " -> " << s;
          ++failures;
        }
      } else if (s != BFloat16FromDouble(ref_sum) && !(ref_sum == 0 && (s & 0x7fffu) == 0)) {
        ADD_FAILURE() << std::hex << "bf16 0x" << ai << " + 0x" << bbits << " -> 0x" << s << ", want 0x"
                      << BFloat16FromDouble(ref_sum);
        ++failures;
      }
      if (std::isnan(ref_prod)) {
        if (!BFloat16IsNan(p)) {
          ADD_FAILURE() << std::hex << ai << " * " << bbits << " -> " << p;
          ++failures;
        }
      } else if (p != BFloat16FromDouble(ref_prod)) {
        ADD_FAILURE() << std::hex << "bf16 0x" << ai << " * 0x" << bbits << " -> 0x" << p << ", want 0x"
                      << BFloat16FromDouble(ref_prod);
        ++failures;
      }
      ASSERT_EQ(s, base::FloatToBFloat16Bits(base::BFloat16BitsToFloat(a.bits) + base::BFloat16BitsToFloat(b.bits)));
      ASSERT_EQ(p, base::FloatToBFloat16Bits(base::BFloat16BitsToFloat(a.bits) * base::BFloat16BitsToFloat(b.bits)));
      const uint16_t hi = mx.Partial(mx.Apply(ToAcc(a), ToAcc(b))).bits;
      const uint16_t lo = mn.Partial(mn.Apply(ToAcc(a), ToAcc(b))).bits;
      if (da != db) {
        ASSERT_EQ(hi, da > db ? a.bits : b.bits) << std::hex << ai << " max " << bbits;
        ASSERT_EQ(lo, da < db ? a.bits : b.bits) << std::hex << ai << " min " << bbits;
      }
    }
  }
}

TEST(ReduceOpTest, HalfNamedValues) {
  auto h = [](float f) { return Half::FromFloat(f); };
  EXPECT_EQ((Combine<Half, RedOp::kSum>(h(1.0f), h(2.0f))).bits, 0x4200);        // 3
  EXPECT_EQ((Combine<Half, RedOp::kSum>(h(2048.0f), h(1.0f))).bits, 0x6800);     // 2049 ties to 2048
  EXPECT_EQ((Combine<Half, RedOp::kSum>(h(2050.0f), h(1.0f))).bits, 0x6802);     // 2051 ties to 2052
  EXPECT_EQ((Combine<Half, RedOp::kSum>(h(65504.0f), h(8.0f))).bits, 0x7bff);    // 65512 < 65520
  EXPECT_EQ((Combine<Half, RedOp::kSum>(h(65504.0f), h(16.0f))).bits, 0x7c00);   // 65520 overflows
  EXPECT_EQ((Combine<Half, RedOp::kProd>(h(256.0f), h(256.0f))).bits, 0x7c00);   // 65536
  EXPECT_EQ((Combine<Half, RedOp::kSum>(h(-0.0f), h(-0.0f))).bits, 0x8000);
  EXPECT_EQ((Combine<Half, RedOp::kMax>(h(-3.0f), h(2.0f))).bits, h(2.0f).bits);
  EXPECT_EQ((Combine<Half, RedOp::kMin>(h(-3.0f), h(2.0f))).bits, h(-3.0f).bits);
  // Accumulated in fp32: 2048 + 1 + 1 in one fp32 step is 2050, where fp16 steps would give 2048.
  auto f = ReduceFunc<Half, RedOp::kSum>::Make(3);
  float acc = f.Apply(f.Apply(f.Pre(h(2048.0f)), f.Pre(h(1.0f))), f.Pre(h(1.0f)));
  EXPECT_EQ(f.Post(acc).bits, h(2050.0f).bits);
  EXPECT_EQ((Combine<BFloat16, RedOp::kSum>(BFloat16::FromFloat(256.0f), BFloat16::FromFloat(1.0f))).bits,
            BFloat16::FromFloat(256.0f).bits);  // 257 ties to 256
  EXPECT_EQ((Combine<BFloat16, RedOp::kSum>(BFloat16::FromFloat(258.0f), BFloat16::FromFloat(1.0f))).bits,
            BFloat16::FromFloat(260.0f).bits);  // 259 ties to 260
}

// fp16/bf16 avg: each input converted to fp32 and multiplied by the fp32 1/n,
// combined in fp32, rounded to nearest even when stored.
template <typename T>
void CheckLowPrecisionAvg(uint16_t (*to_bits)(float), float (*to_float)(uint16_t), double tolerance) {
  std::mt19937 rng(5);
  for (int n = 2; n <= 8; ++n) {
    auto f = ReduceFunc<T, RedOp::kAvg>::Make(n);
    const float premul = 1.0f / static_cast<float>(n);
    for (int trial = 0; trial < 2000; ++trial) {
      std::vector<T> xs(n);
      for (T& x : xs) x = T::FromFloat(std::uniform_real_distribution<float>(-1000.0f, 1000.0f)(rng));
      // The ring's order: Pre(x0) stored, then each hop Apply(stored, Pre(xi)) stored.
      T stored = f.Partial(f.Pre(xs[0]));
      uint16_t ref = to_bits(to_float(xs[0].bits) * premul);
      ASSERT_EQ(stored.bits, ref);
      for (int i = 1; i < n; ++i) {
        auto v = f.Apply(ToAcc(stored), f.Pre(xs[i]));
        stored = i + 1 == n ? f.Post(v) : f.Partial(v);
        ref = to_bits(to_float(ref) + to_float(xs[i].bits) * premul);
        ASSERT_EQ(stored.bits, ref) << "n " << n << " hop " << i;
      }
      double mean = 0;
      for (const T& x : xs) mean += to_float(x.bits);
      mean /= n;
      EXPECT_NEAR(to_float(stored.bits), mean, tolerance) << "n " << n;
    }
  }
}

// Tolerances: n roundings of at most half an ulp at |x| < 1024 (fp16 ulp 0.5, bf16 ulp 4).
TEST(ReduceOpTest, HalfAvg) { CheckLowPrecisionAvg<Half>(base::FloatToHalfBits, base::HalfBitsToFloat, 2.5); }
TEST(ReduceOpTest, BFloat16Avg) {
  CheckLowPrecisionAvg<BFloat16>(base::FloatToBFloat16Bits, base::BFloat16BitsToFloat, 20.0);
}

// --------------------------------------------- every datatype x every op ----

// The ring's chain for n ranks: the first rank's Pre as a partial, one
// Apply per hop stored as a partial, the last hop's stored as final (Post).
template <typename T, RedOp kOp>
T RingChain(const std::vector<T>& xs) {
  auto f = ReduceFunc<T, kOp>::Make(static_cast<int>(xs.size()));
  T stored = f.Partial(f.Pre(xs[0]));
  for (size_t i = 1; i < xs.size(); ++i) {
    auto v = f.Apply(ToAcc(stored), f.Pre(xs[i]));
    stored = i + 1 == xs.size() ? f.Post(v) : f.Partial(v);
  }
  return stored;
}

// Integer reference in 64-bit unsigned arithmetic, reduced modulo 2^bits.
template <typename T, RedOp kOp>
T IntegerRef(const std::vector<T>& xs) {
  using U = typename std::make_unsigned<T>::type;
  if constexpr (kOp == RedOp::kMax || kOp == RedOp::kMin) {
    T r = xs[0];
    for (T x : xs) r = kOp == RedOp::kMax ? (x > r ? x : r) : (x < r ? x : r);
    return r;
  } else {
    uint64_t acc = kOp == RedOp::kProd ? 1 : 0;
    for (T x : xs) {
      const uint64_t u = static_cast<uint64_t>(static_cast<U>(x));
      acc = kOp == RedOp::kProd ? acc * u : acc + u;
    }
    const T wrapped = static_cast<T>(static_cast<U>(acc));
    if constexpr (kOp == RedOp::kAvg) {
      // Truncation toward zero, written as magnitude division.
      const int64_t n = static_cast<int64_t>(xs.size());
      if constexpr (std::is_signed<T>::value) {
        const int64_t w = wrapped;
        const uint64_t magnitude = w < 0 ? uint64_t{0} - static_cast<uint64_t>(w) : static_cast<uint64_t>(w);
        const uint64_t q = magnitude / static_cast<uint64_t>(n);
        return static_cast<T>(w < 0 ? -static_cast<int64_t>(q) : static_cast<int64_t>(q));
      } else {
        return static_cast<T>(static_cast<uint64_t>(wrapped) / static_cast<uint64_t>(n));
      }
    }
    return wrapped;
  }
}

template <typename T>
T RandomInt(std::mt19937_64& rng, int mode) {
  switch (mode) {
    case 0: return static_cast<T>(rng());                                  // anything: wraps a lot
    case 1: return static_cast<T>(static_cast<int64_t>(rng() % 7) - 3);     // small, both signs
    default: return (rng() & 1) ? std::numeric_limits<T>::max() : std::numeric_limits<T>::min();
  }
}

template <typename T, RedOp kOp>
void CheckIntegerOp() {
  std::mt19937_64 rng(static_cast<uint64_t>(sizeof(T) * 31 + static_cast<int>(kOp)));
  for (int n = 2; n <= 8; ++n) {
    for (int trial = 0; trial < 3000; ++trial) {
      std::vector<T> xs(n);
      for (T& x : xs) x = RandomInt<T>(rng, trial % 3);
      const T got = RingChain<T, kOp>(xs);
      const T want = IntegerRef<T, kOp>(xs);
      if (got != want) {
        std::string in;
        for (T x : xs) in += std::to_string(static_cast<int64_t>(x)) + " ";
        FAIL() << base::RedOpName(kOp) << " of " << sizeof(T) << "-byte " << (std::is_signed<T>::value ? "int" : "uint")
               << " [" << in << "] = " << static_cast<int64_t>(got) << ", want " << static_cast<int64_t>(want);
      }
    }
  }
}

template <typename T>
void CheckIntegerOps() {
  CheckIntegerOp<T, RedOp::kSum>();
  CheckIntegerOp<T, RedOp::kProd>();
  CheckIntegerOp<T, RedOp::kMax>();
  CheckIntegerOp<T, RedOp::kMin>();
  CheckIntegerOp<T, RedOp::kAvg>();
}

TEST(ReduceOpTest, Int8AllOps) { CheckIntegerOps<int8_t>(); }
TEST(ReduceOpTest, Uint8AllOps) { CheckIntegerOps<uint8_t>(); }
TEST(ReduceOpTest, Int32AllOps) { CheckIntegerOps<int32_t>(); }
TEST(ReduceOpTest, Uint32AllOps) { CheckIntegerOps<uint32_t>(); }
TEST(ReduceOpTest, Int64AllOps) { CheckIntegerOps<int64_t>(); }
TEST(ReduceOpTest, Uint64AllOps) { CheckIntegerOps<uint64_t>(); }

// Float references: the same order of operations written out in the type.
template <typename T, RedOp kOp>
void CheckFloatOp() {
  std::mt19937 rng(static_cast<uint32_t>(sizeof(T) * 17 + static_cast<int>(kOp)));
  std::uniform_real_distribution<double> dist(-100.0, 100.0);
  for (int n = 2; n <= 8; ++n) {
    const T premul = T(1) / T(n);
    for (int trial = 0; trial < 2000; ++trial) {
      std::vector<T> xs(n);
      for (T& x : xs) x = static_cast<T>(dist(rng));
      T want;
      if constexpr (kOp == RedOp::kAvg) {
        want = xs[0] * premul;
        for (int i = 1; i < n; ++i) want = want + xs[i] * premul;
      } else {
        want = xs[0];
        for (int i = 1; i < n; ++i) {
          if constexpr (kOp == RedOp::kSum) want = want + xs[i];
          if constexpr (kOp == RedOp::kProd) want = want * xs[i];
          if constexpr (kOp == RedOp::kMax) want = std::max(want, xs[i]);
          if constexpr (kOp == RedOp::kMin) want = std::min(want, xs[i]);
        }
      }
      ASSERT_EQ((RingChain<T, kOp>(xs)), want) << base::RedOpName(kOp) << " n " << n;
    }
  }
}

template <typename T>
void CheckFloatOps() {
  CheckFloatOp<T, RedOp::kSum>();
  CheckFloatOp<T, RedOp::kProd>();
  CheckFloatOp<T, RedOp::kMax>();
  CheckFloatOp<T, RedOp::kMin>();
  CheckFloatOp<T, RedOp::kAvg>();
}

TEST(ReduceOpTest, FloatAllOps) { CheckFloatOps<float>(); }
TEST(ReduceOpTest, DoubleAllOps) { CheckFloatOps<double>(); }

// fp16/bf16: every hop computed in fp32 and rounded with the conversion functions.
template <typename T, RedOp kOp>
void CheckLowPrecisionOp(uint16_t (*to_bits)(float), float (*to_float)(uint16_t)) {
  std::mt19937 rng(static_cast<uint32_t>(41 + static_cast<int>(kOp)));
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  for (int n = 2; n <= 8; ++n) {
    const float premul = 1.0f / static_cast<float>(n);
    for (int trial = 0; trial < 2000; ++trial) {
      std::vector<T> xs(n);
      for (T& x : xs) x = T{to_bits(dist(rng))};
      auto pre = [&](const T& x) { return kOp == RedOp::kAvg ? to_float(x.bits) * premul : to_float(x.bits); };
      uint16_t ref = to_bits(pre(xs[0]));
      for (int i = 1; i < n; ++i) {
        const float a = to_float(ref), b = pre(xs[i]);
        float r = 0;
        switch (kOp) {
          case RedOp::kSum:
          case RedOp::kAvg: r = a + b; break;
          case RedOp::kProd: r = a * b; break;
          case RedOp::kMax: r = a < b ? b : a; break;
          case RedOp::kMin: r = b < a ? b : a; break;
        }
        ref = to_bits(r);
      }
      ASSERT_EQ((RingChain<T, kOp>(xs).bits), ref) << base::RedOpName(kOp) << " n " << n;
    }
  }
}

template <typename T>
void CheckLowPrecisionOps(uint16_t (*to_bits)(float), float (*to_float)(uint16_t)) {
  CheckLowPrecisionOp<T, RedOp::kSum>(to_bits, to_float);
  CheckLowPrecisionOp<T, RedOp::kProd>(to_bits, to_float);
  CheckLowPrecisionOp<T, RedOp::kMax>(to_bits, to_float);
  CheckLowPrecisionOp<T, RedOp::kMin>(to_bits, to_float);
  CheckLowPrecisionOp<T, RedOp::kAvg>(to_bits, to_float);
}

TEST(ReduceOpTest, HalfAllOps) { CheckLowPrecisionOps<Half>(base::FloatToHalfBits, base::HalfBitsToFloat); }
TEST(ReduceOpTest, BFloat16AllOps) {
  CheckLowPrecisionOps<BFloat16>(base::FloatToBFloat16Bits, base::BFloat16BitsToFloat);
}

// For every datatype: max and min of equal inputs, and the avg of four equal
// inputs, give that input back bit for bit.
template <typename T>
void CheckIdempotent(T x) {
  T mx = RingChain<T, RedOp::kMax>({x, x, x});
  T mn = RingChain<T, RedOp::kMin>({x, x, x});
  EXPECT_EQ(std::memcmp(&mx, &x, sizeof(T)), 0);
  EXPECT_EQ(std::memcmp(&mn, &x, sizeof(T)), 0);
  T avg = RingChain<T, RedOp::kAvg>({x, x, x, x});  // 1/4 is exact
  EXPECT_EQ(std::memcmp(&avg, &x, sizeof(T)), 0);
}

TEST(ReduceOpTest, IdempotentOpsForEveryDatatype) {
  CheckIdempotent<int8_t>(-7);
  CheckIdempotent<uint8_t>(60);  // four of them must not wrap the sum
  CheckIdempotent<int32_t>(-123457);
  CheckIdempotent<uint32_t>(1000000000u);
  CheckIdempotent<int64_t>(-(int64_t{1} << 40) - 3);
  CheckIdempotent<uint64_t>(uint64_t{1} << 61);
  CheckIdempotent<Half>(Half::FromFloat(-1.5f));
  CheckIdempotent<float>(0.1f);
  CheckIdempotent<double>(-0.3);
  CheckIdempotent<BFloat16>(BFloat16::FromFloat(3.5f));
}

}  // namespace
}  // namespace ringo::kernels
