// Datatype enums and fp16/bf16 conversions. The conversions are checked
// exhaustively where that is cheap (all 65536 16-bit patterns) and against a
// reference written differently (double arithmetic and the FPU's own
// round-to-nearest-even) over tens of millions of floats: every tie, every
// subnormal boundary, overflow, signed zero, infinities and NaN.
#include "base/device/dtype.h"

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>

#include "base/device/half.h"
#include "gtest/gtest.h"

namespace ringo::base {
namespace {

// ---------------------------------------------------------------- enums ----

TEST(DataTypeTest, EnumValuesMatchNccl) {
  EXPECT_EQ(static_cast<int>(DataType::kInt8), 0);     // ncclInt8 / ncclChar
  EXPECT_EQ(static_cast<int>(DataType::kUint8), 1);    // ncclUint8
  EXPECT_EQ(static_cast<int>(DataType::kInt32), 2);    // ncclInt32 / ncclInt
  EXPECT_EQ(static_cast<int>(DataType::kUint32), 3);   // ncclUint32
  EXPECT_EQ(static_cast<int>(DataType::kInt64), 4);    // ncclInt64
  EXPECT_EQ(static_cast<int>(DataType::kUint64), 5);   // ncclUint64
  EXPECT_EQ(static_cast<int>(DataType::kFloat16), 6);  // ncclFloat16 / ncclHalf
  EXPECT_EQ(static_cast<int>(DataType::kFloat32), 7);  // ncclFloat32 / ncclFloat
  EXPECT_EQ(static_cast<int>(DataType::kFloat64), 8);  // ncclFloat64 / ncclDouble
  EXPECT_EQ(static_cast<int>(DataType::kBFloat16), 9); // ncclBfloat16
  EXPECT_EQ(static_cast<int>(DataType::kFloat8E4M3), 10);  // ncclFloat8e4m3
  EXPECT_EQ(static_cast<int>(DataType::kFloat8E5M2), 11);  // ncclFloat8e5m2
  EXPECT_EQ(kNumDataTypes, 12);
}

TEST(DataTypeTest, RedOpValuesMatchNccl) {
  EXPECT_EQ(static_cast<int>(RedOp::kSum), 0);   // ncclSum
  EXPECT_EQ(static_cast<int>(RedOp::kProd), 1);  // ncclProd
  EXPECT_EQ(static_cast<int>(RedOp::kMax), 2);   // ncclMax
  EXPECT_EQ(static_cast<int>(RedOp::kMin), 3);   // ncclMin
  EXPECT_EQ(static_cast<int>(RedOp::kAvg), 4);   // ncclAvg
  EXPECT_EQ(kNumRedOps, 5);
}

TEST(DataTypeTest, Validity) {
  for (int v = -3; v < 15; ++v) {
    EXPECT_EQ(IsValidDataType(v), v >= 0 && v <= 11) << v;
    EXPECT_EQ(IsValidRedOp(v), v >= 0 && v <= 4) << v;
  }
  static_assert(IsValidDataType(11) && !IsValidDataType(12), "constexpr");
  static_assert(IsValidRedOp(4) && !IsValidRedOp(5), "constexpr");
}

TEST(DataTypeTest, Sizes) {
  EXPECT_EQ(DataTypeSize(DataType::kInt8), 1u);
  EXPECT_EQ(DataTypeSize(DataType::kUint8), 1u);
  EXPECT_EQ(DataTypeSize(DataType::kInt32), 4u);
  EXPECT_EQ(DataTypeSize(DataType::kUint32), 4u);
  EXPECT_EQ(DataTypeSize(DataType::kInt64), 8u);
  EXPECT_EQ(DataTypeSize(DataType::kUint64), 8u);
  EXPECT_EQ(DataTypeSize(DataType::kFloat16), 2u);
  EXPECT_EQ(DataTypeSize(DataType::kFloat32), 4u);
  EXPECT_EQ(DataTypeSize(DataType::kFloat64), 8u);
  EXPECT_EQ(DataTypeSize(DataType::kBFloat16), 2u);
  EXPECT_EQ(DataTypeSize(DataType::kFloat8E4M3), 1u);
  EXPECT_EQ(DataTypeSize(DataType::kFloat8E5M2), 1u);
  EXPECT_EQ(DataTypeSize(static_cast<DataType>(42)), 0u);
  static_assert(DataTypeSize(DataType::kFloat64) == 8, "constexpr");
}

template <DataType D>
void ExpectStorage() {
  using T = typename TypeOf<D>::type;
  EXPECT_EQ(sizeof(T), DataTypeSize(D)) << DataTypeName(D);
  EXPECT_TRUE(std::is_trivially_copyable<T>::value) << DataTypeName(D);
}

TEST(DataTypeTest, StorageTypesHaveTheDeclaredSize) {
  ExpectStorage<DataType::kInt8>();
  ExpectStorage<DataType::kUint8>();
  ExpectStorage<DataType::kInt32>();
  ExpectStorage<DataType::kUint32>();
  ExpectStorage<DataType::kInt64>();
  ExpectStorage<DataType::kUint64>();
  ExpectStorage<DataType::kFloat16>();
  ExpectStorage<DataType::kFloat32>();
  ExpectStorage<DataType::kFloat64>();
  ExpectStorage<DataType::kBFloat16>();
  ExpectStorage<DataType::kFloat8E4M3>();
  ExpectStorage<DataType::kFloat8E5M2>();
  static_assert(std::is_same<TypeOf<DataType::kInt8>::type, int8_t>::value, "");
  static_assert(std::is_same<TypeOf<DataType::kUint64>::type, uint64_t>::value, "");
  static_assert(std::is_same<TypeOf<DataType::kFloat16>::type, Half>::value, "");
  static_assert(std::is_same<TypeOf<DataType::kBFloat16>::type, BFloat16>::value, "");
  static_assert(std::is_same<TypeOf<DataType::kFloat64>::type, double>::value, "");
}

TEST(DataTypeTest, Names) {
  const char* const names[] = {"int8", "uint8", "int32", "uint32", "int64",
                               "uint64", "half", "float", "double", "bfloat16", "float8e4m3", "float8e5m2"};
  for (int t = 0; t < kNumDataTypes; ++t) {
    EXPECT_STREQ(DataTypeName(static_cast<DataType>(t)), names[t]);
  }
  EXPECT_STREQ(DataTypeName(static_cast<DataType>(12)), "?");
  const char* const ops[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
  for (int o = 0; o < kNumReduceOps; ++o) EXPECT_STREQ(RedOpName(static_cast<RedOp>(o)), ops[o]);
  EXPECT_STREQ(RedOpName(static_cast<RedOp>(6)), "?");
}

// ----------------------------------------------------------- references ----

bool HalfIsNan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool BFloat16IsNan(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0; }

// The value of a binary16 pattern from its definition, in double.
double HalfValueRef(uint16_t h) {
  const int sign = h >> 15;
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  double v;
  if (exp == 0x1f) v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (exp == 0) v = std::ldexp(static_cast<double>(mant), -24);
  else v = std::ldexp(1.0 + mant / 1024.0, exp - 15);
  return sign ? -v : v;
}

double BFloat16ValueRef(uint16_t b) {
  const int sign = b >> 15;
  const int exp = (b >> 7) & 0xff;
  const int mant = b & 0x7f;
  double v;
  if (exp == 0xff) v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (exp == 0) v = std::ldexp(static_cast<double>(mant), -133);
  else v = std::ldexp(1.0 + mant / 128.0, exp - 127);
  return sign ? -v : v;
}

// Rounds |f| to a format with `mant_bits` stored mantissa bits, exponent bias
// `bias` and all-ones exponent for inf, using the FPU's round-to-nearest-even
// on an exactly scaled double (nearbyint), and assembles the bits from the
// integer significand. Returns the 16-bit pattern without NaN handling.
uint16_t RoundRef(float f, int mant_bits, int bias, int exp_bits) {
  const uint16_t sign = std::signbit(f) ? static_cast<uint16_t>(0x8000u) : 0;
  const double a = std::fabs(static_cast<double>(f));
  const uint32_t inf = ((1u << exp_bits) - 1u) << mant_bits;
  if (std::isinf(a)) return static_cast<uint16_t>(sign | inf);
  if (a == 0) return sign;
  const int min_exp = 1 - bias;  // exponent of the smallest normal
  const int e = std::ilogb(a);
  const bool subnormal = e < min_exp;
  const int quantum_exp = subnormal ? min_exp - mant_bits : e - mant_bits;
  // a / 2^quantum_exp is exact in double (< 2^(mant_bits+1) plus a fraction of at most 2^(-29)).
  const double m = std::nearbyint(std::ldexp(a, -quantum_exp));
  uint32_t bits = subnormal ? static_cast<uint32_t>(m)
                            : static_cast<uint32_t>((e + bias - 1)) * (1u << mant_bits) + static_cast<uint32_t>(m);
  if (bits >= inf) bits = inf;  // rounded past the largest finite value
  return static_cast<uint16_t>(sign | bits);
}

uint16_t HalfRef(float f) { return RoundRef(f, 10, 15, 5); }
uint16_t BFloat16Ref(float f) { return RoundRef(f, 7, 127, 8); }

TEST(HalfRefTest, ReferenceSanity) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  EXPECT_EQ(HalfRef(1.0f), 0x3c00);
  EXPECT_EQ(HalfRef(65504.0f), 0x7bff);
  EXPECT_EQ(HalfRef(65520.0f), 0x7c00);
  EXPECT_EQ(HalfRef(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(HalfRef(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(HalfRef(-0.0f), 0x8000);
  EXPECT_EQ(BFloat16Ref(1.0f), 0x3f80);
  EXPECT_EQ(BFloat16Ref(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(BFloat16Ref(std::numeric_limits<float>::denorm_min()), 0x0000);
}

// A float's bits.
float F(uint32_t bits) { return BitsFloat(bits); }

// ----------------------------------------------------------------- half ----

TEST(HalfTest, EveryPatternConvertsToItsValue) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = HalfBitsToFloat(static_cast<uint16_t>(h));
    const double ref = HalfValueRef(static_cast<uint16_t>(h));
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      // The payload survives in the top mantissa bits.
      ASSERT_EQ((FloatBits(f) >> 13) & 0x3ffu, h & 0x3ffu) << std::hex << h;
    } else {
      ASSERT_EQ(static_cast<double>(f), ref) << std::hex << h;
    }
    ASSERT_EQ(std::signbit(f), (h & 0x8000u) != 0) << std::hex << h;
  }
}

TEST(HalfTest, EveryPatternRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const uint16_t back = FloatToHalfBits(HalfBitsToFloat(bits));
    if (HalfIsNan(bits)) {
      ASSERT_TRUE(HalfIsNan(back)) << std::hex << h << " -> " << back;
      ASSERT_EQ(back, bits | 0x200u) << "NaN quieted, sign and payload kept: " << std::hex << h;
    } else {
      ASSERT_EQ(back, bits) << std::hex << h;
    }
    Half x = Half::FromFloat(Half{bits}.ToFloat());
    ASSERT_EQ(x.bits, back);
  }
}

// Between every two adjacent finite halves: the exact midpoint (a tie, to
// even), and the floats just below and above it.
TEST(HalfTest, EveryTieRoundsToEven) {
  int ties = 0;
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    for (uint32_t sign : {0u, 0x8000u}) {
      const double lo = HalfValueRef(static_cast<uint16_t>(h));
      const double hi = h + 1 == 0x7c00 ? 65536.0 : HalfValueRef(static_cast<uint16_t>(h + 1));
      const float mid = static_cast<float>((lo + hi) / 2);
      ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2) << "midpoints are floats";
      const float smid = sign ? -mid : mid;
      const uint16_t even = static_cast<uint16_t>((h & 1u) ? h + 1 : h);
      ASSERT_EQ(FloatToHalfBits(smid), sign | even) << std::hex << "tie above " << h;
      const float below = std::nextafter(smid, 0.0f);
      const float above = std::nextafter(smid, sign ? -INFINITY : INFINITY);
      ASSERT_EQ(FloatToHalfBits(below), sign | h) << std::hex << "just below the tie above " << h;
      ASSERT_EQ(FloatToHalfBits(above), sign | (h + 1)) << std::hex << "just above the tie above " << h;
      ++ties;
    }
  }
  EXPECT_EQ(ties, 2 * 0x7c00);
}

TEST(HalfTest, NamedValues) {
  EXPECT_EQ(FloatToHalfBits(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalfBits(-0.0f), 0x8000);
  EXPECT_TRUE(std::signbit(HalfBitsToFloat(0x8000)));
  EXPECT_EQ(HalfBitsToFloat(0x8000), 0.0f);
  EXPECT_EQ(FloatToHalfBits(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalfBits(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalfBits(0.5f), 0x3800);
  EXPECT_EQ(FloatToHalfBits(0.1f), 0x2e66);
  EXPECT_EQ(FloatToHalfBits(3.140625f), 0x4248);
  // Largest finite, overflow threshold.
  EXPECT_EQ(FloatToHalfBits(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalfBits(65519.99f), 0x7bff);
  EXPECT_EQ(FloatToHalfBits(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(FloatToHalfBits(65520.0f), 0x7c00);
  EXPECT_EQ(FloatToHalfBits(-65520.0f), 0xfc00);
  EXPECT_EQ(FloatToHalfBits(65536.0f), 0x7c00);
  EXPECT_EQ(FloatToHalfBits(1e10f), 0x7c00);
  EXPECT_EQ(FloatToHalfBits(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(FloatToHalfBits(-std::numeric_limits<float>::max()), 0xfc00);
  EXPECT_EQ(FloatToHalfBits(INFINITY), 0x7c00);
  EXPECT_EQ(FloatToHalfBits(-INFINITY), 0xfc00);
  EXPECT_EQ(HalfBitsToFloat(0x7c00), INFINITY);
  EXPECT_EQ(HalfBitsToFloat(0xfc00), -INFINITY);
  // Normals and subnormals.
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1023.0f, -24)), 0x03ff);  // largest subnormal
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1023.5f, -24)), 0x0400);  // tie: carries into the smallest normal
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -25)), 0x0000);  // tie with 0: to even (0)
  EXPECT_EQ(FloatToHalfBits(-std::ldexp(1.0f, -25)), 0x8000);
  EXPECT_EQ(FloatToHalfBits(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(FloatToHalfBits(std::ldexp(3.0f, -25)), 0x0002);  // tie 1.5 -> 2
  EXPECT_EQ(FloatToHalfBits(std::ldexp(5.0f, -25)), 0x0002);  // tie 2.5 -> 2
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(FloatToHalfBits(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(FloatToHalfBits(-std::numeric_limits<float>::denorm_min()), 0x8000);
  EXPECT_EQ(FloatToHalfBits(std::numeric_limits<float>::min()), 0x0000);
  // Ties among normals.
  EXPECT_EQ(FloatToHalfBits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);       // to even (down)
  EXPECT_EQ(FloatToHalfBits(1.0f + std::ldexp(3.0f, -11)), 0x3c02);       // to even (up)
  EXPECT_EQ(FloatToHalfBits(2048.0f + 1.0f), 0x6800);                     // 2049: tie -> 2048
  EXPECT_EQ(FloatToHalfBits(2048.0f + 3.0f), 0x6802);                     // 2051: tie -> 2052
  EXPECT_EQ(FloatToHalfBits(std::ldexp(2047.0f, -11) + std::ldexp(1.0f, -12)), 0x3c00);  // carry to 1.0
}

TEST(HalfTest, NanStaysNan) {
  const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fbfffffu, 0x7fffffffu,
                           0xff800001u, 0x7f802000u, 0x7fc02000u, 0xffffe000u};
  for (uint32_t n : nans) {
    const uint16_t h = FloatToHalfBits(F(n));
    EXPECT_TRUE(HalfIsNan(h)) << std::hex << n << " -> " << h;
    EXPECT_EQ(h & 0x8000u, (n >> 16) & 0x8000u) << "sign kept: " << std::hex << n;
    EXPECT_TRUE(std::isnan(HalfBitsToFloat(h)));
  }
  EXPECT_TRUE(HalfIsNan(FloatToHalfBits(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(HalfIsNan(FloatToHalfBits(std::numeric_limits<float>::signaling_NaN())));
}

// Checks FloatToHalfBits against the reference for one float.
::testing::AssertionResult HalfMatches(uint32_t bits) {
  const float f = F(bits);
  const uint16_t got = FloatToHalfBits(f);
  if (std::isnan(f)) {
    if (HalfIsNan(got) && (got & 0x8000u) == ((bits >> 16) & 0x8000u)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "NaN 0x" << std::hex << bits << " -> 0x" << got;
  }
  const uint16_t want = HalfRef(f);
  if (got == want) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "float 0x" << std::hex << bits << " (" << std::hexfloat << f
                                       << ") -> 0x" << got << ", reference 0x" << want;
}

// Low 16 bits that matter for rounding at every shift (13 for normals, up to
// 24 for subnormals): zero, the halfway points and their neighbours.
const uint32_t kLowPatterns[] = {0x0000, 0x0001, 0x0002, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x2001,
                                 0x3000, 0x3fff, 0x4000, 0x4001, 0x5000, 0x6000, 0x7fff, 0x8000, 0x8001,
                                 0x9000, 0xa000, 0xc000, 0xdfff, 0xe000, 0xefff, 0xf000, 0xffff};

// Every upper half of a float (sign, exponent, top 7 mantissa bits) with each
// interesting lower half and a few random ones: 65536 x 34 floats.
TEST(HalfTest, MatchesReferenceOnEveryFloatPrefix) {
  std::mt19937 rng(1234);
  int failures = 0;
  for (uint32_t hi = 0; hi < 65536 && failures < 10; ++hi) {
    for (uint32_t lo : kLowPatterns) {
      auto r = HalfMatches((hi << 16) | lo);
      if (!r) {
        ADD_FAILURE() << r.message();
        ++failures;
      }
    }
    for (int k = 0; k < 8; ++k) {
      auto r = HalfMatches((hi << 16) | (rng() & 0xffffu));
      if (!r) {
        ADD_FAILURE() << r.message();
        ++failures;
      }
    }
  }
}

// Every positive float from just under 2^-25 (all of them round to 0 or the
// smallest subnormal) to the first subnormal exponent of interest, exhaustively:
// the subnormal half range is where hand-written shifts go wrong.
TEST(HalfTest, MatchesReferenceOnEverySubnormalRangeFloat) {
  const uint32_t first = 101u << 23;  // 2^-26
  const uint32_t last = 113u << 23;   // 2^-14, the smallest normal half
  int failures = 0;
  for (uint32_t b = first; b <= last && failures < 10; ++b) {
    auto r = HalfMatches(b);
    if (!r) {
      ADD_FAILURE() << r.message();
      ++failures;
    }
  }
}

// Every positive float from 2^14 up past the overflow threshold.
TEST(HalfTest, MatchesReferenceOnEveryFloatNearOverflow) {
  const uint32_t first = 141u << 23;  // 2^14
  const uint32_t last = 144u << 23;   // 2^17
  int failures = 0;
  for (uint32_t b = first; b <= last && failures < 10; ++b) {
    auto r = HalfMatches(b);
    if (!r) {
      ADD_FAILURE() << r.message();
      ++failures;
    }
  }
}

// A stride through all 2^32 floats (both signs, every exponent).
TEST(HalfTest, MatchesReferenceOnAStrideThroughAllFloats) {
  int failures = 0;
  for (uint64_t b = 0; b <= 0xffffffffull && failures < 10; b += 509) {
    auto r = HalfMatches(static_cast<uint32_t>(b));
    if (!r) {
      ADD_FAILURE() << r.message();
      ++failures;
    }
  }
}

// ------------------------------------------------------------- bfloat16 ----

TEST(BFloat16Test, EveryPatternConvertsToItsValue) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = BFloat16BitsToFloat(static_cast<uint16_t>(b));
    const double ref = BFloat16ValueRef(static_cast<uint16_t>(b));
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << b;
    } else {
      ASSERT_EQ(static_cast<double>(f), ref) << std::hex << b;
    }
    ASSERT_EQ(std::signbit(f), (b & 0x8000u) != 0) << std::hex << b;
  }
}

TEST(BFloat16Test, EveryPatternRoundTrips) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const uint16_t back = FloatToBFloat16Bits(BFloat16BitsToFloat(bits));
    if (BFloat16IsNan(bits)) {
      ASSERT_TRUE(BFloat16IsNan(back)) << std::hex << b << " -> " << back;
      ASSERT_EQ(back, bits | 0x40u) << "NaN quieted, sign and payload kept: " << std::hex << b;
    } else {
      ASSERT_EQ(back, bits) << std::hex << b;
    }
    ASSERT_EQ(BFloat16::FromFloat(BFloat16{bits}.ToFloat()).bits, back);
  }
}

TEST(BFloat16Test, EveryTieRoundsToEven) {
  for (uint32_t b = 0; b < 0x7f80; ++b) {
    for (uint32_t sign : {0u, 0x8000u}) {
      // The tie above b is b's float with the low 16 bits 0x8000.
      const uint32_t tie = ((sign | b) << 16) | 0x8000u;
      const uint16_t even = static_cast<uint16_t>((b & 1u) ? b + 1 : b);
      ASSERT_EQ(FloatToBFloat16Bits(F(tie)), sign | even) << std::hex << "tie above " << b;
      ASSERT_EQ(FloatToBFloat16Bits(F(tie - 1)), sign | b) << std::hex << "below the tie above " << b;
      ASSERT_EQ(FloatToBFloat16Bits(F(tie + 1)), sign | (b + 1)) << std::hex << "above the tie above " << b;
    }
  }
}

TEST(BFloat16Test, NamedValues) {
  EXPECT_EQ(FloatToBFloat16Bits(0.0f), 0x0000);
  EXPECT_EQ(FloatToBFloat16Bits(-0.0f), 0x8000);
  EXPECT_TRUE(std::signbit(BFloat16BitsToFloat(0x8000)));
  EXPECT_EQ(FloatToBFloat16Bits(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16Bits(-2.0f), 0xc000);
  EXPECT_EQ(FloatToBFloat16Bits(3.140625f), 0x4049);
  EXPECT_EQ(FloatToBFloat16Bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie to even (down)
  EXPECT_EQ(FloatToBFloat16Bits(1.0f + std::ldexp(3.0f, -8)), 0x3f82);  // tie to even (up)
  EXPECT_EQ(FloatToBFloat16Bits(65520.0f), 0x4780);  // no fp16-style overflow: 65536
  EXPECT_EQ(FloatToBFloat16Bits(std::numeric_limits<float>::max()), 0x7f80);   // rounds to inf
  EXPECT_EQ(FloatToBFloat16Bits(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(FloatToBFloat16Bits(F(0x7f7f7fffu)), 0x7f7f);  // just below the overflow tie
  EXPECT_EQ(FloatToBFloat16Bits(F(0x7f7f8000u)), 0x7f80);  // the tie: to even, which is inf
  EXPECT_EQ(FloatToBFloat16Bits(INFINITY), 0x7f80);
  EXPECT_EQ(FloatToBFloat16Bits(-INFINITY), 0xff80);
  EXPECT_EQ(FloatToBFloat16Bits(std::numeric_limits<float>::min()), 0x0080);  // smallest normal float
  EXPECT_EQ(FloatToBFloat16Bits(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(FloatToBFloat16Bits(F(0x00008000u)), 0x0000);  // subnormal tie: to even
  EXPECT_EQ(FloatToBFloat16Bits(F(0x00018000u)), 0x0002);
  EXPECT_EQ(FloatToBFloat16Bits(F(0x007fffffu)), 0x0080);  // largest subnormal float carries into normal
}

TEST(BFloat16Test, NanStaysNan) {
  const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7f80ffffu, 0x7fffffffu,
                           0xff800001u, 0x7fbfffffu, 0xffff0000u};
  for (uint32_t n : nans) {
    const uint16_t b = FloatToBFloat16Bits(F(n));
    EXPECT_TRUE(BFloat16IsNan(b)) << std::hex << n << " -> " << b;
    EXPECT_EQ(b & 0x8000u, (n >> 16) & 0x8000u) << std::hex << n;
  }
}

::testing::AssertionResult BFloat16Matches(uint32_t bits) {
  const float f = F(bits);
  const uint16_t got = FloatToBFloat16Bits(f);
  if (std::isnan(f)) {
    if (BFloat16IsNan(got) && (got & 0x8000u) == ((bits >> 16) & 0x8000u)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "NaN 0x" << std::hex << bits << " -> 0x" << got;
  }
  const uint16_t want = BFloat16Ref(f);
  if (got == want) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "float 0x" << std::hex << bits << " (" << std::hexfloat << f
                                       << ") -> 0x" << got << ", reference 0x" << want;
}

TEST(BFloat16Test, MatchesReferenceOnEveryFloatPrefix) {
  std::mt19937 rng(99);
  int failures = 0;
  for (uint32_t hi = 0; hi < 65536 && failures < 10; ++hi) {
    for (uint32_t lo : kLowPatterns) {
      auto r = BFloat16Matches((hi << 16) | lo);
      if (!r) {
        ADD_FAILURE() << r.message();
        ++failures;
      }
    }
    for (int k = 0; k < 8; ++k) {
      auto r = BFloat16Matches((hi << 16) | (rng() & 0xffffu));
      if (!r) {
        ADD_FAILURE() << r.message();
        ++failures;
      }
    }
  }
}

TEST(BFloat16Test, MatchesReferenceOnAStrideThroughAllFloats) {
  int failures = 0;
  for (uint64_t b = 0; b <= 0xffffffffull && failures < 10; b += 509) {
    auto r = BFloat16Matches(static_cast<uint32_t>(b));
    if (!r) {
      ADD_FAILURE() << r.message();
      ++failures;
    }
  }
}

}  // namespace
}  // namespace ringo::base
