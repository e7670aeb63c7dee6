// out[k][i] = Post(Pre(in[0][i]) (+) ... (+) Pre(in[n-1][i])) for every
// output k, in rank order, so every rank that reduces the same inputs gets
// bit-identical results; fp16/bf16 accumulate in fp32 across all inputs.
// Shared by the one-shot and the direct executors.
//
// The elements go in tiles of kTileBytes. Each tile is reduced into a local
// array (it stays in L1) and then copied to every output, so an output may
// be one of the inputs (in place), and each element loop reads fixed
// pointers into a local array, which the compiler vectorises without alias
// checks. The number of inputs is a template argument up to kFusedInputs
// (one pass, nothing but the result stored); more inputs are folded into an
// accumulator tile kFusedInputs at a time, still in rank order. A loop over a
// runtime number of inputs inside the element loop does not vectorise: GCC
// 12 turned it into scalar shuffles, 2.7x slower at 1 MiB (2 threads, each
// reducing its half of two inputs into two outputs: 57 us against 21 us).
#ifndef RINGO_KERNELS_INTERNAL_REDUCE_ALL_H_
#define RINGO_KERNELS_INTERNAL_REDUCE_ALL_H_

#include <cstdint>

#include "kernels/internal/stream_store.h"
#include "kernels/reduce_op.h"

namespace ringo::kernels::internal {

// 4 KiB of T per tile: single-thread, L2-resident float sum of two inputs
// into two outputs ran at 71 / 105 / 113 GB/s (read + written) with 1 / 2 /
// 4 KiB tiles.
constexpr int64_t kTileBytes = 4096;
constexpr int kFusedInputs = 4;

// One tile of `m` elements from offset `i` of the inputs p[0..N): folded into
// `acc` (kFirst: `acc` starts from p[0]), and when kLast, the results in `v`.
template <int N, bool kFirst, bool kLast, typename T, typename F, typename Acc>
inline void FoldTile(const F& f, const T* const* p, int64_t i, int64_t m, Acc* __restrict__ acc,
                     T* __restrict__ v) {
  const T* __restrict__ s[N];
  for (int q = 0; q < N; ++q) s[q] = p[q] + i;
  for (int64_t j = 0; j < m; ++j) {
    Acc a = kFirst ? f.Pre(s[0][j]) : f.Apply(acc[j], f.Pre(s[0][j]));
#pragma GCC unroll 8
    for (int q = 1; q < N; ++q) a = f.Apply(a, f.Pre(s[q][j]));
    if constexpr (kLast) {
      v[j] = f.Post(a);
    } else {
      acc[j] = a;
    }
  }
}

// kN > 0: exactly kN inputs; 0: n > kFusedInputs inputs, in groups.
template <int kN, typename T, base::RedOp kOp>
void ReduceTiles(const ReduceFunc<T, kOp>& f, const T* const* in, int n, T* const* out, int nout, int64_t count,
                 bool stream) {
  using Acc = typename ReduceFunc<T, kOp>::Acc;
  constexpr int64_t kTile = kTileBytes / static_cast<int64_t>(sizeof(T));
  constexpr int G = kFusedInputs;
  alignas(64) Acc acc[kN > 0 ? 1 : kTile];
  alignas(64) T v[kTile];
  for (int64_t i = 0; i < count; i += kTile) {
    const int64_t m = count - i < kTile ? count - i : kTile;
    if constexpr (kN > 0) {
      FoldTile<kN, true, true>(f, in, i, m, acc, v);
    } else {
      FoldTile<G, true, false>(f, in, i, m, acc, v);
      int q = G;
      for (; n - q > G; q += G) FoldTile<G, false, false>(f, in + q, i, m, acc, v);
      switch (n - q) {  // the last 1..G inputs
        case 1: FoldTile<1, false, true>(f, in + q, i, m, acc, v); break;
        case 2: FoldTile<2, false, true>(f, in + q, i, m, acc, v); break;
        case 3: FoldTile<3, false, true>(f, in + q, i, m, acc, v); break;
        default: FoldTile<G, false, true>(f, in + q, i, m, acc, v); break;
      }
    }
    const size_t bytes = static_cast<size_t>(m) * sizeof(T);
    for (int k = 0; k < nout; ++k) CopyOut(out[k] + i, v, bytes, stream);
  }
}

// `stream`: write the outputs with non-temporal stores (whole 64-byte blocks
// at 16-byte aligned addresses; the caller fences before publishing).
template <typename T, base::RedOp kOp>
void ReduceAll(const ReduceFunc<T, kOp>& f, const T* const* in, int n, T* const* out, int nout, int64_t count,
               bool stream) {
  static_assert(kFusedInputs == 4, "the cases below");
  switch (n) {
    case 1: return ReduceTiles<1>(f, in, n, out, nout, count, stream);
    case 2: return ReduceTiles<2>(f, in, n, out, nout, count, stream);
    case 3: return ReduceTiles<3>(f, in, n, out, nout, count, stream);
    case 4: return ReduceTiles<4>(f, in, n, out, nout, count, stream);
    default: return ReduceTiles<0>(f, in, n, out, nout, count, stream);
  }
}

}  // namespace ringo::kernels::internal

#endif  // RINGO_KERNELS_INTERNAL_REDUCE_ALL_H_
