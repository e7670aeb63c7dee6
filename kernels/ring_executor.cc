#include "kernels/ring_executor.h"

#include <cstring>
#include <string>

#include "kernels/internal/dispatch.h"
#include "kernels/internal/host_loops_table.h"
#include "kernels/internal/prefetch.h"
#include "kernels/internal/stream_store.h"
#include "kernels/reduce_op.h"
#include "kernels/coll_signature.h"

namespace ringo::kernels {
namespace {

using base::RedOp;
using base::Status;

// The ring primitives (ring_loop.h) over one channel's FIFO ends. Element
// type only: the reductions come from the host loops' table. Every
// primitive that receives checks the slot's signature and size first; the
// first failure stops the loop (failed()) and is what Finish() returns.
template <typename T>
class HostPrims {
 public:
  HostPrims(const RingArgs& a, int channel, const HostStores& stores, ChannelEnds& e)
      : a_(a),
        ends_(e),
        loops_(internal::GetHostLoops(a.call.dtype, a.call.op)),
        params_(a.nranks, a.call.scalar),
        stream_(stores.stream_output),
        stream_fifo_(stores.stream_fifo) {
    const int n = a.nranks;
    prev_rank_ = n > 1 ? RankAt(a, (a.pos + n - 1) % n) : a.rank;
    if (e.sig.seq != 0 && n > 1 && channel == 0) {
      const Range range = RingChannelRange(a, channel, ChunkAlignElems(sizeof(T)));
      const bool any = NumLoops(a.call.coll, n, range, a.slice_bytes / static_cast<int64_t>(sizeof(T))) > 0;
      receives_ = any && RankReceives(a.call.coll, n, a.pos, a.root_pos);
      owe_verdict_ = !(any && RankReceives(a.call.coll, n, (a.pos + 1) % n, a.root_pos));
      await_verdict_ = !receives_;
    }
  }

  // Before the loop: a rank that receives nothing owes its successor its
  // verdict at once.
  void Start() {
    if (owe_verdict_ && !receives_) status_ = SendVerdict();
  }

  // After the loop: a rank that received nothing waits for its
  // predecessor's verdict. The collective's result on this channel.
  Status Finish() {
    if (status_.ok() && await_verdict_) status_ = ReceiveVerdict();
    if (stream_) internal::StreamFence();  // order the streamed output before the caller's next step
    return status_;
  }

  bool failed() const { return !status_.ok(); }

  void Copy(const T* src, T* dst, int64_t n) {
    // One rank: its input is the result, but a premul-sum's still meets its scalar.
    if (a_.call.op == RedOp::kPreMulSum) {
      loops_.send(src, dst != nullptr ? dst : const_cast<T*>(src), n, params_, stream_);
    } else if (dst != nullptr) {
      std::memmove(dst, src, static_cast<size_t>(n) * sizeof(T));
    }
  }
  void Send(const T* src, int64_t n, int64_t step) {
    Run<false, true>(n, step, [&](const T*, T* slot) { loops_.send(src, slot, n, params_, stream_fifo_); });
  }
  void CopySend(const T* src, T* dst, int64_t n, int64_t step) {
    Run<false, true>(n, step, [&](const T*, T* slot) {
      internal::CopyOut(slot, src, Bytes(n), stream_fifo_);
      if (dst != nullptr) internal::CopyOut(dst, src, Bytes(n), stream_);
    });
  }
  void RecvReduceSend(const T* src, int64_t n, int64_t step) {
    Run<true, true>(n, step, [&](const T* in, T* slot) {
      loops_.reduce_partial(in, src, slot, nullptr, n, params_, stream_fifo_, false);
    });
  }
  void RecvReduceCopySend(const T* src, T* dst, int64_t n, int64_t step) {
    Run<true, true>(n, step, [&](const T* in, T* slot) {
      loops_.reduce_final(in, src, dst, slot, n, params_, stream_, stream_fifo_);
    });
  }
  void RecvReduceCopy(const T* src, T* dst, int64_t n, int64_t step) {
    Run<true, false>(n, step, [&](const T* in, T*) {
      loops_.reduce_final(in, src, dst, nullptr, n, params_, stream_, false);
    });
  }
  void RecvCopySend(T* dst, int64_t n, int64_t step) {
    Run<true, true>(n, step, [&](const T* in, T* slot) {
      internal::CopyOut(slot, in, Bytes(n), stream_fifo_);
      internal::CopyOut(dst, in, Bytes(n), stream_);
    });
  }
  void Recv(T* dst, int64_t n, int64_t step) {
    Run<true, false>(n, step, [&](const T* in, T*) { internal::CopyOut(dst, in, Bytes(n), stream_); });
  }

