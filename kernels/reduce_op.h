// Reduction functors over every datatype, __host__ __device__, shared by the
// host executor and the CUDA kernels.
//
// A value crosses three stages: Pre (a rank's own input entering the sum:
// float avg multiplies by 1/nranks here, premul-sum by the rank's own
// scalar), Apply (combine two partial results) and Post (the final result:
// integer avg divides by nranks here, truncating toward zero). Partial
// results travel between ranks in the datatype itself; fp16, bf16 and the
// fp8 formats are combined in fp32 and rounded to nearest even when stored
// (fp8 saturating, base/device/fp8.h). Integer sum, product and premul-sum
// wrap modulo 2^bits (computed in the unsigned type, so there is no
// undefined overflow).
#ifndef RINGO_KERNELS_REDUCE_OP_H_
#define RINGO_KERNELS_REDUCE_OP_H_

#include <cstdint>
#include <type_traits>

#include "base/device/dtype.h"
#include "base/device/half.h"
#include "base/device/macros.h"

namespace ringo::kernels {

using base::BFloat16;
using base::Fp8E4M3;
using base::Fp8E5M2;
using base::Half;
using base::RedOp;

// What a reduction needs besides its inputs: the rank count (avg) and a
// premul-sum's scalar, one value of the datatype in the low bytes of
// `scalar` (its bits).
struct OpParams {
  RINGO_HD constexpr OpParams(int n = 1, uint64_t s = 0) : nranks(n), scalar(s) {}  // NOLINT: an int converts
  int nranks;
  uint64_t scalar;
};

// The type arithmetic happens in.
template <typename T> struct AccTypeOf { using type = T; };
template <> struct AccTypeOf<Half> { using type = float; };
template <> struct AccTypeOf<BFloat16> { using type = float; };
template <> struct AccTypeOf<Fp8E4M3> { using type = float; };
template <> struct AccTypeOf<Fp8E5M2> { using type = float; };

// Storage types whose values go through float (fp16, bf16, fp8).
template <typename T>
inline constexpr bool kIsNarrowFloat = std::is_same<T, Half>::value || std::is_same<T, BFloat16>::value ||
                                       std::is_same<T, Fp8E4M3>::value || std::is_same<T, Fp8E5M2>::value;

template <typename T>
inline constexpr bool kIsFloating = std::is_floating_point<T>::value || kIsNarrowFloat<T>;

template <typename T> RINGO_HD_INLINE typename AccTypeOf<T>::type ToAcc(T v) {
  if constexpr (kIsNarrowFloat<T>) {
    return v.ToFloat();
  } else {
    return v;
  }
}

template <typename T> RINGO_HD_INLINE T FromAcc(typename AccTypeOf<T>::type v) {
  if constexpr (kIsNarrowFloat<T>) {
    return T::FromFloat(v);
  } else {
    return v;
  }
}

// One value of T from the low bytes of `bits` (a premul-sum's scalar).
template <typename T> RINGO_HD_INLINE T FromBits(uint64_t bits) {
  T v;
  unsigned char* out = reinterpret_cast<unsigned char*>(&v);
  for (unsigned i = 0; i < sizeof(T); ++i) out[i] = static_cast<unsigned char>(bits >> (8 * i));
  return v;
}

template <typename T, RedOp kOp>
struct ReduceFunc {
  using Acc = typename AccTypeOf<T>::type;
  using Unsigned = typename std::conditional<std::is_integral<T>::value,
                                             std::make_unsigned<T>, std::common_type<T>>::type::type;

  Acc premul = Acc(1);  // float avg: 1 / nranks; premul-sum: the scalar
  int divisor = 1;      // integer avg: nranks

  // Whether Pre changes a rank's input (Send must then go through it).
  static constexpr bool kHasPre = (kOp == RedOp::kAvg && kIsFloating<T>) || kOp == RedOp::kPreMulSum;

  RINGO_HD static ReduceFunc Make(const OpParams& p) {
    ReduceFunc f;
    if constexpr (kOp == RedOp::kAvg) {
      if constexpr (kIsFloating<T>) {
        f.premul = Acc(1) / Acc(p.nranks);
      } else {
        f.divisor = p.nranks;
      }
    } else if constexpr (kOp == RedOp::kPreMulSum) {
      f.premul = ToAcc(FromBits<T>(p.scalar));
    }
    return f;
  }


  // A rank's own input as it enters the reduction.
  RINGO_HD_INLINE Acc Pre(T x) const { return PreAcc(ToAcc(x)); }
  // Pre of a value already converted to the accumulation type.
  RINGO_HD_INLINE Acc PreAcc(Acc x) const {
    if constexpr (kOp == RedOp::kPreMulSum && std::is_integral<T>::value) {
      return Multiply(x, premul);
    } else if constexpr (kHasPre) {
      return x * premul;
    } else {
      return x;
    }
  }

  // a * b wrapping modulo 2^bits for integers.
  RINGO_HD_INLINE static Acc Multiply(Acc a, Acc b) {
    if constexpr (std::is_integral<T>::value) {
      // Promote narrow unsigned types past int so the product cannot overflow a signed int.
      using Wide = typename std::conditional<(sizeof(T) < sizeof(unsigned)), unsigned, Unsigned>::type;
      return static_cast<T>(static_cast<Unsigned>(static_cast<Wide>(static_cast<Unsigned>(a)) *
                                                 static_cast<Wide>(static_cast<Unsigned>(b))));
    } else {
      return a * b;
    }
  }

  RINGO_HD_INLINE Acc Apply(Acc a, Acc b) const {
    if constexpr (kOp == RedOp::kSum || kOp == RedOp::kAvg || kOp == RedOp::kPreMulSum) {
      if constexpr (std::is_integral<T>::value) {
        return static_cast<T>(static_cast<Unsigned>(static_cast<Unsigned>(a) + static_cast<Unsigned>(b)));
      } else {
        return a + b;
      }
    } else if constexpr (kOp == RedOp::kProd) {
      return Multiply(a, b);
    } else if constexpr (kOp == RedOp::kMax) {
      return a < b ? b : a;
    } else {
      return b < a ? b : a;
    }
  }

  // A partial result as stored for the next rank.
  RINGO_HD_INLINE T Partial(Acc a) const { return FromAcc<T>(a); }

  // The final result as stored in the output.
  RINGO_HD_INLINE T Post(Acc a) const {
    if constexpr (kOp == RedOp::kAvg && !kIsFloating<T>) {
      using Wide = typename std::conditional<std::is_signed<T>::value, int64_t, uint64_t>::type;
      return static_cast<T>(static_cast<Wide>(a) / static_cast<Wide>(divisor));  // toward zero
    } else {
      return FromAcc<T>(a);
    }
  }
};

}  // namespace ringo::kernels

#endif  // RINGO_KERNELS_REDUCE_OP_H_
