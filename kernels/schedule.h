// The ring schedule, written once: which primitive a rank runs at each step,
// which chunk it moves, and where that chunk lies in the buffers. Called by
// the host executor, the CUDA kernels and the planner; tested exhaustively on
// the CPU (schedule_test.cc). Everything is __host__ __device__ constexpr.
//
// Terms. A rank sits at ring position `pos` (0..nranks-1); it receives from
// position pos-1 and sends to pos+1. The elements of one channel are moved in
// loops; each loop moves one chunk per primitive, and a chunk never exceeds
// one FIFO slot (`slice` elements). AllReduce splits each loop into nranks
// chunks; ReduceScatter/AllGather chunks are slices of each rank's block;
// Broadcast/Reduce pipeline slices along the ring from/to the root.
#ifndef RINGO_KERNELS_SCHEDULE_H_
#define RINGO_KERNELS_SCHEDULE_H_

#include <cstdint>

#include "base/device/macros.h"

namespace ringo::kernels {

enum class Coll : int { kAllReduce = 0, kReduceScatter = 1, kAllGather = 2, kBroadcast = 3, kReduce = 4 };

// The primitives. "Recv" reads the slot from the previous rank, "Send" fills a
// slot for the next; "Reduce" combines with this rank's input chunk; "Copy"
// writes this rank's output chunk.
enum class Prim : int {
  kCopy = 0,             // nranks == 1: output = input
  kSend,                 // out slot = input
  kCopySend,             // out slot = input; output = input (skipped when in place)
  kRecvReduceSend,       // out slot = in slot (+) input
  kRecvReduceCopySend,   // output = out slot = in slot (+) input (final value)
  kRecvReduceCopy,       // output = in slot (+) input (final value)
  kRecvCopySend,         // output = out slot = in slot
  kRecv,                 // output = in slot
};

RINGO_HD constexpr bool PrimRecvs(Prim p) {
  return p == Prim::kRecvReduceSend || p == Prim::kRecvReduceCopySend ||
         p == Prim::kRecvReduceCopy || p == Prim::kRecvCopySend || p == Prim::kRecv;
}
RINGO_HD constexpr bool PrimSends(Prim p) {
  return p == Prim::kSend || p == Prim::kCopySend || p == Prim::kRecvReduceSend ||
         p == Prim::kRecvReduceCopySend || p == Prim::kRecvCopySend;
}
RINGO_HD constexpr bool PrimReads(Prim p) {  // reads this rank's input
  return p == Prim::kCopy || p == Prim::kSend || p == Prim::kCopySend ||
         p == Prim::kRecvReduceSend || p == Prim::kRecvReduceCopySend || p == Prim::kRecvReduceCopy;
}
RINGO_HD constexpr bool PrimWrites(Prim p) {  // writes this rank's output
  return p == Prim::kCopy || p == Prim::kCopySend || p == Prim::kRecvReduceCopySend ||
         p == Prim::kRecvReduceCopy || p == Prim::kRecvCopySend || p == Prim::kRecv;
}
// The value written is final (integer avg divides here).
RINGO_HD constexpr bool PrimFinal(Prim p) {
  return p == Prim::kRecvReduceCopySend || p == Prim::kRecvReduceCopy;
}

RINGO_HD constexpr int64_t DivUp(int64_t a, int64_t b) { return (a + b - 1) / b; }
RINGO_HD constexpr int64_t AlignUp(int64_t a, int64_t b) { return DivUp(a, b) * b; }
RINGO_HD constexpr int64_t Min64(int64_t a, int64_t b) { return a < b ? a : b; }
RINGO_HD constexpr int64_t Max64(int64_t a, int64_t b) { return a < b ? b : a; }
RINGO_HD constexpr int Mod(int64_t a, int n) { return static_cast<int>(((a % n) + n) % n); }

// Primitive calls per loop.
RINGO_HD constexpr int NumSteps(Coll coll, int nranks) {
  if (nranks == 1) return 1;
  switch (coll) {
    case Coll::kAllReduce: return 2 * nranks - 1;
    case Coll::kReduceScatter:
    case Coll::kAllGather: return nranks;
    case Coll::kBroadcast:
    case Coll::kReduce: return 1;
  }
  return 0;
}

// Data transfers per loop on each edge: 2(N-1) for AllReduce.
RINGO_HD constexpr int NumTransfers(Coll coll, int nranks) {
  if (nranks == 1) return 0;
  switch (coll) {
    case Coll::kAllReduce: return 2 * (nranks - 1);
    case Coll::kReduceScatter:
    case Coll::kAllGather: return nranks - 1;
    case Coll::kBroadcast:
    case Coll::kReduce: return 1;
  }
  return 0;
}

struct Step {
  Prim prim;
  int chunk;  // ring position whose chunk moves (AllReduce/RS/AG); 0 for Broadcast/Reduce
};

// What the rank at ring position `pos` does at step `step` of a loop.
// `root_pos` is the ring position of the root (Broadcast/Reduce only).
RINGO_HD constexpr Step RingStep(Coll coll, int nranks, int pos, int root_pos, int step) {
  const int n = nranks;
  if (n == 1) return {Prim::kCopy, 0};
  switch (coll) {
    case Coll::kAllReduce: {
      // Reduce-scatter for steps 0..N-1, all-gather for N-1..2N-2 (step N-1 ends
      // the first and starts the second). Chunk p-s-1 throughout.
      const int chunk = Mod(pos - step - 1, n);
      if (step == 0) return {Prim::kSend, chunk};
      if (step < n - 1) return {Prim::kRecvReduceSend, chunk};
      if (step == n - 1) return {Prim::kRecvReduceCopySend, chunk};
      if (step < 2 * n - 2) return {Prim::kRecvCopySend, chunk};
      return {Prim::kRecv, chunk};
    }
    case Coll::kReduceScatter: {
      const int chunk = Mod(pos - step - 1, n);
      if (step == 0) return {Prim::kSend, chunk};
      if (step < n - 1) return {Prim::kRecvReduceSend, chunk};
      return {Prim::kRecvReduceCopy, chunk};
    }
    case Coll::kAllGather: {
      const int chunk = Mod(pos - step, n);
      if (step == 0) return {Prim::kCopySend, chunk};
      if (step < n - 1) return {Prim::kRecvCopySend, chunk};
      return {Prim::kRecv, chunk};
    }
    case Coll::kBroadcast: {
      const int q = Mod(pos - root_pos, n);  // distance from the root along the ring
      if (q == 0) return {Prim::kCopySend, 0};
      if (q < n - 1) return {Prim::kRecvCopySend, 0};
      return {Prim::kRecv, 0};
    }
    case Coll::kReduce: {
      const int q = Mod(pos - root_pos - 1, n);  // the root is last
      if (q == 0) return {Prim::kSend, 0};
      if (q < n - 1) return {Prim::kRecvReduceSend, 0};
      return {Prim::kRecvReduceCopy, 0};
    }
  }
  return {Prim::kCopy, 0};
}

// Whether the rank at `pos` receives anything in a loop (every rank but the
// root of a Broadcast and the first rank of a Reduce's chain, for nranks > 1).
RINGO_HD constexpr bool RankReceives(Coll coll, int nranks, int pos, int root_pos) {
  if (nranks == 1) return false;
  if (coll == Coll::kBroadcast) return Mod(pos - root_pos, nranks) != 0;
  if (coll == Coll::kReduce) return Mod(pos - root_pos - 1, nranks) != 0;
  return true;
}

// A half-open range of elements [lo, hi).
struct Range {
  int64_t lo;
  int64_t hi;
};

// Chunk starts are multiples of kChunkAlignBytes (in elements: ChunkAlignElems),
// so slots and buffers stay cache-line and 16-byte aligned when the buffers are.
// The host executor and the CUDA kernels must chunk alike.
inline constexpr int64_t kChunkAlignBytes = 64;
RINGO_HD constexpr int64_t ChunkAlignElems(int64_t elem_bytes) {
  return kChunkAlignBytes / elem_bytes > 0 ? kChunkAlignBytes / elem_bytes : 1;
}

// Channel `c`'s share of `count` elements (the whole count for AllReduce,
// Broadcast and Reduce; one rank's block for ReduceScatter and AllGather), split into `nchannels` contiguous
// parts whose starts are multiples of `align` elements.
RINGO_HD constexpr Range ChannelRange(int64_t count, int nchannels, int c, int64_t align) {
  const int64_t part = AlignUp(DivUp(count, nchannels), align);
  const int64_t lo = Min64(part * c, count);
  return {lo, Min64(lo + part, count)};
}

// Where the channels carry unequal parts (links of unequal speed): `cum`
// holds nchannels + 1 cumulative weights, cum[0] == 0 and cum[nchannels] the
// total (nonzero); channel c takes about count * (cum[c+1] - cum[c]) / total
// elements, its start a multiple of `align`. Contiguous and covering [0,
// count) whatever the weights, as ChannelRange is.
RINGO_HD constexpr int64_t WeightedEdge(int64_t count, const uint32_t* cum, int nchannels, int k, int64_t align) {
  if (k <= 0) return 0;
  if (k >= nchannels) return count;
  const int64_t total = cum[nchannels];
  // count * cum[k] / total without overflow for any count below 2^62.
  const int64_t at = (count / total) * cum[k] + (count % total) * cum[k] / total;
  return Min64(AlignUp(at, align), count);
}
RINGO_HD constexpr Range WeightedChannelRange(int64_t count, const uint32_t* cum, int nchannels, int c,
                                              int64_t align) {
  const int64_t lo = WeightedEdge(count, cum, nchannels, c, align);
  const int64_t hi = WeightedEdge(count, cum, nchannels, c + 1, align);
  return {lo, hi > lo ? hi : lo};
}

// Loops a channel runs over `range` with chunks of at most `slice` elements.
RINGO_HD constexpr int64_t NumLoops(Coll coll, int nranks, Range range, int64_t slice) {
  const int64_t n = range.hi - range.lo;
  if (n <= 0) return 0;
  if (coll == Coll::kAllReduce) return DivUp(n, slice * nranks);
  return DivUp(n, slice);
}

// Elements per chunk in loop `loop` of an AllReduce channel: the loop's
// remainder shared by nranks chunks, rounded up to `align`, capped at `slice`.
RINGO_HD constexpr int64_t AllReduceChunk(int nranks, Range range, int64_t slice, int64_t loop,
                                          int64_t align) {
  const int64_t off = range.lo + loop * slice * nranks;
  const int64_t left = range.hi - off;
  return Min64(slice, AlignUp(DivUp(left, nranks), align));
}

// Where a chunk lies: `offset` into the buffer the primitive indexes, and
// `count` elements (possibly 0 at the tail of an AllReduce).
struct Span {
  int64_t offset;
  int64_t count;
};

// The span of chunk `block` in loop `loop`. For AllReduce `block` is the
// chunk's ring position and offsets index the whole buffer. For
// ReduceScatter/AllGather `block` is the rank whose block the chunk belongs to
// and offsets index the full (nranks * count) buffer. For Broadcast/Reduce
// `block` is ignored.
RINGO_HD constexpr Span ChunkSpan(Coll coll, int nranks, Range range, int64_t slice, int64_t loop,
                                  int block, int64_t block_count, int64_t align) {
  if (coll == Coll::kAllReduce) {
    const int64_t chunk = AllReduceChunk(nranks, range, slice, loop, align);
    const int64_t off = range.lo + loop * slice * nranks + block * chunk;
    const int64_t lo = Min64(off, range.hi);
    return {lo, Min64(off + chunk, range.hi) - lo};
  }
  const int64_t off = range.lo + loop * slice;
  const int64_t n = Min64(slice, range.hi - off);
  if (coll == Coll::kReduceScatter || coll == Coll::kAllGather) {
    return {static_cast<int64_t>(block) * block_count + off, n};
  }
  return {off, n};
}

}  // namespace ringo::kernels

#endif  // RINGO_KERNELS_SCHEDULE_H_
