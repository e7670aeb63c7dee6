// Reduction functors over every datatype, __host__ __device__, shared by the
// host executor and the CUDA kernels.
//
// A value crosses three stages: Pre (a rank's own input entering the sum:
// float avg multiplies by 1/nranks here, as NCCL's premul-sum does), Apply
// (combine two partial results) and Post (the final result: integer avg
// divides by nranks here, truncating toward zero). Partial results travel
// between ranks in the datatype itself; fp16/bf16 are combined in fp32 and
// rounded to nearest even when stored. Integer sum and product wrap modulo
// 2^bits (computed in the unsigned type, so there is no undefined overflow).
#ifndef RINGO_KERNELS_REDUCE_OP_H_
#define RINGO_KERNELS_REDUCE_OP_H_

#include <cstdint>
#include <type_traits>

#include "base/device/dtype.h"
#include "base/device/half.h"
#include "base/device/macros.h"

namespace ringo::kernels {

using base::BFloat16;
using base::Half;
using base::RedOp;

// The type arithmetic happens in.
template <typename T> struct AccTypeOf { using type = T; };
template <> struct AccTypeOf<Half> { using type = float; };
template <> struct AccTypeOf<BFloat16> { using type = float; };

template <typename T>
inline constexpr bool kIsFloating = std::is_floating_point<T>::value ||
                                    std::is_same<T, Half>::value ||
                                    std::is_same<T, BFloat16>::value;

template <typename T> RINGO_HD_INLINE typename AccTypeOf<T>::type ToAcc(T v) { return v; }
template <> RINGO_HD_INLINE float ToAcc<Half>(Half v) { return v.ToFloat(); }
template <> RINGO_HD_INLINE float ToAcc<BFloat16>(BFloat16 v) { return v.ToFloat(); }

template <typename T> RINGO_HD_INLINE T FromAcc(typename AccTypeOf<T>::type v) { return v; }
template <> RINGO_HD_INLINE Half FromAcc<Half>(float v) { return Half::FromFloat(v); }
template <> RINGO_HD_INLINE BFloat16 FromAcc<BFloat16>(float v) { return BFloat16::FromFloat(v); }

template <typename T, RedOp kOp>
struct ReduceFunc {
  using Acc = typename AccTypeOf<T>::type;
  using Unsigned = typename std::conditional<std::is_integral<T>::value,
                                             std::make_unsigned<T>, std::common_type<T>>::type::type;

  Acc premul = Acc(1);  // float avg: 1 / nranks
  int divisor = 1;      // integer avg: nranks

  RINGO_HD static ReduceFunc Make(int nranks) {
    ReduceFunc f;
    if constexpr (kOp == RedOp::kAvg) {
      if constexpr (kIsFloating<T>) {
        f.premul = Acc(1) / Acc(nranks);
      } else {
        f.divisor = nranks;
      }
    }
    return f;
  }

  // A rank's own input as it enters the reduction.
  RINGO_HD_INLINE Acc Pre(T x) const { return PreAcc(ToAcc(x)); }
  // Pre of a value already converted to the accumulation type.
  RINGO_HD_INLINE Acc PreAcc(Acc x) const {
    if constexpr (kOp == RedOp::kAvg && kIsFloating<T>) {
      return x * premul;
    } else {
      return x;
    }
  }

  RINGO_HD_INLINE Acc Apply(Acc a, Acc b) const {
    if constexpr (kOp == RedOp::kSum || kOp == RedOp::kAvg) {
      if constexpr (std::is_integral<T>::value) {
        return static_cast<T>(static_cast<Unsigned>(static_cast<Unsigned>(a) + static_cast<Unsigned>(b)));
      } else {
        return a + b;
      }
    } else if constexpr (kOp == RedOp::kProd) {
      if constexpr (std::is_integral<T>::value) {
        // Promote narrow unsigned types past int so the product cannot overflow a signed int.
        using Wide = typename std::conditional<(sizeof(T) < sizeof(unsigned)), unsigned, Unsigned>::type;
        return static_cast<T>(static_cast<Unsigned>(static_cast<Wide>(static_cast<Unsigned>(a)) *
                                                   static_cast<Wide>(static_cast<Unsigned>(b))));
      } else {
        return a * b;
      }
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
