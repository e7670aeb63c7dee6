// The ring loop, written once: one channel of a ring collective as a walk
// over schedule.h, calling the primitives (primitives.cuh's interface) step by
// step, exactly as the host executor's Channel::Run and Exec do
// (host_executor.cc). Generic over the primitives so the CUDA kernel
// (ring.cuh, Primitives<T, kOp, Proto>) and the host test of this loop
// (ring_loop_host_test.cc, primitives over host queues) run the same code.
// No CUDA headers; with internal/host_shim.h it compiles as host C++.
#ifndef RINGO_KERNELS_CUDA_INTERNAL_RING_LOOP_CUH_
#define RINGO_KERNELS_CUDA_INTERNAL_RING_LOOP_CUH_

#include <cstdint>

#include "kernels/cuda/internal/host_shim.h"
#include "kernels/cuda/internal/kernel_params.h"
#include "kernels/schedule.h"

namespace ringo::kernels::gpu::internal {

__device__ __forceinline__ int RankAt(const RingKernelParams& p, int pos) {
  return p.nranks <= kMaxInlineRanks ? p.order[pos] : p.device_order[pos];
}

// Channel `channel` of the collective in `p` on this rank. `prims` provides
// Copy, Send, CopySend, RecvReduceSend, RecvReduceCopySend, RecvReduceCopy,
// RecvCopySend, Recv (primitives.cuh) and failed(); T is the element type
// (bytes for AllGather and Broadcast).
template <typename T, typename Prims>
__device__ void RunRing(const RingKernelParams& p, int channel, Prims& prims) {
  const int64_t align = ChunkAlignElems(sizeof(T));
  const int64_t slice = p.slice_bytes / static_cast<int64_t>(sizeof(T));
  const bool by_rank = p.coll == Coll::kReduceScatter || p.coll == Coll::kAllGather;
  const int64_t block_count = by_rank ? p.count : 0;
  const Range range = ChannelRange(p.count, p.nchannels, channel, align);
  const int steps = NumSteps(p.coll, p.nranks);
  const int64_t loops = NumLoops(p.coll, p.nranks, range, slice);
  const T* send = static_cast<const T*>(p.send);
  T* recv = static_cast<T*>(p.recv);

  for (int64_t loop = 0; loop < loops; ++loop) {
    for (int s = 0; s < steps; ++s) {
      const Step st = RingStep(p.coll, p.nranks, p.pos, p.root_pos, s);
      const int block = by_rank ? RankAt(p, st.chunk) : st.chunk;
      const Span span = ChunkSpan(p.coll, p.nranks, range, slice, loop, block, block_count, align);
      // This rank's input and output for the span (host executor's Input/Output).
      const T* in = nullptr;
      T* out = nullptr;
      if (PrimReads(st.prim)) {
        in = send + (p.coll == Coll::kAllGather ? span.offset - p.rank * block_count : span.offset);
      }
      if (PrimWrites(st.prim)) {
        out = recv + (p.coll == Coll::kReduceScatter ? span.offset - p.rank * block_count : span.offset);
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

}  // namespace ringo::kernels::gpu::internal

#endif  // RINGO_KERNELS_CUDA_INTERNAL_RING_LOOP_CUH_
