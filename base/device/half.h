// IEEE binary16 (Half) and bfloat16 (BFloat16) as 16-bit storage types with
// round-to-nearest-even conversions written out, identical on host and device.
// Arithmetic happens in float: these types only store.
#ifndef RINGO_BASE_DEVICE_HALF_H_
#define RINGO_BASE_DEVICE_HALF_H_

#include <cstdint>
#include <cstring>

#include "base/device/macros.h"

namespace ringo::base {

RINGO_HD_INLINE uint32_t FloatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

RINGO_HD_INLINE float BitsFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

// float -> binary16, round to nearest even; NaN stays NaN, overflow gives inf.
RINGO_HD_INLINE uint16_t FloatToHalfBits(float f) {
  const uint32_t x = FloatBits(f);
#if defined(__CUDA_ARCH__)
  // The hardware conversion rounds the same way; NaN keeps the path below (payload bits).
  if ((x & 0x7fffffffu) <= 0x7f800000u) {
    uint16_t h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
  }
#endif
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN (quiet the NaN, keep payload bits)
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: inf
  if (abs < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    const int exp = static_cast<int>(abs >> 23);
    if (exp < 102) return static_cast<uint16_t>(sign);  // below 2^-25: rounds to zero
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - exp;  // 14..24
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1u))) ++h;  // may carry into the smallest normal
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (abs >> 13) - (112u << 10);  // rebias the exponent from 127 to 15
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // carry may bump the exponent
  return static_cast<uint16_t>(sign | h);
}

RINGO_HD_INLINE float HalfBitsToFloat(uint16_t h) {
#if defined(__CUDA_ARCH__)
  if ((h & 0x7c00u) != 0x7c00u || (h & 0x3ffu) == 0) {  // exact conversion; NaN below
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
  }
#endif
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return BitsFloat(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;  // mant * 2^-24, exact
    return sign ? -v : v;
  }
  return BitsFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

// float -> bfloat16, round to nearest even; NaN stays NaN.
RINGO_HD_INLINE uint16_t FloatToBFloat16Bits(float f) {
  const uint32_t x = FloatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

RINGO_HD_INLINE float BFloat16BitsToFloat(uint16_t b) {
  return BitsFloat(static_cast<uint32_t>(b) << 16);
}

// Storage types. Explicit conversions only, so no arithmetic happens in 16 bits by accident.
struct Half {
  uint16_t bits;
  RINGO_HD_INLINE static Half FromFloat(float f) { return Half{FloatToHalfBits(f)}; }
  RINGO_HD_INLINE float ToFloat() const { return HalfBitsToFloat(bits); }
};

struct BFloat16 {
  uint16_t bits;
  RINGO_HD_INLINE static BFloat16 FromFloat(float f) { return BFloat16{FloatToBFloat16Bits(f)}; }
  RINGO_HD_INLINE float ToFloat() const { return BFloat16BitsToFloat(bits); }
};

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2, "16-bit storage");

}  // namespace ringo::base

#endif  // RINGO_BASE_DEVICE_HALF_H_
