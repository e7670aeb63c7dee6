#include "kernels/wire.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace ringo::kernels {
namespace {

constexpr Wire kAll[] = {Wire::kBf16, Wire::kFp16, Wire::kE4m3, Wire::kE5m2};

std::vector<float> RoundTrip(Wire w, const std::vector<float>& x) {
  std::vector<uint8_t> buf(static_cast<size_t>(WireBytes(w, static_cast<int64_t>(x.size()))));
  WireEncode(w, x.data(), static_cast<int64_t>(x.size()), buf.data());
  std::vector<float> y(x.size(), -1.0f);
  WireDecode(w, buf.data(), static_cast<int64_t>(x.size()), y.data());
  return y;
}

double BlockAmax(const std::vector<float>& x, size_t i) {
  const size_t b = i / kWireBlock * kWireBlock;
  double amax = 0;
  for (size_t j = b; j < std::min(x.size(), b + kWireBlock); ++j) {
    if (std::isfinite(x[j])) amax = std::max(amax, std::fabs(static_cast<double>(x[j])));
  }
  return amax;
}

TEST(Wire, NamesParseAndBytes) {
  Wire w;
  for (Wire v : {Wire::kNone, Wire::kBf16, Wire::kFp16, Wire::kE4m3, Wire::kE5m2}) {
    ASSERT_TRUE(ParseWire(WireName(v), &w)) << WireName(v);
    EXPECT_EQ(w, v);
  }
  ASSERT_TRUE(ParseWire("FP8", &w));
  EXPECT_EQ(w, Wire::kE4m3);
  EXPECT_FALSE(ParseWire("int8", &w));
  EXPECT_FALSE(ParseWire("", &w));
  EXPECT_EQ(WireBytes(Wire::kNone, 10), 40);
  EXPECT_EQ(WireBytes(Wire::kBf16, 10), 20);
  EXPECT_EQ(WireBytes(Wire::kE4m3, 32), 33);
  EXPECT_EQ(WireBytes(Wire::kE5m2, 33), 35);
  EXPECT_EQ(WireBytes(Wire::kE4m3, 0), 0);
  EXPECT_TRUE(ValidWire(4));
  EXPECT_FALSE(ValidWire(5));
  EXPECT_FALSE(ValidWire(-1));
}

TEST(Wire, ScaleIsTheSmallestThatFits) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::uniform_int_distribution<int> ex(-140, 120);
  for (float max_finite : {448.0f, 57344.0f}) {
    for (int t = 0; t < 20000; ++t) {
      const float amax = static_cast<float>(std::ldexp(mant(gen), ex(gen)));
      if (!(amax > 0)) continue;
      const int k = WireScaleExponent(amax, max_finite);
      ASSERT_GE(k, -127);
      ASSERT_LE(k, 127);
      ASSERT_LE(static_cast<double>(amax), std::ldexp(static_cast<double>(max_finite), k)) << amax;
      if (k > -127) ASSERT_GT(static_cast<double>(amax), std::ldexp(static_cast<double>(max_finite), k - 1)) << amax;
    }
    // Exactly at the edge: amax = max_finite * 2^j fits at k = j.
    EXPECT_EQ(WireScaleExponent(max_finite * 4.0f, max_finite), 2);
    EXPECT_EQ(WireScaleExponent(std::nextafter(max_finite * 4.0f, 1e30f), max_finite), 3);
    EXPECT_EQ(WireScaleExponent(0.0f, max_finite), -127);
  }
}

