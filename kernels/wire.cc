#include "kernels/wire.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

namespace ringo::kernels {

namespace {

using base::BFloat16;
using base::E4M3Format;
using base::E5M2Format;
using base::Half;

constexpr float kE4m3Max = 448.0f;
constexpr float kE5m2Max = 57344.0f;

// One value of an 8-bit block, already divided by the scale; infinities
// kept (the formats' own encoders saturate them).
template <typename Format, bool kHasInf>
inline uint8_t EncodeScaled(float x, float inv_scale) {
  if (std::isinf(x)) {
    const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
    return kHasInf ? static_cast<uint8_t>(sign | 0x7c) : uint8_t{0x7f};
  }
  return Format::Encode(x * inv_scale);
}

// The fast path of a block of finite values, whose scaled magnitudes are at
// most the format's largest finite value: round to nearest even with
// integer arithmetic on the float's bits, no branches, so the compiler
// vectorises it. kMantissa stored bits, exponent bias kBias. Normal range:
// add half a unit of the kept mantissa (less one, plus the kept lowest bit:
// ties to even) and keep the top bits, re-biasing the exponent; subnormal
// range (below 2^(1 - bias)): the value in units of the smallest subnormal,
// rounded by the float unit (2^23 added and taken away), which is the
// encoding itself (8 units of e4m3, the smallest normal, encode alike).
template <int kMantissa, int kBias>
inline uint8_t EncodeFinite(float y) {
  const uint32_t bits = base::FloatBits(y);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t abs = bits & 0x7fffffffu;
  constexpr int kDrop = 23 - kMantissa;
  const uint32_t rounded = abs + ((1u << (kDrop - 1)) - 1u) + ((abs >> kDrop) & 1u);
  const uint32_t normal = ((rounded >> kDrop) - (static_cast<uint32_t>(127 - kBias) << kMantissa)) & 0x7fu;
  constexpr float kUnits = static_cast<float>(1u << (kBias - 1 + kMantissa));  // 1 / smallest subnormal
  const float magic = 8388608.0f;                                                // 2^23
  const uint32_t sub = static_cast<uint32_t>(static_cast<int32_t>((base::BitsFloat(abs) * kUnits + magic) - magic));
  const uint32_t is_sub = abs < (static_cast<uint32_t>(127 + 1 - kBias) << 23) ? 0xffffffffu : 0u;
  return static_cast<uint8_t>(sign | (sub & is_sub) | (normal & ~is_sub));
}

// The largest finite magnitude of `len` values (0 for none) and whether
// every value is finite.
inline float FiniteAmax(const float* x, int len, bool* finite) {
  // On the magnitudes' bits: for non-negative floats the integer order is
  // the float order, and integer max vectorises where float max may not.
  int32_t amax = 0;
  int32_t bad = 0;
  for (int i = 0; i < len; ++i) {
    int32_t bits;
    std::memcpy(&bits, &x[i], 4);
    bits &= 0x7fffffff;
    const int32_t nonfinite = bits >= 0x7f800000 ? -1 : 0;
    bad |= nonfinite;
    bits &= ~nonfinite;  // a non-finite value counts as 0
    amax = amax > bits ? amax : bits;
  }
  *finite = bad == 0;
  float a;
  std::memcpy(&a, &amax, 4);
  return a;
}

template <int kMantissa, int kBias>
inline void EncodeFiniteBlock(const float* x, int len, float inv, uint8_t* out) {
  if (len == kWireBlock) {  // a constant trip count: vectorised
    for (int i = 0; i < kWireBlock; ++i) out[i] = EncodeFinite<kMantissa, kBias>(x[i] * inv);
  } else {
    for (int i = 0; i < len; ++i) out[i] = EncodeFinite<kMantissa, kBias>(x[i] * inv);
  }
}

template <typename Format, bool kHasInf, int kMantissa, int kBias>
__attribute__((always_inline)) inline void EncodeBlocks(const float* in, int64_t n, uint8_t* out, float max_finite) {
  for (int64_t b = 0; b < n; b += kWireBlock) {
    const int len = static_cast<int>(std::min<int64_t>(kWireBlock, n - b));
    const float* x = in + b;
    bool finite = true;
    const float amax = len == kWireBlock ? FiniteAmax(x, kWireBlock, &finite) : FiniteAmax(x, len, &finite);
    const int k = WireScaleExponent(amax, max_finite);
    *out++ = static_cast<uint8_t>(k + 127);
    const float inv = WirePow2(-k);
    if (finite) {
      EncodeFiniteBlock<kMantissa, kBias>(x, len, inv, out);
    } else {
      for (int i = 0; i < len; ++i) out[i] = EncodeScaled<Format, kHasInf>(x[i], inv);
    }
    out += len;
  }
}

// Every byte's value, once per format.
template <typename Format>
const float* DecodeTable() {
  static const auto* table = [] {
    auto* t = new float[256];
    for (int b = 0; b < 256; ++b) t[b] = Format::Decode(static_cast<uint8_t>(b));
    return t;
  }();
  return table;
}

template <typename Format, bool kAdd>
__attribute__((always_inline)) inline void DecodeBlocks(const uint8_t* in, int64_t n, float* out) {
  const float* table = DecodeTable<Format>();
  for (int64_t b = 0; b < n; b += kWireBlock) {
    const int len = static_cast<int>(std::min<int64_t>(kWireBlock, n - b));
    const float scale = WirePow2(static_cast<int>(*in++) - 127);
    float* o = out + b;
    for (int i = 0; i < len; ++i) {
      const float v = table[in[i]] * scale;
      if (kAdd) {
        o[i] += v;
      } else {
        o[i] = v;
      }
    }
    in += len;
  }
}

// The 8-bit span loops, compiled for AVX2 beside the baseline and chosen
// when the process starts (GCC's function multiversioning).
#define RINGO_WIRE_CLONES __attribute__((target_clones("avx2", "default")))
RINGO_WIRE_CLONES void EncodeE4m3(const float* in, int64_t n, uint8_t* out) {
  EncodeBlocks<E4M3Format, false, 3, 7>(in, n, out, kE4m3Max);
}
RINGO_WIRE_CLONES void EncodeE5m2(const float* in, int64_t n, uint8_t* out) {
  EncodeBlocks<E5M2Format, true, 2, 15>(in, n, out, kE5m2Max);
}
template <typename Format, bool kAdd>
RINGO_WIRE_CLONES void DecodeEight(const uint8_t* in, int64_t n, float* out) {
  DecodeBlocks<Format, kAdd>(in, n, out);
}

template <bool kAdd>
void Decode16(Wire w, const uint8_t* in, int64_t n, float* out) {
  const bool bf = w == Wire::kBf16;
  for (int64_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, in + 2 * i, 2);
    const float v = bf ? base::BFloat16BitsToFloat(bits) : base::HalfBitsToFloat(bits);
    if (kAdd) {
      out[i] += v;
    } else {
      out[i] = v;
    }
  }
}

template <bool kAdd>
void Decode(Wire w, const uint8_t* in, int64_t n, float* out) {
  switch (w) {
    case Wire::kNone:
      if (kAdd) {
        for (int64_t i = 0; i < n; ++i) {
          float v;
          std::memcpy(&v, in + 4 * i, 4);
          out[i] += v;
        }
      } else {
        std::memcpy(out, in, static_cast<size_t>(n) * 4);
      }
      return;
    case Wire::kBf16:
    case Wire::kFp16: Decode16<kAdd>(w, in, n, out); return;
    case Wire::kE4m3: DecodeEight<E4M3Format, kAdd>(in, n, out); return;
    case Wire::kE5m2: DecodeEight<E5M2Format, kAdd>(in, n, out); return;
  }
}

// Half a unit in the last place of |x| in a binary format with `mantissa`
// stored bits whose smallest normal exponent is `min_exp` (below it the
// spacing stays that of the smallest normal).
double HalfUlp(double x, int mantissa, int min_exp) {
  const double a = std::fabs(x);
  int e = a > 0 ? std::ilogb(a) : min_exp;
  if (e < min_exp) e = min_exp;
  return std::ldexp(1.0, e - mantissa - 1);
}

}  // namespace

