// The host executors' element loops (host_loops_table.h), written once and
// compiled once per instruction set. No include guard on purpose: a
// translation unit defines RINGO_HOST_ISA (the namespace the code goes in,
// so the sets' instantiations never merge at link time), optionally
// RINGO_HOST_F16C (convert fp16 with the F16C instructions), sets its target
// (#pragma GCC target) after including everything else, and includes this.
//
// The elements go in tiles of kTileBytes. Each tile is combined into a local
// array (it stays in L1) and then copied to every output, so an output may
// be one of the inputs (in place), and every element loop reads fixed
// pointers and writes a local array, which the compiler vectorises without
// alias checks. The number of inputs of reduce_all is a template argument up
// to kFusedInputs (one pass, nothing but the result stored); more inputs are
// folded into an accumulator tile kFusedInputs at a time, in rank order. A
// loop over a runtime number of inputs inside the element loop does not
// vectorise: GCC 12 turned it into scalar shuffles, 2.7x slower at 1 MiB (2
// threads, each reducing its half of two inputs into two outputs: 57 us
// against 21 us).
//
// fp16 tiles are converted to fp32 first (in hardware with F16C), combined
// in fp32, and converted back; bf16 is converted element by element. Every
// element is combined in the same order as the scalar definition in
// reduce_op.h, so results are bit-identical whatever the set (but for which
// of two NaNs a sum passes on).
#ifndef RINGO_HOST_ISA
#error "define RINGO_HOST_ISA before including kernels/internal/host_loops_impl.h"
#endif

namespace ringo::kernels::RINGO_HOST_ISA {

using base::RedOp;

// 4 KiB of T per tile: single-thread, L2-resident float sum of two inputs
// into two outputs ran at 71 / 105 / 113 GB/s (read + written) with 1 / 2 /
// 4 KiB tiles.
constexpr int64_t kTileBytes = 4096;
constexpr int kFusedInputs = 4;

template <typename T>
constexpr int64_t kTile = kTileBytes / static_cast<int64_t>(sizeof(T));

// Elements of the tile at `i` of `count` (a whole tile but for the last).
template <typename T>
inline int64_t TileLen(int64_t count, int64_t i) {
  return count - i < kTile<T> ? count - i : kTile<T>;
}

// ---- fp16 tiles to and from fp32 ----

// fp16 converts whole tiles first (in hardware with F16C; the generic
// conversion is long enough that a separate pass costs nothing extra);
// everything else, bf16 included (its conversion is a shift and a rounding
// add), converts element by element inside the combining loop, which ran
// 15-20% faster for bf16 on the generic set (2 ranks, 2 MiB: 326 against 391 us).
template <typename T>
constexpr bool kConvertTiles = std::is_same<T, base::Half>::value;

template <typename T>
inline void ToAccTile(const T* __restrict__ src, float* __restrict__ dst, int64_t m) {
  for (int64_t j = 0; j < m; ++j) dst[j] = ToAcc(src[j]);
}

template <typename T>
inline void FromAccTile(const float* __restrict__ src, T* __restrict__ dst, int64_t m) {
  for (int64_t j = 0; j < m; ++j) dst[j] = FromAcc<T>(src[j]);
}

#if defined(RINGO_HOST_F16C)
// vcvtph2ps is exact; vcvtps2ph with round-to-nearest-even rounds as
// FloatToHalfBits does, overflow to inf and NaN quieted with its payload
// alike (host_loops_test compares them on every float).
template <>
inline void ToAccTile<base::Half>(const base::Half* __restrict__ src, float* __restrict__ dst, int64_t m) {
  int64_t j = 0;
  for (; j + 8 <= m; j += 8) {
    _mm256_storeu_ps(dst + j, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + j))));
  }
  for (; j < m; ++j) dst[j] = ToAcc(src[j]);
}

