// 8-bit floating point as storage types, identical on host and device:
// E4M3 (1 sign, 4 exponent bits with bias 7, 3 mantissa bits; no
// infinities, S.1111.111 is NaN, largest finite 448) and E5M2 (1, 5 with
// bias 15, 2; IEEE-like with infinities, largest finite 57344), as OCP's
// 8-bit formats and CUDA's __nv_fp8_e4m3 / __nv_fp8_e5m2 define them.
// Arithmetic happens in float. float -> fp8 rounds to nearest even and
// saturates as CUDA's __NV_SATFINITE conversions (the ones NCCL's fp8
// reductions store through) do: a magnitude at or beyond the largest finite
// value, infinity included, becomes the largest finite value of its sign;
// NaN becomes the canonical NaN 0x7f. fp8 -> float is exact.
#ifndef RINGO_BASE_DEVICE_FP8_H_
#define RINGO_BASE_DEVICE_FP8_H_

#include <cstdint>

#include "base/device/half.h"
#include "base/device/macros.h"

namespace ringo::base {

// One format's shape: mantissa bits, exponent bias, the largest finite
// encoding, and whether all-ones exponents are infinities and NaNs (E5M2)
// or only S.1111.111 is NaN (E4M3).
template <int kMantissa, int kBias, uint32_t kMaxFinite, bool kIeeeSpecials>
struct Fp8Format {
  RINGO_HD_INLINE static float Decode(uint8_t b) {
    const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
    const uint32_t e = (b & 0x7fu) >> kMantissa;
    const uint32_t m = b & ((1u << kMantissa) - 1u);
    constexpr uint32_t kTopExp = (1u << (7 - kMantissa)) - 1u;
    if (kIeeeSpecials && e == kTopExp) return BitsFloat(sign | (m == 0 ? 0x7f800000u : 0x7fc00000u | (m << (23 - kMantissa))));
    if (!kIeeeSpecials && (b & 0x7fu) == 0x7fu) return BitsFloat(sign | 0x7fc00000u);
    if (e == 0) {
      // Subnormal: m * 2^(1 - bias - mantissa bits), exact in float.
      const float v = static_cast<float>(m) * BitsFloat(static_cast<uint32_t>(127 + 1 - kBias - kMantissa) << 23);
      return BitsFloat(sign | FloatBits(v));
    }
    return BitsFloat(sign | ((e - kBias + 127u) << 23) | (m << (23 - kMantissa)));
  }

  RINGO_HD_INLINE static uint8_t Encode(float f) {
    const uint32_t x = FloatBits(f);
    const uint32_t sign = (x >> 24) & 0x80u;
    const uint32_t abs = x & 0x7fffffffu;
    if (abs > 0x7f800000u) return 0x7fu;  // NaN
    const float max_finite = Decode(static_cast<uint8_t>(kMaxFinite));
    if (abs >= FloatBits(max_finite)) return static_cast<uint8_t>(sign | kMaxFinite);  // saturate (inf too)
    const int exp = static_cast<int>(abs >> 23);  // biased float exponent; 0: float zero or subnormal
    if (exp == 0) return static_cast<uint8_t>(sign);  // below 2^-126: far under half the smallest fp8
    const int e = exp - 127;                          // unbiased
    const uint32_t sig = (abs & 0x7fffffu) | 0x800000u;  // 24 bits, value sig * 2^(e - 23)
    constexpr int kMinExp = 1 - kBias;                   // the smallest normal's exponent
    const int shift = 23 - kMantissa + (e < kMinExp ? kMinExp - e : 0);
    if (shift > 25) return static_cast<uint8_t>(sign);  // under a quarter of the smallest subnormal
    uint32_t q = sig >> shift;
    const uint32_t rem = sig & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    uint32_t bits;
    if (e < kMinExp) {
      bits = q;  // subnormal; q == 1 << kMantissa is the smallest normal, encoded alike
    } else {
      // q in [2^m, 2^(m+1)]: a carry moves to the next exponent.
      const uint32_t biased = static_cast<uint32_t>(e + kBias) + (q >> (kMantissa + 1));
      bits = (biased << kMantissa) | (q & ((1u << kMantissa) - 1u));
    }
    if (bits > kMaxFinite) bits = kMaxFinite;
    return static_cast<uint8_t>(sign | bits);
  }
};

using E4M3Format = Fp8Format<3, 7, 0x7e, false>;
using E5M2Format = Fp8Format<2, 15, 0x7b, true>;

struct Fp8E4M3 {
  uint8_t bits;
  RINGO_HD_INLINE static Fp8E4M3 FromFloat(float f) { return Fp8E4M3{E4M3Format::Encode(f)}; }
  RINGO_HD_INLINE float ToFloat() const { return E4M3Format::Decode(bits); }
};

struct Fp8E5M2 {
  uint8_t bits;
  RINGO_HD_INLINE static Fp8E5M2 FromFloat(float f) { return Fp8E5M2{E5M2Format::Encode(f)}; }
  RINGO_HD_INLINE float ToFloat() const { return E5M2Format::Decode(bits); }
};

static_assert(sizeof(Fp8E4M3) == 1 && sizeof(Fp8E5M2) == 1, "8-bit storage");

}  // namespace ringo::base

#endif  // RINGO_BASE_DEVICE_FP8_H_