// Every value within its bound, over blocks whose values span many binades
// (small values beside a block's largest one), partial last blocks included.
TEST(Wire, EveryValueWithinItsBound) {
  std::mt19937 gen(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> spread(-30, 10);
  for (Wire w : kAll) {
    for (int64_t n : {1, 5, 31, 32, 33, 1000}) {
      std::vector<float> x(static_cast<size_t>(n));
      for (auto& v : x) v = std::ldexp(normal(gen), spread(gen) / (w == Wire::kFp16 ? 4 : 1));
      const std::vector<float> y = RoundTrip(w, x);
      for (size_t i = 0; i < x.size(); ++i) {
        const double err = std::fabs(static_cast<double>(y[i]) - x[i]);
        ASSERT_LE(err, WireErrorBound(w, x[i], BlockAmax(x, i))) << WireName(w) << " n " << n << " x " << x[i];
      }
    }
  }
}

// The 8-bit encoders' branch-free path gives the bytes of the formats' own
// reference encoders (base/device/fp8.h) on the scaled values, over every
// binade of both formats' normal and subnormal ranges, ties included.
TEST(Wire, FastEightBitPathMatchesTheReferenceEncoder) {
  std::mt19937 gen(5);
  std::uniform_int_distribution<uint32_t> mant(0, 0x7fffff);
  std::uniform_int_distribution<int> ex(-40, 20);
  for (Wire w : {Wire::kE4m3, Wire::kE5m2}) {
    for (int t = 0; t < 4000; ++t) {
      std::vector<float> x(kWireBlock);
      for (auto& v : x) {
        // Random bits, some with the low mantissa bits cleared (exact ties).
        uint32_t m = mant(gen);
        if (gen() % 4 == 0) m &= ~0xfffffu;
        if (gen() % 4 == 0) m |= 0x80000u;
        const float f = std::ldexp(1.0f + static_cast<float>(m) / 8388608.0f, ex(gen));
        v = gen() % 2 ? f : -f;
      }
      if (t % 7 == 0) x[3] = 0.0f;
      std::vector<uint8_t> got(static_cast<size_t>(WireBytes(w, kWireBlock)));
      WireEncode(w, x.data(), kWireBlock, got.data());
      float amax = 0;
      for (float v : x) amax = std::max(amax, std::fabs(v));
      const int k = WireScaleExponent(amax, w == Wire::kE4m3 ? 448.0f : 57344.0f);
      ASSERT_EQ(got[0], k + 127);
      for (int i = 0; i < kWireBlock; ++i) {
        const float y = x[i] * WirePow2(-k);
        const uint8_t want = w == Wire::kE4m3 ? base::E4M3Format::Encode(y) : base::E5M2Format::Encode(y);
        ASSERT_EQ(got[1 + i], want) << WireName(w) << " x " << x[i] << " scaled " << y;
      }
    }
  }
}

TEST(Wire, BlockMaximumNeverSaturates) {
  for (Wire w : {Wire::kE4m3, Wire::kE5m2}) {
    std::vector<float> x(kWireBlock, 0.5f);
    x[3] = 511.0f;  // MX's floor rule puts this at 511 / 2^0 > 448, clipped to 448
    x[9] = -1e6f;
    const std::vector<float> y = RoundTrip(w, x);
    EXPECT_LE(std::fabs(y[9] - x[9]), WireErrorBound(w, x[9], 1e6)) << WireName(w);
    EXPECT_LE(std::fabs(y[3] - x[3]), WireErrorBound(w, x[3], 1e6)) << WireName(w);
    EXPECT_LT(y[9], 0.0f);
  }
}

TEST(Wire, ExactValuesSurviveAndSpecialsStaySpecial) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (Wire w : kAll) {
    std::vector<float> x = {0.0f, -0.0f, 1.0f, -2.0f, 0.25f, 3.0f, nan, inf, -inf, 1.5f};
    const std::vector<float> y = RoundTrip(w, x);
    for (size_t i = 0; i < 6; ++i) EXPECT_EQ(y[i], x[i]) << WireName(w) << " " << x[i];
    EXPECT_TRUE(std::isnan(y[6])) << WireName(w);
    if (w == Wire::kE4m3) {  // no infinity in the format
      EXPECT_TRUE(std::isnan(y[7]));
      EXPECT_TRUE(std::isnan(y[8]));
    } else {
      EXPECT_EQ(y[7], inf) << WireName(w);
      EXPECT_EQ(y[8], -inf) << WireName(w);
    }
    EXPECT_EQ(y[9], 1.5f) << WireName(w);
    // An all-zero block.
    const std::vector<float> z(40, 0.0f);
    EXPECT_EQ(RoundTrip(w, z), z);
  }
}

