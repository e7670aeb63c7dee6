// Wire formats: how fp32 values cross a link in fewer bytes when a
// communicator compresses what it sends between hosts (docs/wire.md).
//
//   bf16, fp16   2 bytes per value, rounded to nearest even (fp16: a
//                magnitude past 65504 becomes infinity, as IEEE rounding does)
//   e4m3, e5m2   1 byte per value plus one scale byte per block of
//                kWireBlock (32) values, as OCP's MX formats: the scale is a
//                power of two 2^k stored as k + 127 (E8M0); each value is
//                stored as value / 2^k in the 8-bit format, rounded to
//                nearest even. k is the smallest exponent that brings the
//                block's largest finite magnitude within the format's largest
//                finite value (448, 57344), so no finite value saturates
//                (MX's rule, k = floor(log2(amax)) - emax, can push the
//                largest values of a block past the format's range, where
//                they clip).
//
// A block is [scale byte][up to 32 value bytes]; the last block of a span
// may be shorter. Non-finite values stay non-finite: NaN as NaN, an
// infinity as infinity in bf16, fp16 and e5m2 and as NaN in e4m3, which has
// none; they do not enter the block's scale.
//
// The value and block codecs are __host__ __device__, so that GPU kernels
// encode and decode as the host does; the span loops are the host's.
#ifndef RINGO_KERNELS_WIRE_H_
#define RINGO_KERNELS_WIRE_H_

#include <cstdint>
#include <string>

#include "base/device/dtype.h"
#include "base/device/fp8.h"
#include "base/device/half.h"
#include "base/device/macros.h"

namespace ringo::kernels {

// Values equal ringoWire_t's.
enum class Wire : int { kNone = 0, kBf16 = 1, kFp16 = 2, kE4m3 = 3, kE5m2 = 4 };
inline constexpr int kWireBlock = 32;

const char* WireName(Wire w);  // "none", "bf16", "fp16", "e4m3", "e5m2"
// Parses a name as RINGO_WIRE spells it ("none", "bf16", "fp16", "e4m3" or
// "fp8", "e5m2"; any case); false for anything else.
bool ParseWire(const std::string& name, Wire* w);
inline bool ValidWire(int w) { return w >= 0 && w <= static_cast<int>(Wire::kE5m2); }

// Little-endian loads of a value that may sit at any byte (the host's and
// the GPU's byte order alike).
RINGO_HD_INLINE uint32_t LoadLe32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}
RINGO_HD_INLINE uint16_t LoadLe16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | p[1] << 8);
}

// Bytes on the wire for `n` values.
RINGO_HD_INLINE int64_t WireBytes(Wire w, int64_t n) {
  switch (w) {
    case Wire::kNone: return 4 * n;
    case Wire::kBf16:
    case Wire::kFp16: return 2 * n;
    case Wire::kE4m3:
    case Wire::kE5m2: return n + (n + kWireBlock - 1) / kWireBlock;
  }
  return 4 * n;
}

// 2^k as a float, k in [-127, 127] (2^-127 is subnormal, exact).
RINGO_HD_INLINE float WirePow2(int k) {
  if (k >= -126) return base::BitsFloat(static_cast<uint32_t>(k + 127) << 23);
  return base::BitsFloat(0x00400000u);  // 2^-127
}

// The block scale's exponent for a block whose largest finite magnitude is
// `amax`, for an 8-bit format whose largest finite value is `max_finite`:
// the smallest k in [-127, 127] with amax / 2^k <= max_finite.
RINGO_HD_INLINE int WireScaleExponent(float amax, float max_finite) {
  if (!(amax > 0.0f)) return -127;
  const uint32_t a = base::FloatBits(amax), m = base::FloatBits(max_finite);
  const int ea = static_cast<int>((a >> 23) & 0xffu);
  const int em = static_cast<int>((m >> 23) & 0xffu);
  int k;
  if (ea != 0) {
    // Both normal: amax / 2^k <= max_finite holds at k = ea - em exactly
    // when amax's significand is at most max_finite's, else one more.
    k = ea - em + ((a & 0x7fffffu) > (m & 0x7fffffu) ? 1 : 0);
  } else {
    // A subnormal amax: from a guess, a step at a time.
    k = 1 - em;
    while (k > -127 && amax * WirePow2(1 - k) <= max_finite) --k;
  }
  if (k < -127) k = -127;
  if (k > 127) k = 127;
  return k;
}