const char* WireName(Wire w) {
  switch (w) {
    case Wire::kNone: return "none";
    case Wire::kBf16: return "bf16";
    case Wire::kFp16: return "fp16";
    case Wire::kE4m3: return "e4m3";
    case Wire::kE5m2: return "e5m2";
  }
  return "?";
}

bool ParseWire(const std::string& name, Wire* w) {
  std::string s;
  for (char c : name) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s == "none" || s == "off" || s == "fp32") {
    *w = Wire::kNone;
  } else if (s == "bf16") {
    *w = Wire::kBf16;
  } else if (s == "fp16") {
    *w = Wire::kFp16;
  } else if (s == "e4m3" || s == "fp8") {
    *w = Wire::kE4m3;
  } else if (s == "e5m2") {
    *w = Wire::kE5m2;
  } else {
    return false;
  }
  return true;
}

void WireEncode(Wire w, const float* in, int64_t n, uint8_t* out) {
  switch (w) {
    case Wire::kNone: std::memcpy(out, in, static_cast<size_t>(n) * 4); return;
    case Wire::kBf16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t b = base::FloatToBFloat16Bits(in[i]);
        std::memcpy(out + 2 * i, &b, 2);
      }
      return;
    case Wire::kFp16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t b = base::FloatToHalfBits(in[i]);
        std::memcpy(out + 2 * i, &b, 2);
      }
      return;
    case Wire::kE4m3: EncodeE4m3(in, n, out); return;
    case Wire::kE5m2: EncodeE5m2(in, n, out); return;
  }
}

void WireDecode(Wire w, const uint8_t* in, int64_t n, float* out) { Decode<false>(w, in, n, out); }

void WireDecodeAdd(Wire w, const uint8_t* in, int64_t n, float* acc) { Decode<true>(w, in, n, acc); }

void WireRound(Wire w, float* x, int64_t n) {
  if (w == Wire::kNone) return;
  uint8_t buf[kWireBlock * 2 + 1];
  for (int64_t b = 0; b < n; b += kWireBlock) {
    const int64_t len = std::min<int64_t>(kWireBlock, n - b);
    WireEncode(w, x + b, len, buf);
    WireDecode(w, buf, len, x + b);
  }
}

double WireErrorBound(Wire w, double x, double amax) {
  switch (w) {
    case Wire::kNone: return 0;
    case Wire::kBf16: return HalfUlp(x, 7, -126);
    case Wire::kFp16: return HalfUlp(x, 10, -14);
    case Wire::kE4m3:
    case Wire::kE5m2: {
      const bool e4 = w == Wire::kE4m3;
      const int k = WireScaleExponent(static_cast<float>(amax), e4 ? kE4m3Max : kE5m2Max);
      const double s = std::ldexp(1.0, k);
      return s * HalfUlp(x / s, e4 ? 3 : 2, e4 ? -6 : -14);
    }
  }
  return 0;
}

}  // namespace ringo::kernels
