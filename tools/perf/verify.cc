#include "tools/perf/verify.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "base/device/half.h"

namespace ringo::perf {
namespace {

using base::DataType;
using base::RedOp;

// Ranks that may contribute a 2 to a product: 2^6 = 64 fits int8.
constexpr int kProdRanks = 6;
// OwnedValue's modulus: values 0..100 fit every type exactly.
constexpr size_t kOwnedModulus = 101;

bool IsFloat(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kFloat32 ||
         t == DataType::kFloat64;
}

// Unit roundoff of each floating-point type.
double Epsilon(DataType t) {
  switch (t) {
    case DataType::kFloat16: return std::ldexp(1.0, -11);
    case DataType::kBFloat16: return std::ldexp(1.0, -8);
    case DataType::kFloat32: return std::ldexp(1.0, -24);
    case DataType::kFloat64: return std::ldexp(1.0, -53);
    default: return 0;
  }
}

// Element conversions; integers go through int64 so that a (rare) sum past
// the type's range wraps as two's-complement hardware does.
template <typename T>
T FromDouble(double v) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<int64_t>(v));
  } else if constexpr (std::is_same_v<T, base::Half> || std::is_same_v<T, base::BFloat16>) {
    return T::FromFloat(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
double ToDouble(T v) {
  if constexpr (std::is_same_v<T, base::Half> || std::is_same_v<T, base::BFloat16>) {
    return v.ToFloat();
  } else {
    return static_cast<double>(v);
  }
}

// The one place a runtime DataType becomes a C++ type here.
template <typename F>
void WithType(DataType t, F&& f) {
  switch (t) {
    case DataType::kInt8: return f(int8_t{});
    case DataType::kUint8: return f(uint8_t{});
    case DataType::kInt32: return f(int32_t{});
    case DataType::kUint32: return f(uint32_t{});
    case DataType::kInt64: return f(int64_t{});
    case DataType::kUint64: return f(uint64_t{});
    case DataType::kFloat16: return f(base::Half{});
    case DataType::kFloat32: return f(float{});
    case DataType::kFloat64: return f(double{});
    case DataType::kBFloat16: return f(base::BFloat16{});
  }
}

}  // namespace

Pattern::Pattern(Collective c, RedOp op, DataType type, int rank, int nranks, int root,
                 const CollCounts& counts)
    : coll_(c),
      op_(op),
      type_(type),
      rank_(rank),
      nranks_(nranks),
      root_(root),
      counts_(counts),
      // Sums stay <= 120: in int8's range and exact in bfloat16 (8-bit mantissa).
      sum_modulus_(static_cast<size_t>(std::clamp(120 / nranks, 1, 15)) + 1) {}

bool Pattern::HasInput() const { return coll_ != Collective::kBroadcast || rank_ == root_; }
bool Pattern::HasOutput() const { return coll_ != Collective::kReduce || rank_ == root_; }

size_t Pattern::InputFirst() const {
  return coll_ == Collective::kAllGather ? rank_ * counts_.send_count : 0;
}

size_t Pattern::OutputFirst() const {
  return coll_ == Collective::kReduceScatter ? rank_ * counts_.recv_count : 0;
}

double Pattern::OwnedValue(int r, size_t g) {
  return static_cast<double>((g * 7 + static_cast<size_t>(r) * 3 + 1) % kOwnedModulus);
}

double Pattern::ReduceInput(int r, size_t g) const {
  switch (op_) {
    case RedOp::kSum:
    case RedOp::kAvg:
      return static_cast<double>((g * 7 + static_cast<size_t>(r) * 3 + 1) % sum_modulus_);
    case RedOp::kProd: return (r < kProdRanks && ((g >> r) & 1)) ? 2.0 : 1.0;
    case RedOp::kMax:
    case RedOp::kMin: return OwnedValue(r, g);
  }
  return 0;
}

double Pattern::Input(size_t g) const {
  switch (coll_) {
    case Collective::kAllGather: return OwnedValue(rank_, g);
    case Collective::kBroadcast: return OwnedValue(root_, g);
    default: return ReduceInput(rank_, g);
  }
}

double Pattern::Expected(size_t g) const {
  if (coll_ == Collective::kAllGather) {
    return OwnedValue(counts_.send_count ? static_cast<int>(g / counts_.send_count) : 0, g);
  }
  if (coll_ == Collective::kBroadcast) return OwnedValue(root_, g);
  double acc = ReduceInput(0, g);
  for (int r = 1; r < nranks_; ++r) {
    const double v = ReduceInput(r, g);
    switch (op_) {
      case RedOp::kSum:
      case RedOp::kAvg: acc += v; break;
      case RedOp::kProd: acc *= v; break;
      case RedOp::kMax: acc = std::max(acc, v); break;
      case RedOp::kMin: acc = std::min(acc, v); break;
    }
  }
  if (op_ != RedOp::kAvg) return acc;
  // ringo.h: integer avg truncates toward zero (inputs here are >= 0).
  return IsFloat(type_) ? acc / nranks_ : std::floor(acc / nranks_);
}

double Pattern::Tolerance(double expected) const {
  // Every other result is exact: small integers, exact partial results.
  if (op_ != RedOp::kAvg || !HasOp(coll_) || !IsFloat(type_)) return 0;
  // Each x * (1/n) and each partial sum rounds once.
  return Epsilon(type_) * (nranks_ + 2) * std::max(1.0, std::fabs(expected));
}

size_t Pattern::Period() const {
  if (!HasOp(coll_)) return kOwnedModulus;
  switch (op_) {
    case RedOp::kSum:
    case RedOp::kAvg: return sum_modulus_;
    case RedOp::kProd: return size_t{1} << kProdRanks;
    case RedOp::kMax:
    case RedOp::kMin: return kOwnedModulus;
  }
  return 1;
}

size_t Pattern::SegmentEnd(size_t g) const {
  if (coll_ != Collective::kAllGather || counts_.send_count == 0) return SIZE_MAX;
  return (g / counts_.send_count + 1) * counts_.send_count;
}

namespace {

// Calls body(start, end, n) for each stretch [start, end) of [first, first +
// count) in which values repeat with period n (n <= end - start).
template <typename Body>
void ForEachPeriodicStretch(const Pattern& pattern, size_t first, size_t count, Body&& body) {
  for (size_t start = first; start < first + count;) {
    const size_t end = std::min(first + count, pattern.SegmentEnd(start));
    body(start, end, std::min(pattern.Period(), end - start));
    start = end;
  }
}

}  // namespace

void FillInput(DataType type, const Pattern& pattern, size_t first, size_t count, void* dst) {
  WithType(type, [&](auto zero) {
    using T = decltype(zero);
    T* out = static_cast<T*>(dst);
    std::vector<T> period;
    ForEachPeriodicStretch(pattern, first, count, [&](size_t start, size_t end, size_t n) {
      period.resize(n);
      for (size_t k = 0; k < n; ++k) period[k] = FromDouble<T>(pattern.Input(start + k));
      for (size_t g = start, k = 0; g < end; ++g, k = k + 1 == n ? 0 : k + 1)
        out[g - first] = period[k];
    });
  });
}

int64_t CountWrong(DataType type, const Pattern& pattern, size_t first, size_t count,
                   const void* got) {
  int64_t wrong = 0;
  WithType(type, [&](auto zero) {
    using T = decltype(zero);
    const T* in = static_cast<const T*>(got);
    std::vector<double> want, tol;
    ForEachPeriodicStretch(pattern, first, count, [&](size_t start, size_t end, size_t n) {
      want.resize(n);
      tol.resize(n);
      for (size_t k = 0; k < n; ++k) {
        const double exact = pattern.Expected(start + k);
        tol[k] = pattern.Tolerance(exact);
        // Rounded to T first, so integer wrap-around matches.
        want[k] = tol[k] > 0 ? exact : ToDouble(FromDouble<T>(exact));
      }
      // A NaN (the poison left where nothing was written) fails the <=.
      for (size_t g = start, k = 0; g < end; ++g, k = k + 1 == n ? 0 : k + 1) {
        if (!(std::fabs(ToDouble(in[g - first]) - want[k]) <= tol[k])) ++wrong;
      }
    });
  });
  return wrong;
}

}  // namespace ringo::perf