template <>
inline void FromAccTile<base::Half>(const float* __restrict__ src, base::Half* __restrict__ dst, int64_t m) {
  int64_t j = 0;
  for (; j + 8 <= m; j += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + j),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + j), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; j < m; ++j) dst[j] = FromAcc<base::Half>(src[j]);
}
#endif

// ---- reduce_all ----

// One tile of `m` elements from offset `i` of the inputs p[0..N): folded into
// `acc` (kFirst: `acc` starts from p[0]), and when kLast, the results in `v`.
template <int N, bool kFirst, bool kLast, typename T, RedOp kOp>
inline void FoldTile(const ReduceFunc<T, kOp>& f, const T* const* p, int64_t i, int64_t m,
                     typename ReduceFunc<T, kOp>::Acc* __restrict__ acc, T* __restrict__ v) {
  using Acc = typename ReduceFunc<T, kOp>::Acc;
  if constexpr (!kConvertTiles<T>) {
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
  } else {
    // fp16: whole tiles converted, then combined in fp32. Post is the plain
    // conversion for floating types.
    alignas(64) Acc x[kTile<T>];
    for (int q = 0; q < N; ++q) {
      ToAccTile(p[q] + i, x, m);
      if (kFirst && q == 0) {
        for (int64_t j = 0; j < m; ++j) acc[j] = f.PreAcc(x[j]);
      } else {
        for (int64_t j = 0; j < m; ++j) acc[j] = f.Apply(acc[j], f.PreAcc(x[j]));
      }
    }
    if constexpr (kLast) FromAccTile(acc, v, m);
  }
}

// kN > 0: exactly kN inputs; 0: n > kFusedInputs inputs, in groups.
template <int kN, typename T, RedOp kOp>
void ReduceTiles(const ReduceFunc<T, kOp>& f, const T* const* in, int n, T* const* out, int nout, int64_t count,
                 bool stream) {
  using Acc = typename ReduceFunc<T, kOp>::Acc;
  constexpr int G = kFusedInputs;
  constexpr bool kNeedAcc = kN == 0 || kConvertTiles<T>;
  alignas(64) Acc acc[kNeedAcc ? kTile<T> : 1];
  alignas(64) T v[kTile<T>];
  int64_t i = 0;
  if constexpr (kN > 0 && !kConvertTiles<T>) {
    if (stream) {
      // Outputs that go to memory: each 64-byte block is stored to every
      // output as soon as it is reduced, so reads and streamed writes
      // interleave finely (2 threads, each reducing its half of two 256 MiB
      // inputs into two outputs: 21-22 ms, against 26-28 ms when a 4 KiB
      // tile is written to one output, then the other).
      constexpr int64_t kBlock = 64 / static_cast<int64_t>(sizeof(T));
      for (; i + kBlock <= count; i += kBlock) {
        FoldTile<kN, true, true>(f, in, i, kBlock, acc, v);
        for (int k = 0; k < nout; ++k) internal::Store64(out[k] + i, v, true);
      }
    }
  }
  for (; i < count; i += kTile<T>) {
    const int64_t m = TileLen<T>(count, i);
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
    for (int k = 0; k < nout; ++k) internal::CopyOut(out[k] + i, v, bytes, stream);
  }
}

template <typename T, RedOp kOp>
void ReduceAll(const void* const* in_any, int n, void* const* out_any, int nout, int64_t count, const OpParams& op,
               bool stream) {
  static_assert(kFusedInputs == 4, "the cases below");
  const auto f = ReduceFunc<T, kOp>::Make(op);
  const auto* in = reinterpret_cast<const T* const*>(in_any);
  auto* out = reinterpret_cast<T* const*>(out_any);
  switch (n) {
    case 1: return ReduceTiles<1>(f, in, n, out, nout, count, stream);
    case 2: return ReduceTiles<2>(f, in, n, out, nout, count, stream);
    case 3: return ReduceTiles<3>(f, in, n, out, nout, count, stream);
    case 4: return ReduceTiles<4>(f, in, n, out, nout, count, stream);
    default: return ReduceTiles<0>(f, in, n, out, nout, count, stream);
  }
}

