// The ring loop, written once: one channel of a ring collective as a walk
// over schedule.h, calling the primitives step by step. The host executor
// (ring_executor.cc, primitives over shared-memory FIFOs, with the signature
// checks inside them) and the CUDA kernel (cuda/internal/ring.cuh,
// primitives.cuh's Primitives<T, kOp, Proto>) both run this function, and
// the host test of the kernel's primitives (cuda/ring_loop_host_test.cc)
// runs it over host queues.
//
// A Prims type provides, for element type T (bytes for AllGather and
// Broadcast, which move bytes whatever the datatype):
//
//   Copy(src, dst, n)                      dst = src (nranks == 1; dst null: in place)
//   Send(src, n, step)                     out slot = src
//   CopySend(src, dst, n, step)            out slot = src; dst = src (dst null: in place)
//   RecvReduceSend(src, n, step)           out slot = in slot (+) src
//   RecvReduceCopySend(src, dst, n, step)  dst = out slot = in slot (+) src (final)
//   RecvReduceCopy(src, dst, n, step)      dst = in slot (+) src (final)
//   RecvCopySend(dst, n, step)             dst = out slot = in slot
//   Recv(dst, n, step)                     dst = in slot
//   failed()                               a primitive failed: stop
//
// Every method consumes one step of each connector it uses even when n is 0.
// `step` numbers the primitive calls of the channel (loop * steps + step),
// for error reports.
#ifndef RINGO_KERNELS_RING_LOOP_H_
#define RINGO_KERNELS_RING_LOOP_H_

#include <cstdint>

#include "base/device/dtype.h"
#include "base/device/macros.h"
#include "kernels/coll_args.h"
#include "kernels/schedule.h"

namespace ringo::kernels {

// Ring orders up to this many ranks travel inside RingArgs (and so inside a
// kernel's parameters); larger rings name an array (host communicators only:
// a GPU communicator takes at most this many ranks).
inline constexpr int kMaxInlineRanks = 64;

// A ring collective as one rank runs it: the call, where the rank sits on the
// ring, and how the work is cut.
struct RingArgs {
  CollArgs call;
  int rank = 0;
  int nranks = 1;
  int pos = 0;       // this rank's ring position
  int root_pos = 0;  // the root's ring position (Broadcast, Reduce)
  int nchannels = 1;
  int64_t slice_bytes = 0;  // a chunk's largest size: at most what one FIFO slot carries
  int order[kMaxInlineRanks] = {};  // ring position -> rank, when nranks <= kMaxInlineRanks
  const int* order_beyond = nullptr;  // the whole order otherwise (host memory)
  // The channels' cumulative weights (nchannels + 1 entries, host memory:
  // host rings whose channels cross links of unequal speed), or null for
  // equal parts.
  const uint32_t* split = nullptr;
};

// Channel `channel`'s part of the call's elements.
RINGO_HD_INLINE Range RingChannelRange(const RingArgs& a, int channel, int64_t align) {
  return a.split != nullptr ? WeightedChannelRange(a.call.count, a.split, a.nchannels, channel, align)
                            : ChannelRange(a.call.count, a.nchannels, channel, align);
}

RINGO_HD_INLINE int RankAt(const RingArgs& a, int pos) {
  return a.nranks <= kMaxInlineRanks ? a.order[pos] : a.order_beyond[pos];
}

// RingArgs for `call` on the rank at `pos` of the ring `order` (nranks
// entries, kept by the caller when nranks > kMaxInlineRanks).
inline RingArgs MakeRingArgs(const CollArgs& call, int rank, int nranks, int pos, const int* order, int nchannels,
                             int64_t slice_bytes) {
  RingArgs a;
  a.call = call;
  a.rank = rank;
  a.nranks = nranks;
  a.pos = pos;
  a.nchannels = nchannels;
  a.slice_bytes = slice_bytes;
  if (nranks <= kMaxInlineRanks) {
    for (int p = 0; p < nranks; ++p) a.order[p] = order[p];
  } else {
    a.order_beyond = order;
  }
  for (int p = 0; p < nranks; ++p) {
    if (order[p] == call.root) a.root_pos = p;
  }
  return a;
}

// The loop's own view: AllGather and Broadcast move bytes whatever the
// datatype (their count becomes bytes, and they run as uint8 with sum).
// The (datatype, op) that returns picks the primitives' instantiation.
RINGO_HD_INLINE RingArgs LoopArgs(RingArgs a) {
  if (a.call.coll == Coll::kAllGather || a.call.coll == Coll::kBroadcast) {
    a.call.count *= static_cast<int64_t>(base::DataTypeSize(a.call.dtype));
    a.call.dtype = base::DataType::kUint8;
    a.call.op = base::RedOp::kSum;
  }
  return a;
}

// Channel `channel` of the collective in `a` (LoopArgs'), on this rank.
template <typename T, typename Prims>
RINGO_DEVICE_FN void RunRingChannel(const RingArgs& a, int channel, Prims& prims) {
  const Coll coll = a.call.coll;
  const int64_t align = ChunkAlignElems(sizeof(T));
  const int64_t slice = a.slice_bytes / static_cast<int64_t>(sizeof(T));
  const bool by_rank = coll == Coll::kReduceScatter || coll == Coll::kAllGather;
  const int64_t block_count = by_rank ? a.call.count : 0;
  const Range range = RingChannelRange(a, channel, align);
  const int steps = NumSteps(coll, a.nranks);
  const int64_t loops = NumLoops(coll, a.nranks, range, slice);
  const T* send = static_cast<const T*>(a.call.send);
  T* recv = static_cast<T*>(a.call.recv);

  for (int64_t loop = 0; loop < loops; ++loop) {
    for (int s = 0; s < steps; ++s) {
      const Step st = RingStep(coll, a.nranks, a.pos, a.root_pos, s);
      const int block = by_rank ? RankAt(a, st.chunk) : st.chunk;
      const Span span = ChunkSpan(coll, a.nranks, range, slice, loop, block, block_count, align);
      // This rank's input and output for the span: its own block of an
      // AllGather's input, its own block of a ReduceScatter's output.
      const T* in = nullptr;
      T* out = nullptr;
      if (PrimReads(st.prim)) {
        in = send + (coll == Coll::kAllGather ? span.offset - a.rank * block_count : span.offset);
      }
      if (PrimWrites(st.prim)) {
        out = recv + (coll == Coll::kReduceScatter ? span.offset - a.rank * block_count : span.offset);
      }
      const int64_t n = span.count;
      const int64_t id = loop * steps + s;
      switch (st.prim) {
        case Prim::kCopy: prims.Copy(in, in == out ? nullptr : out, n); break;
        case Prim::kSend: prims.Send(in, n, id); break;
        case Prim::kCopySend: prims.CopySend(in, in == out ? nullptr : out, n, id); break;
        case Prim::kRecvReduceSend: prims.RecvReduceSend(in, n, id); break;
        case Prim::kRecvReduceCopySend: prims.RecvReduceCopySend(in, out, n, id); break;
        case Prim::kRecvReduceCopy: prims.RecvReduceCopy(in, out, n, id); break;
        case Prim::kRecvCopySend: prims.RecvCopySend(out, n, id); break;
        case Prim::kRecv: prims.Recv(out, n, id); break;
      }
      if (prims.failed()) return;
    }
  }
}

}  // namespace ringo::kernels

#endif  // RINGO_KERNELS_RING_LOOP_H_
