// The arithmetic of ringo-perf's verification data (verify.h), written once
// for the host verifier and the CUDA kernels that fill inputs and count wrong
// elements on the device (verify_cuda.cu): what a rank feeds in at a global
// index, what it must get back there, and how far off a result may be. Pure
// __host__ __device__ functions of a plain PatternSpec passed by value.
#ifndef RINGO_TOOLS_PERF_PATTERN_MATH_H_
#define RINGO_TOOLS_PERF_PATTERN_MATH_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "base/device/dtype.h"
#include "base/device/half.h"
#include "base/device/macros.h"

namespace ringo::perf {

// The datatypes ringo-perf measures and verifies: every ringoDataType_t but
// the fp8 formats, whose 3 or 2 mantissa bits do not hold the verification
// data exactly (base::DataType 0..9).
inline constexpr int kPerfDataTypes = 10;

// Ranks that may contribute a 2 to a product: 2^6 = 64 fits int8.
inline constexpr int kProdRanks = 6;
// OwnedValue's modulus: values 0..100 fit every type exactly.
inline constexpr uint64_t kOwnedModulus = 101;

// Where a run's elements come from, which is all the arithmetic needs to
// know of the collective.
enum class PatternSource : int32_t {
  kReduce = 0,     // allreduce, reducescatter, reduce: every rank's ReduceInput, op-reduced
  kAllGather = 1,  // rank r owns the block [r * block_count, (r + 1) * block_count)
  kBroadcast = 2,  // the root owns everything
  kSendRecv = 3,   // each rank's own data, received by the next rank
  kAllToAll = 4,   // block p of rank r's data goes to rank p (block_count elements a block)
};

// One rank's view of one run, trivially copyable (a kernel argument).
struct PatternSpec {
  PatternSource source = PatternSource::kReduce;
  base::RedOp op = base::RedOp::kSum;
  base::DataType type = base::DataType::kFloat32;
  int32_t rank = 0;
  int32_t nranks = 1;
  int32_t root = 0;
  uint64_t block_count = 0;  // allgather: elements each rank sends
  uint64_t sum_modulus = 1;  // sum/avg inputs are 0..sum_modulus-1
  // A wire format's unit roundoff where the collective crosses hosts in it
  // (ringo-perf --wire): each contribution and the result round once more.
  double wire_roundoff = 0;
};

// Sums stay <= 120: in int8's range and exact in bfloat16 (8-bit mantissa).
RINGO_HD constexpr uint64_t SumModulus(int nranks) {
  const int per_rank = 120 / nranks;
  return static_cast<uint64_t>(per_rank < 1 ? 1 : per_rank > 15 ? 15 : per_rank) + 1;
}

RINGO_HD constexpr bool IsFloatType(base::DataType t) {
  return t == base::DataType::kFloat16 || t == base::DataType::kBFloat16 ||
         t == base::DataType::kFloat32 || t == base::DataType::kFloat64;
}

// Unit roundoff of each floating-point type (exact powers of two).
RINGO_HD constexpr double UnitRoundoff(base::DataType t) {
  switch (t) {
    case base::DataType::kFloat16:
      return 1.0 / 2048;  // 2^-11
    case base::DataType::kBFloat16:
      return 1.0 / 256;  // 2^-8
    case base::DataType::kFloat32:
      return 1.0 / 16777216;  // 2^-24
    case base::DataType::kFloat64:
      return 1.0 / 9007199254740992.0;  // 2^-53
    default:
      return 0;
  }
}

// Data owned by rank r at g for allgather and broadcast (wider range: nothing is summed).
RINGO_HD constexpr double OwnedValue(int r, uint64_t g) {
  return static_cast<double>((g * 7 + static_cast<uint64_t>(r) * 3 + 1) % kOwnedModulus);
}

// Input of rank r at global index g for a reducing collective.
RINGO_HD constexpr double ReduceInput(const PatternSpec& s, int r, uint64_t g) {
  switch (s.op) {
    case base::RedOp::kSum:
    case base::RedOp::kAvg:
      return static_cast<double>((g * 7 + static_cast<uint64_t>(r) * 3 + 1) % s.sum_modulus);
    case base::RedOp::kProd:
      return (r < kProdRanks && ((g >> r) & 1)) ? 2.0 : 1.0;
    case base::RedOp::kMax:
    case base::RedOp::kMin:
      return OwnedValue(r, g);
    case base::RedOp::kPreMulSum:
      break;  // not measured by ringo-perf
  }
  return 0;
}

// This rank's input at global index g.
RINGO_HD constexpr double InputValue(const PatternSpec& s, uint64_t g) {
  switch (s.source) {
    case PatternSource::kAllGather:
    case PatternSource::kSendRecv:
    case PatternSource::kAllToAll:
      return OwnedValue(s.rank, g);
    case PatternSource::kBroadcast:
      return OwnedValue(s.root, g);
    case PatternSource::kReduce:
      break;
  }
  return ReduceInput(s, s.rank, g);
}

// The exact expected output at global index g.
RINGO_HD constexpr double ExpectedValue(const PatternSpec& s, uint64_t g) {
  if (s.source == PatternSource::kAllGather) {
    return OwnedValue(s.block_count ? static_cast<int>(g / s.block_count) : 0, g);
  }
  if (s.source == PatternSource::kBroadcast) return OwnedValue(s.root, g);
  if (s.source == PatternSource::kSendRecv) return OwnedValue((s.rank + s.nranks - 1) % s.nranks, g);
  if (s.source == PatternSource::kAllToAll) {
    // Element k of block q came from rank q, where it was element k of block `rank`.
    const uint64_t b = s.block_count ? s.block_count : 1;
    return OwnedValue(static_cast<int>(g / b), static_cast<uint64_t>(s.rank) * b + g % b);
  }
  double acc = ReduceInput(s, 0, g);
  for (int r = 1; r < s.nranks; ++r) {
    const double v = ReduceInput(s, r, g);
    switch (s.op) {
      case base::RedOp::kSum:
      case base::RedOp::kAvg:
        acc += v;
        break;
      case base::RedOp::kProd:
        acc *= v;
        break;
      case base::RedOp::kMax:
        acc = v > acc ? v : acc;
        break;
      case base::RedOp::kMin:
        acc = v < acc ? v : acc;
        break;
      case base::RedOp::kPreMulSum:
        break;
    }
  }
  if (s.op != base::RedOp::kAvg) return acc;
  // ringo.h: integer avg truncates toward zero; inputs are >= 0, so the
  // conversion below is the floor.
  return IsFloatType(s.type) ? acc / s.nranks
                             : static_cast<double>(static_cast<int64_t>(acc / s.nranks));
}

// Largest accepted |got - expected|. Every result but floating-point avg is
// exact: small integers, exact partial results.
RINGO_HD constexpr double ToleranceFor(const PatternSpec& s, double expected) {
  const double magnitude = expected < 0 ? -expected : expected;
  if (s.wire_roundoff > 0 && s.source == PatternSource::kReduce && IsFloatType(s.type) &&
      (s.op == base::RedOp::kSum || s.op == base::RedOp::kAvg)) {
    // Each rank's contribution (at most the pattern's largest value) and
    // the result rounded once in the wire format, besides avg's roundings.
    const double largest = magnitude > 128.0 ? magnitude : 128.0;
    const double avg = s.op == base::RedOp::kAvg ? UnitRoundoff(s.type) * (s.nranks + 2) * (magnitude > 1.0 ? magnitude : 1.0) : 0;
    return s.wire_roundoff * (s.nranks + 1) * largest + avg;
  }
  if (s.op != base::RedOp::kAvg || s.source != PatternSource::kReduce || !IsFloatType(s.type)) {
    return 0;
  }
  // Each x * (1/n) and each partial sum rounds once.
  return UnitRoundoff(s.type) * (s.nranks + 2) * (magnitude > 1.0 ? magnitude : 1.0);
}

// Element conversions; integers go through int64 so that a (rare) sum past
// the type's range wraps as two's-complement hardware does.
template <typename T>
RINGO_HD_INLINE T FromDouble(double v) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<int64_t>(v));
  } else if constexpr (std::is_same_v<T, base::Half> || std::is_same_v<T, base::BFloat16> ||
                       std::is_same_v<T, base::Fp8E4M3> || std::is_same_v<T, base::Fp8E5M2>) {
    return T::FromFloat(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
RINGO_HD_INLINE double ToDouble(T v) {
  if constexpr (std::is_same_v<T, base::Half> || std::is_same_v<T, base::BFloat16> ||
                std::is_same_v<T, base::Fp8E4M3> || std::is_same_v<T, base::Fp8E5M2>) {
    return v.ToFloat();
  } else {
    return static_cast<double>(v);
  }
}

// The value the expected result is compared with: rounded to T first (so
// integer wrap-around matches) unless a tolerance applies.
template <typename T>
RINGO_HD_INLINE double ComparedValue(double exact, double tolerance) {
  return tolerance > 0 ? exact : ToDouble(FromDouble<T>(exact));
}

// Whether `got` fails the check at global index g. A NaN (the poison left
// where nothing was written) fails the <=.
template <typename T>
RINGO_HD_INLINE bool IsWrongElement(const PatternSpec& s, uint64_t g, T got) {
  const double exact = ExpectedValue(s, g);
  const double tolerance = ToleranceFor(s, exact);
  const double diff = ToDouble(got) - ComparedValue<T>(exact, tolerance);
  return !((diff < 0 ? -diff : diff) <= tolerance);
}

// Calls f(T{}) with the C++ type of `t`: the one place a runtime DataType of
// ringo-perf's verification becomes a type (host code).
template <typename F>
void WithDataType(base::DataType t, F&& f) {
  switch (t) {
    case base::DataType::kInt8:
      return f(int8_t{});
    case base::DataType::kUint8:
      return f(uint8_t{});
    case base::DataType::kInt32:
      return f(int32_t{});
    case base::DataType::kUint32:
      return f(uint32_t{});
    case base::DataType::kInt64:
      return f(int64_t{});
    case base::DataType::kUint64:
      return f(uint64_t{});
    case base::DataType::kFloat16:
      return f(base::Half{});
    case base::DataType::kFloat32:
      return f(float{});
    case base::DataType::kFloat64:
      return f(double{});
    case base::DataType::kBFloat16:
      return f(base::BFloat16{});
    case base::DataType::kFloat8E4M3:
      return f(base::Fp8E4M3{});
    case base::DataType::kFloat8E5M2:
      return f(base::Fp8E5M2{});
  }
}

}  // namespace ringo::perf

#endif  // RINGO_TOOLS_PERF_PATTERN_MATH_H_