// As the ring's chain computes it: partial results rounded to T at every step.
template <typename T, RedOp kOp>
void ReduceOrdered(const void* const* in_any, int n, void* const* out_any, int nout, int64_t count,
                   const OpParams& op, bool stream) {
  const auto f = ReduceFunc<T, kOp>::Make(op);
  const auto* in = reinterpret_cast<const T* const*>(in_any);
  auto* out = reinterpret_cast<T* const*>(out_any);
  alignas(64) T v[kTile<T>];
  for (int64_t i = 0; i < count; i += kTile<T>) {
    const int64_t m = TileLen<T>(count, i);
    const T* __restrict__ first = in[0] + i;
    if (n == 1) {
      for (int64_t j = 0; j < m; ++j) v[j] = f.Post(f.Pre(first[j]));
    } else {
      for (int64_t j = 0; j < m; ++j) v[j] = f.Partial(f.Pre(first[j]));
      for (int q = 1; q < n - 1; ++q) {
        const T* __restrict__ s = in[q] + i;
        for (int64_t j = 0; j < m; ++j) v[j] = f.Partial(f.Apply(ToAcc(v[j]), f.Pre(s[j])));
      }
      const T* __restrict__ last = in[n - 1] + i;
      for (int64_t j = 0; j < m; ++j) v[j] = f.Post(f.Apply(ToAcc(v[j]), f.Pre(last[j])));
    }
    for (int k = 0; k < nout; ++k) internal::CopyOut(out[k] + i, v, static_cast<size_t>(m) * sizeof(T), stream);
  }
}

// ---- the ring's primitives ----

template <typename T, RedOp kOp>
void Send(const void* src_any, void* out_any, int64_t count, const OpParams& op, bool stream) {
  const auto* src = static_cast<const T*>(src_any);
  auto* out = static_cast<T*>(out_any);
  if constexpr (!ReduceFunc<T, kOp>::kHasPre) {
    internal::CopyOut(out, src, static_cast<size_t>(count) * sizeof(T), stream);  // Partial(Pre(x)) is x
  } else {
    using Acc = typename ReduceFunc<T, kOp>::Acc;
    const auto f = ReduceFunc<T, kOp>::Make(op);
    alignas(64) T v[kTile<T>];
    for (int64_t i = 0; i < count; i += kTile<T>) {
      const int64_t m = TileLen<T>(count, i);
      const T* __restrict__ s = src + i;
      if constexpr (!kConvertTiles<T>) {
        for (int64_t j = 0; j < m; ++j) v[j] = f.Partial(f.Pre(s[j]));
      } else {
        alignas(64) Acc x[kTile<T>];
        ToAccTile(s, x, m);
        for (int64_t j = 0; j < m; ++j) x[j] = f.PreAcc(x[j]);
        FromAccTile(x, v, m);
      }
      internal::CopyOut(out + i, v, static_cast<size_t>(m) * sizeof(T), stream);
    }
  }
}

template <typename T, RedOp kOp, bool kFinal>
void Reduce(const void* in_any, const void* src_any, void* out1_any, void* out2_any, int64_t count,
            const OpParams& op, bool stream1, bool stream2) {
  using Acc = typename ReduceFunc<T, kOp>::Acc;
  const auto f = ReduceFunc<T, kOp>::Make(op);
  const auto* in = static_cast<const T*>(in_any);
  const auto* src = static_cast<const T*>(src_any);
  auto* out1 = static_cast<T*>(out1_any);
  auto* out2 = static_cast<T*>(out2_any);
  alignas(64) T v[kTile<T>];
  // (Streaming the output block by block here, as ReduceTiles does, ran
  // 25% slower for 2 ranks at 16-64 MiB: the other output is a FIFO slot.)
  for (int64_t i = 0; i < count; i += kTile<T>) {
    const int64_t m = TileLen<T>(count, i);
    const T* __restrict__ a = in + i;
    const T* __restrict__ b = src + i;
    if constexpr (!kConvertTiles<T>) {
      for (int64_t j = 0; j < m; ++j) {
        const Acc r = f.Apply(ToAcc(a[j]), f.Pre(b[j]));
        v[j] = kFinal ? f.Post(r) : f.Partial(r);
      }
    } else {
      alignas(64) Acc x[kTile<T>];
      alignas(64) Acc y[kTile<T>];
      ToAccTile(a, x, m);
      ToAccTile(b, y, m);
      for (int64_t j = 0; j < m; ++j) x[j] = f.Apply(x[j], f.PreAcc(y[j]));
      FromAccTile(x, v, m);  // Post and Partial are the conversion for floating types
    }
    const size_t bytes = static_cast<size_t>(m) * sizeof(T);
    internal::CopyOut(out1 + i, v, bytes, stream1);
    if (out2 != nullptr) internal::CopyOut(out2 + i, v, bytes, stream2);
  }
}

