// The test oracle; see reference.h for the reference semantics.
#include "tests/reference.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>

namespace ringo::tests {

const ringoDataType_t kAllDataTypes[10] = {ringoInt8,    ringoUint8,   ringoInt32,   ringoUint32,
                                           ringoInt64,   ringoUint64,  ringoFloat16, ringoFloat32,
                                           ringoFloat64, ringoBfloat16};
const ringoDataType_t kEveryDataType[12] = {ringoInt8,    ringoUint8,    ringoInt32,      ringoUint32,
                                            ringoInt64,   ringoUint64,   ringoFloat16,    ringoFloat32,
                                            ringoFloat64, ringoBfloat16, ringoFloat8e4m3, ringoFloat8e5m2};
const ringoRedOp_t kAllOps[5] = {ringoSum, ringoProd, ringoMax, ringoMin, ringoAvg};

namespace {

// How many mismatches a failure message lists before summarising.
constexpr int kMaxReported = 5;

// splitmix64: cheap, well mixed, and the same on every platform.
uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t Hash(uint32_t seed, int rank, size_t i) {
  return Mix((static_cast<uint64_t>(seed) << 40) ^ (static_cast<uint64_t>(rank) << 32) ^
             Mix(static_cast<uint64_t>(i)));
}

// Bits of a float type with `mant_bits` explicit mantissa bits and exponent
// bias `bias`, from double, round-to-nearest-even (std::nearbyint in the
// default rounding mode).
// The general conversion (rounding to nearest even, subnormals, overflow).
uint16_t DoubleToSmallFloatRounded(double v, int mant_bits, int bias, int exp_bits);

uint16_t DoubleToSmallFloat(double v, int mant_bits, int bias, int exp_bits) {
  // The usual case first, straight from the bits: a normal value the format
  // holds exactly (the inputs are small multiples of powers of two), or zero.
  uint64_t d;
  std::memcpy(&d, &v, sizeof(d));
  const uint16_t sign = static_cast<uint16_t>((d >> 63) << 15);
  const int dexp = static_cast<int>((d >> 52) & 0x7ff);
  const uint64_t dmant = d & ((uint64_t{1} << 52) - 1);
  if (dexp == 0 && dmant == 0) return sign;
  const int e = dexp - 1023 + bias;
  if (dexp != 0 && dexp != 0x7ff && e >= 1 && e < (1 << exp_bits) - 1 &&
      (dmant & ((uint64_t{1} << (52 - mant_bits)) - 1)) == 0) {
    return sign | static_cast<uint16_t>((e << mant_bits) | static_cast<unsigned>(dmant >> (52 - mant_bits)));
  }
  return DoubleToSmallFloatRounded(v, mant_bits, bias, exp_bits);
}

uint16_t DoubleToSmallFloatRounded(double v, int mant_bits, int bias, int exp_bits) {
  const uint16_t sign = std::signbit(v) ? static_cast<uint16_t>(1u << 15) : 0;
  const uint16_t exp_all_ones = static_cast<uint16_t>(((1u << exp_bits) - 1) << mant_bits);
  if (std::isnan(v)) return static_cast<uint16_t>(exp_all_ones | (1u << (mant_bits - 1)));
  double a = std::fabs(v);
  if (std::isinf(a)) return sign | exp_all_ones;
  const int min_exp = 1 - bias;  // exponent of the smallest normal
  const double mant_scale = std::ldexp(1.0, mant_bits);
  if (a < std::ldexp(1.0, min_exp)) {
    // Subnormal: units of 2^(min_exp - mant_bits); rounding up to 2^mant_bits
    // lands exactly on the smallest normal's encoding.
    double m = std::nearbyint(std::ldexp(a, mant_bits - min_exp));
    return sign | static_cast<uint16_t>(m);
  }
  int e2 = 0;
  double f = std::frexp(a, &e2);  // a = f * 2^e2, f in [0.5, 1)
  int e = e2 - 1;                 // a = (2f) * 2^e, 2f in [1, 2)
  double m = std::nearbyint((2 * f - 1) * mant_scale);
  if (m >= mant_scale) {
    m = 0;
    ++e;
  }
  if (e + bias >= (1 << exp_bits) - 1) return sign | exp_all_ones;  // overflow: infinity
  return sign | static_cast<uint16_t>(((e + bias) << mant_bits) | static_cast<unsigned>(m));
}

double SmallFloatToDouble(uint16_t bits, int mant_bits, int bias, int exp_bits) {
  const bool neg = (bits >> 15) & 1;
  const int e = (bits >> mant_bits) & ((1 << exp_bits) - 1);
  const unsigned m = bits & ((1u << mant_bits) - 1);
  double v;
  if (e != 0 && e != (1 << exp_bits) - 1) {  // normal: the double's bits directly
    const uint64_t d = (static_cast<uint64_t>(neg) << 63) | (static_cast<uint64_t>(e - bias + 1023) << 52) |
                       (static_cast<uint64_t>(m) << (52 - mant_bits));
    std::memcpy(&v, &d, sizeof(v));
    return v;
  }
  if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - bias - mant_bits);
  } else if (e == (1 << exp_bits) - 1) {
    v = m == 0 ? INFINITY : NAN;
  } else {
    v = std::ldexp(1.0 + m / std::ldexp(1.0, mant_bits), e - bias);
  }
  return neg ? -v : v;
}