// ---- One value, one block: host and device alike ----
//
// What a GPU kernel runs, thread by thread (kernels/cuda/ring_wire.cu), and
// what the span loops below compute faster on the host; kernels/wire_test
// checks that both give the same bytes and values.

inline constexpr float kWireE4m3Max = 448.0f;
inline constexpr float kWireE5m2Max = 57344.0f;

RINGO_HD_INLINE bool WireIsFinite(float x) { return (base::FloatBits(x) & 0x7f800000u) != 0x7f800000u; }

// Where value i of a span of values in `w` starts (8-bit: past its block's
// scale byte; only a span's last block can be short).
RINGO_HD_INLINE int64_t WireValueOffset(Wire w, int64_t i) {
  switch (w) {
    case Wire::kNone: return 4 * i;
    case Wire::kBf16:
    case Wire::kFp16: return 2 * i;
    case Wire::kE4m3:
    case Wire::kE5m2: return i / kWireBlock * (kWireBlock + 1) + 1 + i % kWireBlock;
  }
  return 4 * i;
}

// One 8-bit value already multiplied by its block's 1 / 2^k (`inv`); an
// infinity stays one in e5m2 and becomes NaN in e4m3.
RINGO_HD_INLINE uint8_t WireEncodeEight(Wire w, float x, float inv) {
  const uint32_t bits = base::FloatBits(x);
  if ((bits & 0x7fffffffu) == 0x7f800000u) {
    return w == Wire::kE5m2 ? static_cast<uint8_t>(((bits >> 24) & 0x80u) | 0x7cu) : uint8_t{0x7f};
  }
  return w == Wire::kE5m2 ? base::E5M2Format::Encode(x * inv) : base::E4M3Format::Encode(x * inv);
}

// One 8-bit block of `len` (1 to 32) values: its scale byte, then the values.
RINGO_HD_INLINE void WireEncodeEightBlock(Wire w, const float* x, int len, uint8_t* out) {
  float amax = 0.0f;
  for (int i = 0; i < len; ++i) {
    const float a = base::BitsFloat(base::FloatBits(x[i]) & 0x7fffffffu);
    if (WireIsFinite(a) && a > amax) amax = a;
  }
  const int k = WireScaleExponent(amax, w == Wire::kE5m2 ? kWireE5m2Max : kWireE4m3Max);
  out[0] = static_cast<uint8_t>(k + 127);
  const float inv = WirePow2(-k);
  for (int i = 0; i < len; ++i) out[1 + i] = WireEncodeEight(w, x[i], inv);
}

// A 16-bit value's bits.
RINGO_HD_INLINE uint16_t WireEncodeSixteen(Wire w, float x) {
  return w == Wire::kBf16 ? base::FloatToBFloat16Bits(x) : base::FloatToHalfBits(x);
}

// Value i of a span of values in `w` (kNone: fp32), as fp32.
RINGO_HD_INLINE float WireDecodeAt(Wire w, const uint8_t* in, int64_t i) {
  const uint8_t* at = in + WireValueOffset(w, i);
  switch (w) {
    case Wire::kNone: return base::BitsFloat(LoadLe32(at));
    case Wire::kBf16: return base::BFloat16BitsToFloat(LoadLe16(at));
    case Wire::kFp16: return base::HalfBitsToFloat(LoadLe16(at));
    case Wire::kE4m3:
    case Wire::kE5m2: {
      const float scale = WirePow2(static_cast<int>(in[i / kWireBlock * (kWireBlock + 1)]) - 127);  // the block's
      return (w == Wire::kE4m3 ? base::E4M3Format::Decode(*at) : base::E5M2Format::Decode(*at)) * scale;
    }
  }
  return 0.0f;
}

// ---- A stage's unit of work: a GPU thread's, or a host loop's ----
//
// The stages of the staged wire schedule (collectives/engines/gpu_wire.h):
// the kernels of kernels/cuda/ring_wire.cu run one unit per thread, the
// host stages loop over the units, so both compute alike. Buffers hold fp32,
// bf16 or fp16 (`dtype`).

