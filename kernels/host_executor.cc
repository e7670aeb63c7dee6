#include "kernels/host_executor.h"

#include <cstring>
#include <string>

#include "kernels/internal/dispatch.h"
#include "kernels/internal/host_loops_table.h"
#include "kernels/internal/prefetch.h"
#include "kernels/internal/stream_store.h"
#include "kernels/reduce_op.h"
#include "kernels/signature.h"

namespace ringo::kernels {
namespace {

using base::RedOp;
using base::Status;

// Element type only: the reductions come from the host loops' table.
template <typename T>
class Channel {
 public:
  Channel(const CollArgs& a, const RingPlace& p, const ChannelPlan& plan, ChannelEnds& e)
      : args_(a), place_(p), ends_(e), loops_(internal::GetHostLoops(a.dtype, a.op)) {
    block_ = args_.coll == Coll::kReduceScatter || args_.coll == Coll::kAllGather ? args_.count : 0;
    align_ = ChunkAlignElems(static_cast<int64_t>(sizeof(T)));
    slice_ = plan.slice_bytes / static_cast<int64_t>(sizeof(T));
    stream_ = plan.stream_output;
    stream_fifo_ = plan.stream_fifo;
    range_ = ChannelRange(SplitCount(args_), plan.nchannels, plan.channel, align_);
    root_pos_ = 0;
    for (int q = 0; q < p.nranks; ++q) {
      if ((*p.order)[q] == args_.root) root_pos_ = q;
    }
    const int n = p.nranks;
    prev_rank_ = n > 1 ? (*p.order)[(p.pos + n - 1) % n] : p.rank;
    if (e.sig.seq != 0 && n > 1 && plan.channel == 0) {
      const bool any = NumLoops(args_.coll, n, range_, slice_) > 0;
      receives_ = any && RankReceives(args_.coll, n, p.pos, root_pos_);
      owe_verdict_ = !(any && RankReceives(args_.coll, n, (p.pos + 1) % n, root_pos_));
      await_verdict_ = !receives_;
    }
  }

  Status Run() {
    Status st = owe_verdict_ && !receives_ ? SendVerdict() : base::OkStatus();
    if (st.ok()) st = Loop();
    if (st.ok() && await_verdict_) st = ReceiveVerdict();
    if (stream_) internal::StreamFence();  // order the streamed output before the caller's next step
    return st;
  }

 private:
  // The empty slot that tells a next rank which receives nothing that this
  // rank's call matched (host_executor.h).
  Status SendVerdict() {
    owe_verdict_ = false;
    auto slot = ends_.send->Acquire(ends_.wait, -1);
    if (!slot.ok()) return slot.status();
    ends_.send->Post(0, ends_.sig);
    return base::OkStatus();
  }

  Status ReceiveVerdict() {
    size_t got = 0;
    transport::CallSignature theirs;
    auto slot = ends_.recv->Acquire(ends_.wait, -1, &got, &theirs);
    if (!slot.ok()) return slot.status();
    if (theirs != ends_.sig) return SignatureMismatch(place_.rank, ends_.sig, prev_rank_, theirs);
    if (got != 0) return UnexpectedChunk(0, got, -1);
    ends_.recv->Release();
    return base::OkStatus();
  }

  Status UnexpectedChunk(size_t want, size_t got, int64_t step_id) const {
    const std::string msg = "rank " + std::to_string(place_.rank) + " expected a chunk of " + std::to_string(want) +
                            " bytes at step " + std::to_string(step_id) + " and its ring predecessor rank " +
                            std::to_string(prev_rank_) + " sent " + std::to_string(got) +
                            ": the ranks did not issue the same collective with the same count";
    return base::InvalidUsage(msg).WithOrigin(prev_rank_, msg);
  }

  Status Loop() {
    const int steps = NumSteps(args_.coll, place_.nranks);
    const int64_t loops = NumLoops(args_.coll, place_.nranks, range_, slice_);
    for (int64_t loop = 0; loop < loops; ++loop) {
      for (int s = 0; s < steps; ++s) {
        const Step step = RingStep(args_.coll, place_.nranks, place_.pos, root_pos_, s);
        const bool by_rank = args_.coll == Coll::kReduceScatter || args_.coll == Coll::kAllGather;
        const int block = by_rank ? (*place_.order)[step.chunk] : step.chunk;
        const Span span = ChunkSpan(args_.coll, place_.nranks, range_, slice_, loop, block, block_, align_);
        Status st = Exec(step.prim, span, loop * steps + s);
        if (!st.ok()) return st;
      }
    }
    return base::OkStatus();
  }

  // This rank's input and output for a span, by collective.
  const T* Input(const Span& s) const {
    const T* send = static_cast<const T*>(args_.send);
    if (args_.coll == Coll::kAllGather) return send + (s.offset - place_.rank * block_);
    return send + s.offset;
  }
  T* Output(const Span& s) const {
    T* recv = static_cast<T*>(args_.recv);
    if (args_.coll == Coll::kReduceScatter) return recv + (s.offset - place_.rank * block_);
    return recv + s.offset;
  }