TEST(Wire, DecodeAddAndRoundAgreeWithDecode) {
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (Wire w : {Wire::kNone, Wire::kBf16, Wire::kFp16, Wire::kE4m3, Wire::kE5m2}) {
    std::vector<float> x(77), acc(77);
    for (auto& v : x) v = normal(gen);
    for (auto& v : acc) v = normal(gen);
    std::vector<uint8_t> buf(static_cast<size_t>(WireBytes(w, 77)));
    WireEncode(w, x.data(), 77, buf.data());
    std::vector<float> dec(77), sum = acc;
    WireDecode(w, buf.data(), 77, dec.data());
    WireDecodeAdd(w, buf.data(), 77, sum.data());
    std::vector<float> rounded = x;
    WireRound(w, rounded.data(), 77);
    for (int i = 0; i < 77; ++i) {
      EXPECT_EQ(sum[i], acc[i] + dec[i]) << WireName(w);
      EXPECT_EQ(rounded[i], dec[i]) << WireName(w);
    }
  }
}

// The value and block codecs the GPU kernels run give the span loops' bytes
// and values, for every format, over spans whose last block is short, with
// subnormals, exact ties, zeros, infinities and NaNs.
TEST(Wire, DeviceCodecsMatchTheSpanLoops) {
  std::mt19937 gen(11);
  std::uniform_int_distribution<uint32_t> bits(0, 0xffffffffu);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-140, 30);
  for (Wire w : {Wire::kNone, Wire::kBf16, Wire::kFp16, Wire::kE4m3, Wire::kE5m2}) {
    for (int64_t n : {1, 31, 32, 33, 95, 1000}) {
      for (int t = 0; t < 20; ++t) {
        std::vector<float> x(static_cast<size_t>(n));
        for (auto& v : x) {
          switch (gen() % 8) {
            case 0: v = base::BitsFloat(bits(gen)); break;  // anything, NaN and infinity included
            case 1: v = 0.0f; break;
            case 2: v = std::ldexp(1.0f + static_cast<float>(gen() % 16) / 16.0f, ex(gen)); break;  // ties
            default: v = std::ldexp(normal(gen), ex(gen) / 4); break;
          }
        }
        if (t == 0) x[0] = std::numeric_limits<float>::infinity();
        if (t == 1) x[n - 1] = -std::numeric_limits<float>::quiet_NaN();
        const size_t bytes = static_cast<size_t>(WireBytes(w, n));
        std::vector<uint8_t> span(bytes), dev(bytes, 0xcc);
        WireEncode(w, x.data(), n, span.data());
        for (int64_t i = 0; i < n; ++i) {
          if (w == Wire::kNone) {
            const uint32_t b = base::FloatBits(x[i]);
            std::memcpy(&dev[4 * i], &b, 4);
          } else if (w == Wire::kBf16 || w == Wire::kFp16) {
            const uint16_t b = WireEncodeSixteen(w, x[i]);
            std::memcpy(&dev[2 * i], &b, 2);
          } else if (i % kWireBlock == 0) {
            const int len = static_cast<int>(std::min<int64_t>(kWireBlock, n - i));
            WireEncodeEightBlock(w, &x[i], len, &dev[WireValueOffset(w, i) - 1]);
          }
        }
        ASSERT_EQ(span, dev) << WireName(w) << " n " << n << " t " << t;
        std::vector<float> decoded(static_cast<size_t>(n));
        WireDecode(w, span.data(), n, decoded.data());
        for (int64_t i = 0; i < n; ++i) {
          const float d = WireDecodeAt(w, span.data(), i);
          if (std::isnan(decoded[i])) {
            ASSERT_TRUE(std::isnan(d)) << WireName(w) << " value " << i;
          } else {
            ASSERT_EQ(base::FloatBits(d), base::FloatBits(decoded[i])) << WireName(w) << " value " << i;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace ringo::kernels