// A value for rank `rank`, element i, chosen per op as documented in
// reference.h. Integers: returned as int64 (truncated by WriteInt).
double FloatInput(ringoRedOp_t op, uint64_t h) {
  switch (op) {
    case ringoSum:
    case ringoAvg:
      return (static_cast<int>(h % 33) - 16) / 4.0;  // [-4, 4] in steps of 1/4
    case ringoProd: {
      static const double kFactors[5] = {1.0, 2.0, -1.0, 0.5, -2.0};
      return kFactors[h % 5];
    }
    default:  // max, min, and the non-reducing collectives
      return (static_cast<int>(h % 2001) - 1000) / 8.0;
  }
}

uint64_t IntInput(ringoDataType_t dt, ringoRedOp_t op, uint64_t h) {
  const bool is_signed = IsSignedInt(dt);
  switch (op) {
    case ringoAvg:
      // |sum| over 8 ranks stays within int8/uint8: [-16, 15] or [0, 31].
      return is_signed ? static_cast<uint64_t>(static_cast<int64_t>(h % 32) - 16) : h % 32;
    case ringoProd: {
      // Small factors: products wrap for 8-bit types (as the reference does)
      // without collapsing to 0 as quickly as large values would.
      static const int64_t kSigned[6] = {1, 2, 3, -1, -2, -3};
      static const int64_t kUnsigned[3] = {1, 2, 3};
      return is_signed ? static_cast<uint64_t>(kSigned[h % 6]) : kUnsigned[h % 3];
    }
    default:  // sum (wraps on purpose), max, min, non-reducing: full range
      return h;
  }
}

uint64_t ReduceInts(ringoDataType_t dt, ringoRedOp_t op, const uint64_t* v, int n) {
  const bool is_signed = IsSignedInt(dt);
  uint64_t acc = v[0];
  for (int r = 1; r < n; ++r) {
    switch (op) {
      case ringoSum:
      case ringoAvg:
        acc += v[r];
        break;
      case ringoProd:
        acc *= v[r];
        break;
      case ringoMax:
        if (is_signed ? static_cast<int64_t>(v[r]) > static_cast<int64_t>(acc) : v[r] > acc)
          acc = v[r];
        break;
      case ringoMin:
        if (is_signed ? static_cast<int64_t>(v[r]) < static_cast<int64_t>(acc) : v[r] < acc)
          acc = v[r];
        break;
      default:
        std::abort();
    }
  }
  if (op == ringoAvg) {
    // Small inputs: the sum is exact in the type, so divide it as int64/uint64.
    acc = is_signed ? static_cast<uint64_t>(static_cast<int64_t>(acc) / n) : acc / n;
  }
  return acc;
}

}  // namespace

size_t DataTypeSize(ringoDataType_t dt) {
  switch (dt) {
    case ringoInt8:
    case ringoUint8:
    case ringoFloat8e4m3:
    case ringoFloat8e5m2:
      return 1;
    case ringoFloat16:
    case ringoBfloat16:
      return 2;
    case ringoInt32:
    case ringoUint32:
    case ringoFloat32:
      return 4;
    case ringoInt64:
    case ringoUint64:
    case ringoFloat64:
      return 8;
    default:
      return 0;
  }
}

bool IsFloatType(ringoDataType_t dt) {
  return dt == ringoFloat16 || dt == ringoFloat32 || dt == ringoFloat64 || dt == ringoBfloat16;
}

bool IsSignedInt(ringoDataType_t dt) {
  return dt == ringoInt8 || dt == ringoInt32 || dt == ringoInt64;
}

const char* DataTypeName(ringoDataType_t dt) {
  switch (dt) {
    case ringoInt8:
      return "int8";
    case ringoUint8:
      return "uint8";
    case ringoFloat8e4m3:
      return "float8e4m3";
    case ringoFloat8e5m2:
      return "float8e5m2";
    case ringoInt32:
      return "int32";
    case ringoUint32:
      return "uint32";
    case ringoInt64:
      return "int64";
    case ringoUint64:
      return "uint64";
    case ringoFloat16:
      return "float16";
    case ringoFloat32:
      return "float32";
    case ringoFloat64:
      return "float64";
    case ringoBfloat16:
      return "bfloat16";
    default:
      return "unknown_type";
  }
}

