// The element loops every primitive and the reduction kernel share: read one
// or two sources, combine element by element with ReduceFunc exactly as the
// host executor does (kernels/host_loops.cc's element loops), write one or two
// destinations. 16-byte vectors when all pointers share their offset modulo
// 16, after a scalar head that brings them to a 16-byte boundary; a scalar
// tail; everything scalar when the pointers disagree modulo 16 (the ring's
// Simple slots are shifted to the user buffers' offset so that they agree:
// slot_shift.h).
//
// Called by `nthreads` threads (thread `tid` of them) with the same
// arguments. Loads bypass L1 (ld.global.cg): a slot is rewritten by a peer
// between two uses, and streamed data gains nothing from L1. Each thread loads
// all of its kUnroll vectors before it stores any, and a thread stores only
// the elements it loaded, so a destination may be a source (in place).
// No synchronisation: callers order the loop against the FIFO with barriers.
#ifndef RINGO_KERNELS_CUDA_INTERNAL_REDUCE_COPY_CUH_
#define RINGO_KERNELS_CUDA_INTERNAL_REDUCE_COPY_CUH_

#include <cstdint>
#include <cstring>

#include "kernels/cuda/internal/host_shim.h"
#include "kernels/reduce_op.h"

namespace ringo::kernels::gpu::internal {

// What a primitive computes per element from a (the received slot, or this
// rank's input when nothing is received) and b (this rank's input).
enum class Mode : int {
  kCopy,         // a
  kPreSend,      // Partial(Pre(a)): a rank's own input entering the ring (float avg)
  kReduce,       // Partial(Apply(a, Pre(b))): a partial result for the next rank
  kReduceFinal,  // Post(Apply(a, Pre(b))): the final value
};

template <Mode kMode>
inline constexpr bool kModeReads2 = kMode == Mode::kReduce || kMode == Mode::kReduceFinal;

// What Send computes, as the host executor's Send: a float avg and a
// premul-sum pre-multiply; every other Send is a plain copy.
template <typename T, base::RedOp kOp>
inline constexpr Mode kSendMode = ReduceFunc<T, kOp>::kHasPre ? Mode::kPreSend : Mode::kCopy;

template <typename T, base::RedOp kOp, Mode kMode>
__device__ __forceinline__ T Elem(const ReduceFunc<T, kOp>& f, T a, T b) {
  if constexpr (kMode == Mode::kCopy) {
    return a;
  } else if constexpr (kMode == Mode::kPreSend) {
    return f.Partial(f.Pre(a));
  } else if constexpr (kMode == Mode::kReduce) {
    return f.Partial(f.Apply(ToAcc(a), f.Pre(b)));
  } else {
    return f.Post(f.Apply(ToAcc(a), f.Pre(b)));
  }
}

// Scalar load bypassing L1, for any 1/2/4/8-byte T.
template <typename T>
__device__ __forceinline__ T LoadCg(const T* p) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, "element size");
  T v;
  if constexpr (sizeof(T) == 1) {
    const unsigned char u = __ldcg(reinterpret_cast<const unsigned char*>(p));
    memcpy(&v, &u, 1);
  } else if constexpr (sizeof(T) == 2) {
    const unsigned short u = __ldcg(reinterpret_cast<const unsigned short*>(p));
    memcpy(&v, &u, 2);
  } else if constexpr (sizeof(T) == 4) {
    const unsigned int u = __ldcg(reinterpret_cast<const unsigned int*>(p));
    memcpy(&v, &u, 4);
  } else {
    const unsigned long long u = __ldcg(reinterpret_cast<const unsigned long long*>(p));
    memcpy(&v, &u, 8);
  }
  return v;
}

// 16 bytes seen as elements.
template <typename T>
union Pack16 {
  uint4 u;
  T e[16 / sizeof(T)];
};

// Whether ReduceCopy moves the bulk of a step in 16-byte vectors: every
// pointer it touches (b only when the mode reads two sources, d1 only when
// set) shares its offset modulo 16.
__device__ __forceinline__ bool VectorPath(const void* a, const void* b, const void* d0,
                                           const void* d1, bool two_sources) {
  const uintptr_t mis = reinterpret_cast<uintptr_t>(d0) & 15u;
  return (reinterpret_cast<uintptr_t>(a) & 15u) == mis &&
         (!two_sources || (reinterpret_cast<uintptr_t>(b) & 15u) == mis) &&
         (d1 == nullptr || (reinterpret_cast<uintptr_t>(d1) & 15u) == mis);
}

template <typename T, base::RedOp kOp, Mode kMode, int kUnroll = 4>
__device__ __forceinline__ void ReduceCopy(const ReduceFunc<T, kOp>& f, int64_t tid, int64_t nthreads, const T* a,
                                           const T* b, T* d0, T* d1, int64_t n) {
  constexpr bool kTwo = kModeReads2<kMode>;
  constexpr int kE = 16 / static_cast<int>(sizeof(T));
  auto one = [&](int64_t i) {
    const T v = Elem<T, kOp, kMode>(f, LoadCg(a + i), kTwo ? LoadCg(b + i) : T{});
    d0[i] = v;
    if (d1 != nullptr) d1[i] = v;
  };

  const uintptr_t mis = reinterpret_cast<uintptr_t>(d0) & 15u;
  const bool vec = VectorPath(a, b, d0, d1, kTwo);
  const int64_t lead = static_cast<int64_t>(((16u - mis) & 15u) / sizeof(T));
  const int64_t head = vec ? (lead < n ? lead : n) : n;
  for (int64_t i = tid; i < head; i += nthreads) one(i);

  const int64_t nvec = (n - head) / kE;
  const uint4* av = reinterpret_cast<const uint4*>(a + head);
  const uint4* bv = kTwo ? reinterpret_cast<const uint4*>(b + head) : nullptr;
  uint4* d0v = reinterpret_cast<uint4*>(d0 + head);
  uint4* d1v = d1 != nullptr ? reinterpret_cast<uint4*>(d1 + head) : nullptr;
  for (int64_t base = tid; base < nvec; base += nthreads * kUnroll) {
    Pack16<T> pa[kUnroll];
    Pack16<T> pb[kUnroll];
RINGO_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * nthreads;
      if (i < nvec) {
        pa[u].u = __ldcg(av + i);
        if constexpr (kTwo) pb[u].u = __ldcg(bv + i);
      }
    }
RINGO_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * nthreads;
      if (i < nvec) {
        Pack16<T> o;
        if constexpr (kMode == Mode::kCopy) {
          o.u = pa[u].u;
        } else {
RINGO_UNROLL
          for (int j = 0; j < kE; ++j) {
            o.e[j] = Elem<T, kOp, kMode>(f, pa[u].e[j], kTwo ? pb[u].e[j] : T{});
          }
        }
        d0v[i] = o.u;
        if (d1v != nullptr) d1v[i] = o.u;
      }
    }
  }

  for (int64_t i = head + nvec * kE + tid; i < n; i += nthreads) one(i);
}

}  // namespace ringo::kernels::gpu::internal

#endif  // RINGO_KERNELS_CUDA_INTERNAL_REDUCE_COPY_CUH_
