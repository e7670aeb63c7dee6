// Test data and the host reference shared by the ring tests (the GPU test
// and the host test of the ring loop): inputs chosen so the reference is exact
// in any reduction order, and the expected output of every collective folded
// with the same ReduceFunc the kernels use. Test-only.
#ifndef RINGO_KERNELS_CUDA_INTERNAL_TEST_REFERENCE_H_
#define RINGO_KERNELS_CUDA_INTERNAL_TEST_REFERENCE_H_

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "base/device/dtype.h"
#include "kernels/reduce_op.h"
#include "kernels/schedule.h"

namespace ringo::kernels::gpu::testref {

using base::BFloat16;
using base::Half;
using base::RedOp;

inline uint32_t Hash(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t h = a * 0x9e3779b1u ^ (b + 0x7f4a7c15u) * 0x85ebca6bu ^ c * 0xc2b2ae35u;
  h ^= h >> 15;
  h *= 0x2c1b3c6du;
  return h ^ (h >> 13);
}

// Integers: any bits (sums and products wrap, exactly as the reference).
// Floating types: small integers, so every order of summation is exact; for
// prod -2..2 only, whose products are powers of two, exact in bfloat16 too;
// fp8: -1, 0 or 1 (sums of up to 8 exact in 2 mantissa bits).
template <typename T>
T Value(uint32_t h, RedOp op) {
  if constexpr (std::is_integral<T>::value) {
    return static_cast<T>(h);
  } else {
    float v = op == RedOp::kProd ? static_cast<float>(static_cast<int>(h % 5) - 2)
                                 : static_cast<float>(static_cast<int>(h % 9) - 4);
    if constexpr (sizeof(T) == 1) v = static_cast<float>(static_cast<int>(h % 3) - 1);
    if constexpr (kIsNarrowFloat<T>) {
      return T::FromFloat(v);
    } else {
      return static_cast<T>(v);
    }
  }
}

template <typename T, RedOp kOp>
T Fold(const std::vector<std::vector<T>>& in, int64_t i) {
  const int n = static_cast<int>(in.size());
  const auto f = ReduceFunc<T, kOp>::Make(n);
  auto acc = f.Pre(in[0][i]);
  for (int r = 1; r < n; ++r) acc = f.Apply(acc, f.Pre(in[r][i]));
  return f.Post(acc);
}

// Post(Pre(x_0) (+) ... (+) Pre(x_{n-1})) at element i of every rank's input.
template <typename T>
T FoldOp(RedOp op, const std::vector<std::vector<T>>& in, int64_t i) {
  switch (op) {
    case RedOp::kSum: return Fold<T, RedOp::kSum>(in, i);
    case RedOp::kProd: return Fold<T, RedOp::kProd>(in, i);
    case RedOp::kMax: return Fold<T, RedOp::kMax>(in, i);
    case RedOp::kMin: return Fold<T, RedOp::kMin>(in, i);
    case RedOp::kAvg: return Fold<T, RedOp::kAvg>(in, i);
    case RedOp::kPreMulSum: break;  // needs a scalar: tests/fp8_premul_test.cc
  }
  return T{};
}

template <typename T>
double AsDouble(T v) {
  if constexpr (kIsNarrowFloat<T>) {
    return v.ToFloat();
  } else {
    return static_cast<double>(v);
  }
}

// Equal bits for integers; equal values for floating types, within rounding
// for a floating avg (Pre multiplies by 1/n, so the order of the sum shows).
template <typename T>
bool Same(T got, T want, RedOp op) {
  if constexpr (std::is_integral<T>::value) {
    return got == want;
  } else {
    const double g = AsDouble(got), w = AsDouble(want);
    if (op != RedOp::kAvg) return g == w;
    const double tol = sizeof(T) == 1 ? 0.3 : sizeof(T) == 2 ? 3e-2 : sizeof(T) == 4 ? 1e-5 : 1e-12;
    return std::abs(g - w) <= tol * (1.0 + std::abs(w));
  }
}

// Elements each rank sends and receives.
inline int64_t SendElems(Coll coll, int n, int64_t count) { return coll == Coll::kReduceScatter ? n * count : count; }
inline int64_t RecvElems(Coll coll, int n, int64_t count) { return coll == Coll::kAllGather ? n * count : count; }

// Every rank's input for a case.
template <typename T>
std::vector<std::vector<T>> Inputs(Coll coll, int n, int64_t count, RedOp op) {
  const int64_t elems = SendElems(coll, n, count);
  std::vector<std::vector<T>> in(n, std::vector<T>(elems));
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < elems; ++i) in[r][i] = Value<T>(Hash(r, static_cast<uint32_t>(i), count), op);
  }
  return in;
}

// Whether rank r's output element is defined by the collective (not a
// non-root Reduce, whose output the kernels leave alone).
inline bool Writes(Coll coll, int root, int r) { return coll != Coll::kReduce || r == root; }

// Rank r's expected output element i.
template <typename T>
T Expected(Coll coll, RedOp op, int root, const std::vector<std::vector<T>>& in, int r, int64_t count, int64_t i) {
  switch (coll) {
    case Coll::kAllReduce:
    case Coll::kReduce: return FoldOp<T>(op, in, i);
    case Coll::kReduceScatter: return FoldOp<T>(op, in, r * count + i);
    case Coll::kAllGather: return in[i / count][i % count];
    case Coll::kBroadcast: return in[root][i];
  }
  return T{};
}

// The op whose tolerance applies when comparing an output (data movement is exact).
inline RedOp CompareOp(Coll coll, RedOp op) {
  return coll == Coll::kAllGather || coll == Coll::kBroadcast ? RedOp::kSum : op;
}

}  // namespace ringo::kernels::gpu::testref

#endif  // RINGO_KERNELS_CUDA_INTERNAL_TEST_REFERENCE_H_