const char* OpName(ringoRedOp_t op) {
  switch (op) {
    case ringoSum:
      return "sum";
    case ringoProd:
      return "prod";
    case ringoMax:
      return "max";
    case ringoMin:
      return "min";
    case ringoAvg:
      return "avg";
    default:
      return "unknown_op";
  }
}

double Epsilon(ringoDataType_t dt) {
  switch (dt) {
    case ringoFloat16:
      return std::ldexp(1.0, -10);
    case ringoBfloat16:
      return std::ldexp(1.0, -7);
    case ringoFloat32:
      return std::ldexp(1.0, -23);
    case ringoFloat64:
      return std::ldexp(1.0, -52);
    default:
      return 0;
  }
}

uint16_t DoubleToHalfBits(double v) { return DoubleToSmallFloat(v, 10, 15, 5); }
double HalfBitsToDouble(uint16_t bits) { return SmallFloatToDouble(bits, 10, 15, 5); }
uint16_t DoubleToBf16Bits(double v) { return DoubleToSmallFloat(v, 7, 127, 8); }
double Bf16BitsToDouble(uint16_t bits) { return SmallFloatToDouble(bits, 7, 127, 8); }

uint64_t ReadInt(ringoDataType_t dt, const void* base, size_t i) {
  const auto* p = static_cast<const unsigned char*>(base);
  switch (dt) {
    case ringoInt8: {
      int8_t x;
      std::memcpy(&x, p + i, 1);
      return static_cast<uint64_t>(int64_t{x});
    }
    case ringoUint8: {
      uint8_t x;
      std::memcpy(&x, p + i, 1);
      return x;
    }
    case ringoInt32: {
      int32_t x;
      std::memcpy(&x, p + 4 * i, 4);
      return static_cast<uint64_t>(int64_t{x});
    }
    case ringoUint32: {
      uint32_t x;
      std::memcpy(&x, p + 4 * i, 4);
      return x;
    }
    case ringoInt64:
    case ringoUint64: {
      uint64_t x;
      std::memcpy(&x, p + 8 * i, 8);
      return x;
    }
    default:
      std::abort();
  }
}

void WriteInt(ringoDataType_t dt, void* base, size_t i, uint64_t v) {
  auto* p = static_cast<unsigned char*>(base);
  const size_t size = DataTypeSize(dt);
  // Little-endian: the low `size` bytes are the truncated value.
  unsigned char bytes[8];
  std::memcpy(bytes, &v, 8);
  std::memcpy(p + size * i, bytes, size);
}

double ReadFloat(ringoDataType_t dt, const void* base, size_t i) {
  const auto* p = static_cast<const unsigned char*>(base);
  switch (dt) {
    case ringoFloat16: {
      uint16_t b;
      std::memcpy(&b, p + 2 * i, 2);
      return HalfBitsToDouble(b);
    }
    case ringoBfloat16: {
      uint16_t b;
      std::memcpy(&b, p + 2 * i, 2);
      return Bf16BitsToDouble(b);
    }
    case ringoFloat32: {
      float x;
      std::memcpy(&x, p + 4 * i, 4);
      return x;
    }
    case ringoFloat64: {
      double x;
      std::memcpy(&x, p + 8 * i, 8);
      return x;
    }
    default:
      std::abort();
  }
}

void WriteFloat(ringoDataType_t dt, void* base, size_t i, double v) {
  auto* p = static_cast<unsigned char*>(base);
  switch (dt) {
    case ringoFloat16: {
      uint16_t b = DoubleToHalfBits(v);
      std::memcpy(p + 2 * i, &b, 2);
      return;
    }
    case ringoBfloat16: {
      uint16_t b = DoubleToBf16Bits(v);
      std::memcpy(p + 2 * i, &b, 2);
      return;
    }
    case ringoFloat32: {
      float x = static_cast<float>(v);
      std::memcpy(p + 4 * i, &x, 4);
      return;
    }
    case ringoFloat64: {
      std::memcpy(p + 8 * i, &v, 8);
      return;
    }
    default:
      std::abort();
  }
}

std::string FormatElement(ringoDataType_t dt, const void* base, size_t i) {
  std::ostringstream out;
  if (IsFloatType(dt)) {
    out.precision(17);
    out << ReadFloat(dt, base, i);
  } else if (IsSignedInt(dt)) {
    out << static_cast<int64_t>(ReadInt(dt, base, i));
  } else {
    out << ReadInt(dt, base, i);
  }
  return out.str();
}