RINGO_HD_INLINE float WireLoad(base::DataType dtype, const void* p, int64_t i) {
  switch (dtype) {
    case base::DataType::kBFloat16: return base::BFloat16BitsToFloat(static_cast<const uint16_t*>(p)[i]);
    case base::DataType::kFloat16: return base::HalfBitsToFloat(static_cast<const uint16_t*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

RINGO_HD_INLINE void WireStore(base::DataType dtype, void* p, int64_t i, float v) {
  switch (dtype) {
    case base::DataType::kBFloat16: static_cast<uint16_t*>(p)[i] = base::FloatToBFloat16Bits(v); return;
    case base::DataType::kFloat16: static_cast<uint16_t*>(p)[i] = base::FloatToHalfBits(v); return;
    default: static_cast<float*>(p)[i] = v; return;
  }
}

// Units of an encode of `n` values: one per value, one per block for the
// 8-bit formats.
RINGO_HD_INLINE int64_t WireEncodeUnits(Wire w, int64_t n) {
  return w == Wire::kE4m3 || w == Wire::kE5m2 ? (n + kWireBlock - 1) / kWireBlock : n;
}

// Unit u of encoding the `n` values of `dtype` at `src`, each times `scale`
// (1: as it is), into `out` in `w` (kNone: fp32).
RINGO_HD_INLINE void WireEncodeUnit(Wire w, base::DataType dtype, const void* src, int64_t n, float scale,
                                    uint8_t* out, int64_t u) {
  if (w == Wire::kE4m3 || w == Wire::kE5m2) {
    const int64_t at = u * kWireBlock;
    const int len = static_cast<int>(n - at < kWireBlock ? n - at : kWireBlock);
    float x[kWireBlock];
    for (int i = 0; i < len; ++i) {
      const float v = WireLoad(dtype, src, at + i);
      x[i] = scale == 1.0f ? v : v * scale;
    }
    WireEncodeEightBlock(w, x, len, out + u * (kWireBlock + 1));
    return;
  }
  const float v0 = WireLoad(dtype, src, u);
  const float v = scale == 1.0f ? v0 : v0 * scale;
  if (w == Wire::kNone) {
    reinterpret_cast<float*>(out)[u] = v;
  } else {
    reinterpret_cast<uint16_t*>(out)[u] = WireEncodeSixteen(w, v);
  }
}

// One contribution to a staged sum: a piece of values, in the call's wire
// where `wired` (it crossed the network), fp32 otherwise.
struct WireSource {
  const uint8_t* bytes;
  int32_t wired;
  int32_t reserved;
};

// Value i of the sum over `sources`, in order, each addition in fp32.
RINGO_HD_INLINE float WireSumAt(const WireSource* sources, int nsources, Wire w, int64_t i) {
  float a = 0.0f;
  for (int r = 0; r < nsources; ++r) {
    const float v = WireDecodeAt(sources[r].wired != 0 ? w : Wire::kNone, sources[r].bytes, i);
    a = r == 0 ? v : a + v;
  }
  return a;
}

// ---- Spans, on the host ----

// Encodes `n` values into `out` (WireBytes(w, n) bytes); kNone copies them.
void WireEncode(Wire w, const float* in, int64_t n, uint8_t* out);
// Decodes `n` values: out = decoded.
void WireDecode(Wire w, const uint8_t* in, int64_t n, float* out);
// Decodes and adds: acc += decoded, each addition in fp32.
void WireDecodeAdd(Wire w, const uint8_t* in, int64_t n, float* acc);
// Rounds in place through the wire format: x = Decode(Encode(x)) (what a
// value sent once is on arrival).
void WireRound(Wire w, float* x, int64_t n);

// The largest error one encoding can make on a value `x` of a block whose
// largest finite magnitude is `amax` (bf16 and fp16 ignore amax): half a unit
// in the last place of the value as stored (for the 8-bit formats, of
// x / 2^k, including the subnormal range), times the scale. For tests and
// docs: the bounds the error tables check.
double WireErrorBound(Wire w, double x, double amax);

}  // namespace ringo::kernels

#endif  // RINGO_KERNELS_WIRE_H_
