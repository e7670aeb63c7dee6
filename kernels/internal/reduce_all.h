// out[k][i] = Post(Pre(in[0][i]) (+) ... (+) Pre(in[n-1][i])) for every
// output k, in rank order, so every rank that reduces the same inputs gets
// bit-identical results; fp16/bf16 accumulate in fp32 across all inputs.
// Shared by the one-shot and the direct executors.
//
// Blocks of kBlock elements are combined in registers and then stored, so an
// output may be one of the inputs (in place) and the loops vectorise.
#ifndef RINGO_KERNELS_INTERNAL_REDUCE_ALL_H_
#define RINGO_KERNELS_INTERNAL_REDUCE_ALL_H_

#include <cstdint>

#include "kernels/internal/stream_store.h"
#include "kernels/reduce_op.h"

namespace ringo::kernels::internal {

// `stream`: write the outputs with non-temporal stores (16-byte aligned
// blocks; the caller fences before publishing).
template <typename T, base::RedOp kOp>
void ReduceAll(const ReduceFunc<T, kOp>& f, const T* const* in, int n, T* const* out, int nout, int64_t count,
               bool stream) {
  using Acc = typename ReduceFunc<T, kOp>::Acc;
  constexpr int64_t kBlock = 64 / sizeof(T) >= 16 ? 64 / sizeof(T) : 16;
  static_assert(kBlock * sizeof(T) % 64 == 0, "whole cache lines per block");
  int64_t i = 0;
  for (; i + kBlock <= count; i += kBlock) {
    Acc acc[kBlock];
    for (int64_t j = 0; j < kBlock; ++j) acc[j] = f.Pre(in[0][i + j]);
    for (int q = 1; q < n; ++q) {
      for (int64_t j = 0; j < kBlock; ++j) acc[j] = f.Apply(acc[j], f.Pre(in[q][i + j]));
    }
    alignas(64) T v[kBlock];
    for (int64_t j = 0; j < kBlock; ++j) v[j] = f.Post(acc[j]);
    for (int k = 0; k < nout; ++k) {
      char* dst = reinterpret_cast<char*>(out[k] + i);
      for (size_t b = 0; b < kBlock * sizeof(T); b += 64) Store64(dst + b, reinterpret_cast<const char*>(v) + b, stream);
    }
  }
  for (; i < count; ++i) {
    Acc acc = f.Pre(in[0][i]);
    for (int q = 1; q < n; ++q) acc = f.Apply(acc, f.Pre(in[q][i]));
    const T v = f.Post(acc);
    for (int k = 0; k < nout; ++k) out[k][i] = v;
  }
}

}  // namespace ringo::kernels::internal

#endif  // RINGO_KERNELS_INTERNAL_REDUCE_ALL_H_