void FillInput(ringoDataType_t dt, ringoRedOp_t op, uint32_t seed, int rank, void* dst, size_t n) {
  if (IsFloatType(dt)) {
    for (size_t i = 0; i < n; ++i) WriteFloat(dt, dst, i, FloatInput(op, Hash(seed, rank, i)));
  } else {
    for (size_t i = 0; i < n; ++i) WriteInt(dt, dst, i, IntInput(dt, op, Hash(seed, rank, i)));
  }
}

ReducedReference ReduceInputs(ringoDataType_t dt, ringoRedOp_t op, uint32_t seed, int nranks,
                              size_t nelems) {
  const size_t size = DataTypeSize(dt);
  ReducedReference ref;
  ref.bytes.resize(nelems * size);
  // Generate each rank's input once, in the type, so the reference reduces
  // exactly the values Ringo sees.
  // (Not value-initialised: FillInput writes every byte.)
  std::vector<std::unique_ptr<unsigned char[]>> inputs(nranks);
  for (int r = 0; r < nranks; ++r) {
    inputs[r].reset(new unsigned char[nelems * size]);
    FillInput(dt, op, seed, r, inputs[r].get(), nelems);
  }
  const bool float_avg = IsFloatType(dt) && op == ringoAvg;
  if (float_avg) {
    ref.value.resize(nelems);
    ref.tolerance.resize(nelems);
  }
  std::vector<uint64_t> ints(nranks);
  for (size_t i = 0; i < nelems; ++i) {
    if (!IsFloatType(dt)) {
      for (int r = 0; r < nranks; ++r) ints[r] = ReadInt(dt, inputs[r].get(), i);
      WriteInt(dt, ref.bytes.data(), i, ReduceInts(dt, op, ints.data(), nranks));
      continue;
    }
    double acc = ReadFloat(dt, inputs[0].get(), i);
    double abs_sum = std::fabs(acc);
    for (int r = 1; r < nranks; ++r) {
      double x = ReadFloat(dt, inputs[r].get(), i);
      abs_sum += std::fabs(x);
      switch (op) {
        case ringoSum:
        case ringoAvg:
          acc += x;
          break;
        case ringoProd:
          acc *= x;
          break;
        case ringoMax:
          acc = std::fmax(acc, x);
          break;
        case ringoMin:
          acc = std::fmin(acc, x);
          break;
        default:
          std::abort();
      }
    }
    if (float_avg) {
      acc /= nranks;
      ref.value[i] = acc;
      ref.tolerance[i] = static_cast<float>((nranks + 2) * Epsilon(dt) * abs_sum / nranks);
    }
    WriteFloat(dt, ref.bytes.data(), i, acc);
  }
  return ref;
}

std::string CompareToReference(ringoDataType_t dt, const void* got, size_t count,
                               const ReducedReference& want, size_t want_offset) {
  if (want.value.empty()) {
    return CompareBytes(dt, got, want.bytes.data() + want_offset * DataTypeSize(dt), count);
  }
  std::ostringstream out;
  out.precision(17);
  size_t bad = 0;
  for (size_t i = 0; i < count; ++i) {
    double g = ReadFloat(dt, got, i);
    double w = want.value[want_offset + i];
    double tol = want.tolerance[want_offset + i];
    if (std::fabs(g - w) <= tol) continue;  // NaN fails here too
    if (bad < kMaxReported) {
      out << (bad ? "," : "") << " [" << i << "] got " << g << " want " << w << " (tolerance "
          << tol << ")";
    }
    ++bad;
  }
  if (bad == 0) return "";
  return std::to_string(bad) + " of " + std::to_string(count) + " elements wrong:" + out.str() +
         ";";
}

std::string CompareBytes(ringoDataType_t dt, const void* got, const void* want, size_t count) {
  const size_t size = DataTypeSize(dt);
  if (count == 0 || std::memcmp(got, want, count * size) == 0) return "";
  std::ostringstream out;
  size_t bad = 0;
  const auto* g = static_cast<const unsigned char*>(got);
  const auto* w = static_cast<const unsigned char*>(want);
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(g + i * size, w + i * size, size) == 0) continue;
    if (bad < kMaxReported) {
      out << (bad ? "," : "") << " [" << i << "] got " << FormatElement(dt, got, i) << " want "
          << FormatElement(dt, want, i);
    }
    ++bad;
  }
  return std::to_string(bad) + " of " + std::to_string(count) + " elements wrong:" + out.str() +
         ";";
}

}  // namespace ringo::tests
