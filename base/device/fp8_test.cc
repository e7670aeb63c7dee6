// The fp8 conversions against the formats' definitions, computed here a
// different way: decoding from sign, exponent and mantissa with ldexp, and
// encoding as the nearest of the 256 codes (ties to the even mantissa),
// saturating at the largest finite value, NaN to the canonical 0x7f.
#include "base/device/fp8.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "gtest/gtest.h"

namespace ringo::base {
namespace {

struct Format {
  const char* name;
  int mantissa;
  int bias;
  bool ieee;  // E5M2: all-ones exponent is inf / NaN; E4M3: only S.1111.111 is NaN
  float (*decode)(uint8_t);
  uint8_t (*encode)(float);
};

float DecodeE4M3(uint8_t b) { return Fp8E4M3{b}.ToFloat(); }
float DecodeE5M2(uint8_t b) { return Fp8E5M2{b}.ToFloat(); }
uint8_t EncodeE4M3(float f) { return Fp8E4M3::FromFloat(f).bits; }
uint8_t EncodeE5M2(float f) { return Fp8E5M2::FromFloat(f).bits; }

const Format kFormats[] = {{"e4m3", 3, 7, false, DecodeE4M3, EncodeE4M3},
                           {"e5m2", 2, 15, true, DecodeE5M2, EncodeE5M2}};

// The definition: (-1)^s * 2^(e - bias) * (1 + m / 2^M), or 2^(1 - bias) * m / 2^M when e == 0.
double Definition(const Format& f, uint8_t b) {
  const int s = b >> 7;
  const int e = (b & 0x7f) >> f.mantissa;
  const int m = b & ((1 << f.mantissa) - 1);
  const int top = (1 << (7 - f.mantissa)) - 1;
  if (f.ieee && e == top) return m == 0 ? (s ? -INFINITY : INFINITY) : NAN;
  if (!f.ieee && (b & 0x7f) == 0x7f) return NAN;
  const double mag = e == 0 ? std::ldexp(m, 1 - f.bias - f.mantissa)
                            : std::ldexp(1.0 + m / double(1 << f.mantissa), e - f.bias);
  return s ? -mag : mag;
}

uint8_t MaxFinite(const Format& f) { return f.ieee ? 0x7b : 0x7e; }

// The nearest finite code to v by brute force (ties: the even code).
uint8_t Nearest(const Format& f, double v) {
  if (std::isnan(v)) return 0x7f;
  const double max = Definition(f, MaxFinite(f));
  if (std::fabs(v) >= max) return static_cast<uint8_t>((std::signbit(v) ? 0x80 : 0) | MaxFinite(f));
  uint8_t best = 0;
  double best_err = INFINITY;
  for (int c = 0; c < 256; ++c) {
    const uint8_t b = static_cast<uint8_t>(c);
    const double d = Definition(f, b);
    if (!std::isfinite(d) || (d == 0 && std::signbit(d) != std::signbit(v))) continue;
    if (std::signbit(d) != std::signbit(v) && d != 0) continue;
    const double err = std::fabs(d - v);
    if (err < best_err || (err == best_err && (b & 1) == 0)) {
      best = b;
      best_err = err;
    }
  }
  return best;
}

TEST(Fp8, EveryCodeDecodesAsDefinedAndRoundTrips) {
  for (const Format& f : kFormats) {
    for (int c = 0; c < 256; ++c) {
      const uint8_t b = static_cast<uint8_t>(c);
      const double want = Definition(f, b);
      const float got = f.decode(b);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << f.name << " code " << c;
        EXPECT_EQ(f.encode(got), 0x7f) << f.name << " NaN code " << c << " comes back as the canonical NaN";
        continue;
      }
      EXPECT_EQ(static_cast<double>(got), want) << f.name << " code " << c;
      EXPECT_EQ(std::signbit(got), std::signbit(want)) << f.name << " code " << c;
      const uint8_t back = f.encode(got);
      if (std::isinf(want)) {
        EXPECT_EQ(back, (b & 0x80) | MaxFinite(f)) << f.name << " inf saturates";
      } else {
        EXPECT_EQ(back, b) << f.name << " code " << c << " (" << want << ") round trip";
      }
    }
  }
}

TEST(Fp8, EncodingRoundsToNearestEvenAndSaturates) {
  std::mt19937 rng(7);
  for (const Format& f : kFormats) {
    const double max = Definition(f, MaxFinite(f));
    // Every midpoint between neighbouring finite codes (ties), and just beside it.
    for (int c = 0; c < 127; ++c) {
      const double lo = Definition(f, static_cast<uint8_t>(c));
      const double hi = Definition(f, static_cast<uint8_t>(c + 1));
      if (!std::isfinite(lo) || !std::isfinite(hi)) continue;
      const float mid = static_cast<float>((lo + hi) / 2);  // exact: fp8 values have few bits
      for (float fv : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
        EXPECT_EQ(f.encode(fv), Nearest(f, fv)) << f.name << " " << fv;
        EXPECT_EQ(f.encode(-fv), Nearest(f, -double(fv))) << f.name << " " << -fv;
      }
    }
    // Random floats over the whole range, tiny to beyond saturation.
    std::uniform_real_distribution<double> exponent(-30, 20);
    for (int i = 0; i < 20000; ++i) {
      const float v = static_cast<float>((rng() & 1 ? -1 : 1) * std::exp2(exponent(rng)));
      EXPECT_EQ(f.encode(v), Nearest(f, v)) << f.name << " " << v;
    }
    EXPECT_EQ(f.encode(static_cast<float>(max * 4)), MaxFinite(f)) << f.name;
    EXPECT_EQ(f.encode(INFINITY), MaxFinite(f)) << f.name;
    EXPECT_EQ(f.encode(-INFINITY), 0x80 | MaxFinite(f)) << f.name;
    EXPECT_EQ(f.encode(std::numeric_limits<float>::quiet_NaN()), 0x7f) << f.name;
    EXPECT_EQ(f.encode(-0.0f), 0x80) << f.name;
    EXPECT_EQ(f.encode(1e-30f), 0x00) << f.name;
  }
  EXPECT_EQ(EncodeE4M3(448.0f), 0x7e);
  EXPECT_EQ(EncodeE4M3(464.0f), 0x7e);  // would round to 480 past the format's end
  EXPECT_EQ(EncodeE5M2(57344.0f), 0x7b);
  EXPECT_EQ(EncodeE4M3(1.5f), 0x3c);
  EXPECT_EQ(EncodeE5M2(1.5f), 0x3e);
}

}  // namespace
}  // namespace ringo::base