  Status Exec(Prim prim, const Span& span, int64_t step_id) {
    const int64_t n = span.count;
    const size_t bytes = static_cast<size_t>(n) * sizeof(T);
    const T* in = nullptr;
    T* out = nullptr;
    if (PrimRecvs(prim)) {
      size_t got = 0;
      transport::CallSignature theirs;
      auto slot = ends_.recv->Acquire(ends_.wait, step_id, &got, &theirs);
      if (!slot.ok()) return slot.status();
      if (ends_.sig.seq != 0 && theirs != ends_.sig) {
        return SignatureMismatch(place_.rank, ends_.sig, prev_rank_, theirs);
      }
      if (got != bytes) return UnexpectedChunk(bytes, got, step_id);
      in = static_cast<const T*>(*slot);
      internal::PrefetchPeerData(in, bytes);
      if (owe_verdict_) RETURN_IF_ERROR(SendVerdict());  // this rank's first receive matched
    }
    if (PrimSends(prim)) {
      auto slot = ends_.send->Acquire(ends_.wait, step_id);
      if (!slot.ok()) return slot.status();
      out = static_cast<T*>(*slot);
    }
    const OpParams nranks(place_.nranks, args_.scalar);  // the functor's rank count and scalar
    switch (prim) {
      case Prim::kCopy:
        // One rank: its input is the result, but a premul-sum's still meets its scalar.
        if (args_.op == RedOp::kPreMulSum) {
          loops_.send(Input(span), Output(span), n, nranks, stream_);
        } else if (args_.send != args_.recv) {
          std::memmove(Output(span), Input(span), bytes);
        }
        break;
      case Prim::kSend:
        loops_.send(Input(span), out, n, nranks, stream_fifo_);
        break;
      case Prim::kCopySend:
        internal::CopyOut(out, Input(span), bytes, stream_fifo_);
        if (Input(span) != Output(span)) internal::CopyOut(Output(span), Input(span), bytes, stream_);
        break;
      case Prim::kRecvReduceSend:
        loops_.reduce_partial(in, Input(span), out, nullptr, n, nranks, stream_fifo_, false);
        break;
      case Prim::kRecvReduceCopySend:
        loops_.reduce_final(in, Input(span), Output(span), out, n, nranks, stream_, stream_fifo_);
        break;
      case Prim::kRecvReduceCopy:
        loops_.reduce_final(in, Input(span), Output(span), nullptr, n, nranks, stream_, false);
        break;
      case Prim::kRecvCopySend:
        internal::CopyOut(out, in, bytes, stream_fifo_);
        internal::CopyOut(Output(span), in, bytes, stream_);
        break;
      case Prim::kRecv:
        internal::CopyOut(Output(span), in, bytes, stream_);
        break;
    }
    if (out != nullptr) {
      if (stream_fifo_) internal::StreamFence();
      ends_.send->Post(bytes, ends_.sig);
    }
    if (in != nullptr) ends_.recv->Release();
    return base::OkStatus();
  }

  const CollArgs& args_;
  const RingPlace& place_;
  ChannelEnds& ends_;
  const internal::HostLoops& loops_;
  int64_t block_ = 0;
  int64_t align_ = 1;
  int64_t slice_ = 1;
  Range range_{0, 0};
  int root_pos_ = 0;
  int prev_rank_ = 0;
  bool stream_ = false;
  bool stream_fifo_ = false;
  // Channel 0 with signatures: whether this rank receives in this
  // collective, owes its next rank a verdict, and waits for one.
  bool receives_ = false;
  bool owe_verdict_ = false;
  bool await_verdict_ = false;
};

template <typename T, RedOp kOp>
struct RunChannelFn {
  static Status Run(const CollArgs& a, const RingPlace& p, const ChannelPlan& plan, ChannelEnds& e) {
    return Channel<T>(a, p, plan, e).Run();
  }
};

}  // namespace

int64_t SplitCount(const CollArgs& args) { return args.count; }

Status RunHostChannel(const CollArgs& args, const RingPlace& place, const ChannelPlan& plan, ChannelEnds& ends) {
  if (args.coll == Coll::kAllGather || args.coll == Coll::kBroadcast) {
    // Pure data movement: bytes, whatever the datatype.
    CollArgs bytes = args;
    bytes.count = args.count * static_cast<int64_t>(base::DataTypeSize(args.dtype));
    return RunChannelFn<uint8_t, RedOp::kSum>::Run(bytes, place, plan, ends);
  }
  return internal::DispatchTypeOp<RunChannelFn>(args.dtype, args.op, args, place, plan, ends);
}

}  // namespace ringo::kernels