template <typename T, RedOp kOp>
internal::HostLoops MakeLoops() {
  constexpr bool kRounds = kIsNarrowFloat<T>;
  return internal::HostLoops{&ReduceAll<T, kOp>, kRounds ? &ReduceOrdered<T, kOp> : &ReduceAll<T, kOp>,
                             &Send<T, kOp>, &Reduce<T, kOp, false>, &Reduce<T, kOp, true>};
}

inline void HalfToFloat(const uint16_t* src, float* dst, int64_t count) {
  for (int64_t i = 0; i < count; i += kTile<base::Half>) {
    const int64_t m = TileLen<base::Half>(count, i);
    ToAccTile(reinterpret_cast<const base::Half*>(src + i), dst + i, m);
  }
}

inline void HalfFromFloat(const float* src, uint16_t* dst, int64_t count) {
  for (int64_t i = 0; i < count; i += kTile<base::Half>) {
    const int64_t m = TileLen<base::Half>(count, i);
    FromAccTile(src + i, reinterpret_cast<base::Half*>(dst + i), m);
  }
}

template <typename T>
void FillType(internal::HostIsaTable& table, base::DataType dtype) {
  auto* row = table.loops[static_cast<int>(dtype)];
  row[static_cast<int>(RedOp::kSum)] = MakeLoops<T, RedOp::kSum>();
  row[static_cast<int>(RedOp::kProd)] = MakeLoops<T, RedOp::kProd>();
  row[static_cast<int>(RedOp::kMax)] = MakeLoops<T, RedOp::kMax>();
  row[static_cast<int>(RedOp::kMin)] = MakeLoops<T, RedOp::kMin>();
  row[static_cast<int>(RedOp::kAvg)] = MakeLoops<T, RedOp::kAvg>();
  row[static_cast<int>(RedOp::kPreMulSum)] = MakeLoops<T, RedOp::kPreMulSum>();
}

inline void FillAll(internal::HostIsaTable& table) {
  using base::DataType;
  static_assert(sizeof(base::Half) == sizeof(uint16_t), "Half is its bits");
  table.half = internal::HalfConversions{&HalfToFloat, &HalfFromFloat};
  FillType<int8_t>(table, DataType::kInt8);
  FillType<uint8_t>(table, DataType::kUint8);
  FillType<int32_t>(table, DataType::kInt32);
  FillType<uint32_t>(table, DataType::kUint32);
  FillType<int64_t>(table, DataType::kInt64);
  FillType<uint64_t>(table, DataType::kUint64);
  FillType<base::Half>(table, DataType::kFloat16);
  FillType<float>(table, DataType::kFloat32);
  FillType<double>(table, DataType::kFloat64);
  FillType<base::BFloat16>(table, DataType::kBFloat16);
  FillType<base::Fp8E4M3>(table, DataType::kFloat8E4M3);
  FillType<base::Fp8E5M2>(table, DataType::kFloat8E5M2);
}

}  // namespace ringo::kernels::RINGO_HOST_ISA