 private:
  static size_t Bytes(int64_t n) { return static_cast<size_t>(n) * sizeof(T); }

  // One step: the predecessor's slot (checked), a free slot at the
  // successor, the work, then the post and the release.
  template <bool kRecv, bool kSend, typename Work>
  void Run(int64_t n, int64_t step, Work work) {
    const size_t bytes = Bytes(n);
    const T* in = nullptr;
    T* out = nullptr;
    if constexpr (kRecv) {
      size_t got = 0;
      transport::CallSignature theirs;
      auto slot = ends_.recv->Acquire(ends_.wait, step, &got, &theirs);
      if (!slot.ok()) {
        status_ = slot.status();
        return;
      }
      if (ends_.sig.seq != 0 && theirs != ends_.sig) {
        status_ = SignatureMismatch(a_.rank, ends_.sig, prev_rank_, theirs);
        return;
      }
      if (got != bytes) {
        status_ = UnexpectedChunk(bytes, got, step);
        return;
      }
      in = static_cast<const T*>(*slot);
      internal::PrefetchPeerData(in, bytes);
      if (owe_verdict_) {  // this rank's first receive matched
        status_ = SendVerdict();
        if (!status_.ok()) return;
      }
    }
    if constexpr (kSend) {
      auto slot = ends_.send->Acquire(ends_.wait, step, bytes);
      if (!slot.ok()) {
        status_ = slot.status();
        return;
      }
      out = static_cast<T*>(*slot);
    }
    work(in, out);
    if constexpr (kSend) {
      if (stream_fifo_) internal::StreamFence();
      ends_.send->Post(bytes, ends_.sig);
    }
    if constexpr (kRecv) ends_.recv->Release();
  }

  // The empty slot that tells a next rank which receives nothing that this
  // rank's call matched (ring_executor.h).
  Status SendVerdict() {
    owe_verdict_ = false;
    auto slot = ends_.send->Acquire(ends_.wait, -1, 0);
    if (!slot.ok()) return slot.status();
    ends_.send->Post(0, ends_.sig);
    return base::OkStatus();
  }

  Status ReceiveVerdict() {
    size_t got = 0;
    transport::CallSignature theirs;
    auto slot = ends_.recv->Acquire(ends_.wait, -1, &got, &theirs);
    if (!slot.ok()) return slot.status();
    if (theirs != ends_.sig) return SignatureMismatch(a_.rank, ends_.sig, prev_rank_, theirs);
    if (got != 0) return UnexpectedChunk(0, got, -1);
    ends_.recv->Release();
    return base::OkStatus();
  }

  Status UnexpectedChunk(size_t want, size_t got, int64_t step_id) const {
    const std::string msg = "rank " + std::to_string(a_.rank) + " expected a chunk of " + std::to_string(want) +
                            " bytes at step " + std::to_string(step_id) + " and its ring predecessor rank " +
                            std::to_string(prev_rank_) + " sent " + std::to_string(got) +
                            ": the ranks did not issue the same collective with the same count";
    return base::InvalidUsage(msg).WithOrigin(prev_rank_, msg);
  }

  const RingArgs& a_;
  ChannelEnds& ends_;
  const internal::HostLoops& loops_;
  const OpParams params_;  // the functor's rank count and scalar
  const bool stream_;
  const bool stream_fifo_;
  int prev_rank_ = 0;
  // Channel 0 with signatures: whether this rank receives in this
  // collective, owes its next rank a verdict, and waits for one.
  bool receives_ = false;
  bool owe_verdict_ = false;
  bool await_verdict_ = false;
  Status status_;
};

template <typename T, RedOp kOp>
struct RunChannelFn {
  static Status Run(const RingArgs& a, int channel, const HostStores& stores, ChannelEnds& e) {
    HostPrims<T> prims(a, channel, stores, e);
    prims.Start();
    if (!prims.failed()) RunRingChannel<T>(a, channel, prims);
    return prims.Finish();
  }
};

}  // namespace

Status RunHostChannel(const RingArgs& ring, int channel, const HostStores& stores, ChannelEnds& ends) {
  const RingArgs a = LoopArgs(ring);
  return internal::DispatchTypeOp<RunChannelFn>(a.call.dtype, a.call.op, a, channel, stores, ends);
}

}  // namespace ringo::kernels
