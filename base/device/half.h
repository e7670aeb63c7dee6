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

// float -> binary16, round to nearest even; NaN stays NaN (quieted, payload
// bits kept), overflow gives inf. Written with selects, no branches, so host
// loops over arrays of Half vectorise. The subnormal results use the FPU's
// rounding (adding 0.5 aligns the half's last bit with the float's), which
// is round to nearest even unless the program changed the rounding mode.
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
  // At least the smallest normal half (2^-14): rebias the exponent from 127
  // to 15 and round at bit 13 (the carry may bump the exponent, up to inf).
  const uint32_t normal = ((abs + 0xfffu + ((abs >> 13) & 1u)) >> 13) - (112u << 10);
  // Below it: subnormal or zero.
  const uint32_t subnormal = FloatBits(BitsFloat(abs) + 0.5f) - 0x3f000000u;
  uint32_t h = abs < 0x38800000u ? subnormal : normal;
  h = abs >= 0x477ff000u ? 0x7c00u : h;                              // >= 65520: inf
  h = abs > 0x7f800000u ? (0x7e00u | ((abs >> 13) & 0x3ffu)) : h;  // NaN
  return static_cast<uint16_t>(sign | h);
}

// binary16 -> float, exact. Branch-free like FloatToHalfBits.
RINGO_HD_INLINE float HalfBitsToFloat(uint16_t h) {
#if defined(__CUDA_ARCH__)
  if ((h & 0x7c00u) != 0x7c00u || (h & 0x3ffu) == 0) {  // exact conversion; NaN below
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
  }
#endif
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = static_cast<uint32_t>(h & 0x7fffu) << 13;  // exponent and mantissa, float-aligned
  const uint32_t exp = em & 0x0f800000u;
  const uint32_t normal = em + (112u << 23);   // rebias from 15 to 127
  const uint32_t special = em + (224u << 23);  // inf or NaN: exponent 255, payload kept
  // Subnormal: 2^-14 * (1 + mant/1024) - 2^-14 = mant * 2^-24, exact.
  const uint32_t subnormal = FloatBits(BitsFloat(em + (113u << 23)) - BitsFloat(113u << 23));
  const uint32_t bits = exp == 0x0f800000u ? special : (exp == 0 ? subnormal : normal);
  return BitsFloat(sign | bits);
}

// float -> bfloat16, round to nearest even; NaN stays NaN.
RINGO_HD_INLINE uint16_t FloatToBFloat16Bits(float f) {
  const uint32_t x = FloatBits(f);
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const uint32_t nan = (x >> 16) | 0x40u;
  return static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
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
