#include "kernels/oneshot_executor.h"

#include <cstring>
#include <vector>

#include "kernels/internal/dispatch.h"
#include "kernels/internal/prefetch.h"
#include "kernels/internal/host_loops_table.h"
#include "kernels/reduce_op.h"
#include "kernels/coll_signature.h"

namespace ringo::kernels {
namespace {

using base::RedOp;
using base::Status;

// Element type only: the reductions come from the host loops' table.
template <typename T>
Status OneShot(const CollArgs& a, int rank, int nranks, transport::Board& board, uint64_t seq,
               const transport::WaitContext& wait, int64_t ll_max_bytes, const transport::CallSignature& sig,
               bool ordered) {
  const size_t elem = sizeof(T);
  const int64_t block = a.count;  // per-rank block for ReduceScatter / AllGather
  // What each posting rank posts (a non-root Broadcast rank posts nothing but
  // still takes part in the sequence).
  const int64_t post_bytes = OneShotPostBytes(a, nranks);
  const bool posts = a.coll != Coll::kBroadcast || rank == a.root;
  // Small posts in the LL format (board.h). The choice depends only on the
  // arguments and the geometry, so every rank makes the same one.
  const bool ll = post_bytes <= ll_max_bytes;
  ASSIGN_OR_RETURN(void* mine, board.AcquireWrite(seq, wait));
  if (ll) {
    board.PostLL(seq, sig, a.send, posts ? static_cast<size_t>(post_bytes) : 0);
  } else {
    if (posts && post_bytes > 0) std::memcpy(mine, a.send, static_cast<size_t>(post_bytes));
    board.Post(seq, sig);
  }
  const bool checked = sig.seq != 0;
  auto mismatch = [&](int q) { return SignatureMismatch(rank, sig, q, board.PostedSignature(q, seq)); };
  // What rank q posts, as this rank's call says.
  auto posted_by = [&](int q) -> size_t {
    return a.coll != Coll::kBroadcast || q == a.root ? static_cast<size_t>(post_bytes) : 0;
  };

  // The posts this rank reads, in rank order. Reused per thread: no
  // allocation per call once a thread has seen this many ranks.
  thread_local std::vector<const T*> in_storage, block_storage;
  thread_local std::vector<char> ll_storage;
  in_storage.assign(nranks, nullptr);
  const T** in = in_storage.data();
  const size_t ll_stride = (static_cast<size_t>(ll_max_bytes) + 4 + 63) / 64 * 64;  // whole LL words
  if (ll && ll_storage.size() < static_cast<size_t>(nranks) * ll_stride) {
    ll_storage.resize(static_cast<size_t>(nranks) * ll_stride);
  }
  // Rank q's post (this rank's own: its input; LL posts unpacked).
  auto read = [&](int q) -> Status {
    if (q == rank && ll) {
      in[q] = static_cast<const T*>(a.send);
    } else if (ll) {
      char* dst = ll_storage.data() + static_cast<size_t>(q) * ll_stride;
      ASSIGN_OR_RETURN(const bool matches, board.ReadLL(q, seq, sig, dst, posted_by(q), wait));
      if (!matches) return mismatch(q);
      in[q] = reinterpret_cast<const T*>(dst);
    } else {
      ASSIGN_OR_RETURN(const void* p, board.WaitPosted(q, seq, wait));
      if (checked && board.PostedSignature(q, seq) != sig) return mismatch(q);
      in[q] = static_cast<const T*>(p);
    }
    return Status();
  };
  const bool reads_all = a.coll != Coll::kBroadcast && (a.coll != Coll::kReduce || rank == a.root);
  if (checked && !reads_all) {
    // Ranks that need no post still check every signature, so that a
    // mismatch fails every rank in this call.
    if (ll) {
      for (int q = 0; q < nranks; ++q) {
        if (q == rank) continue;
        char* dst = ll_storage.data() + static_cast<size_t>(q) * ll_stride;
        ASSIGN_OR_RETURN(const bool matches, board.ReadLL(q, seq, sig, dst, posted_by(q), wait));
        if (!matches) return mismatch(q);
      }
    } else {
      RETURN_IF_ERROR(board.WaitAllPosted(seq, wait));
      for (int q = 0; q < nranks; ++q) {
        if (board.PostedSignature(q, seq) != sig) return mismatch(q);
      }
    }
    if (a.coll == Coll::kBroadcast) {
      in[a.root] = rank == a.root ? static_cast<const T*>(a.send)
                   : ll ? reinterpret_cast<const T*>(ll_storage.data() + static_cast<size_t>(a.root) * ll_stride)
                        : static_cast<const T*>(board.Posted(a.root, seq));
    }
  } else if (a.coll == Coll::kBroadcast) {
    RETURN_IF_ERROR(read(a.root));
  } else if (reads_all) {
    if (ll) {
      for (int q = 0; q < nranks; ++q) RETURN_IF_ERROR(read(q));
    } else {
      RETURN_IF_ERROR(board.WaitAllPosted(seq, wait));
      for (int q = 0; q < nranks; ++q) {
        if (checked && board.PostedSignature(q, seq) != sig) return mismatch(q);
        in[q] = static_cast<const T*>(board.Posted(q, seq));
      }
      for (int q = 0; q < nranks; ++q) {
        if (q != rank) internal::PrefetchPeerData(in[q], static_cast<size_t>(post_bytes));
      }
    }
  }
  T* out = static_cast<T*>(a.recv);
  void* outs[1] = {out};
  const internal::HostLoops& loops = internal::GetHostLoops(a.dtype, a.op);
  const auto reduce_fn = ordered ? loops.reduce_ordered : loops.reduce_all;
  auto reduce = [&](const T* const* ins, int64_t count) {
    reduce_fn(reinterpret_cast<const void* const*>(ins), nranks, outs, 1, count, nranks, false);
  };
  if (a.count > 0) {
    switch (a.coll) {
      case Coll::kAllReduce:
        reduce(in, a.count);
        break;
      case Coll::kReduce:
        if (rank == a.root) reduce(in, a.count);
        break;
      case Coll::kReduceScatter: {
        block_storage.assign(nranks, nullptr);
        const T** mine_blocks = block_storage.data();
        for (int q = 0; q < nranks; ++q) mine_blocks[q] = in[q] + rank * block;
        reduce(mine_blocks, block);
        break;
      }
      case Coll::kAllGather:
        for (int q = 0; q < nranks; ++q) {
          T* dst = out + q * block;
          if (dst != in[q]) std::memcpy(dst, in[q], block * elem);
        }
        break;
      case Coll::kBroadcast:
        if (out != in[a.root] && !(rank == a.root && a.recv == a.send)) {
          std::memcpy(out, in[a.root], a.count * elem);
        }
        break;
    }
  }
  board.Done(seq);
  return Status();
}

template <typename T, RedOp kOp>
struct OneShotFn {
  static Status Run(const CollArgs& a, int rank, int nranks, transport::Board& board, uint64_t seq,
                    const transport::WaitContext& wait, int64_t ll_max_bytes, const transport::CallSignature& sig,
                    bool ordered) {
    return OneShot<T>(a, rank, nranks, board, seq, wait, ll_max_bytes, sig, ordered);
  }
};

}  // namespace

int64_t OneShotPostBytes(const CollArgs& args, int nranks) {
  const int64_t elem = static_cast<int64_t>(base::DataTypeSize(args.dtype));
  switch (args.coll) {
    case Coll::kAllReduce:
    case Coll::kReduce:
    case Coll::kAllGather: return args.count * elem;
    case Coll::kReduceScatter: return args.count * elem * nranks;
    case Coll::kBroadcast: return args.count * elem;  // the root's; others post nothing
  }
  return 0;
}

Status RunHostOneShot(const CollArgs& args, int rank, int nranks, transport::Board& board, uint64_t seq,
                      const transport::WaitContext& wait, int64_t ll_max_bytes, const transport::CallSignature& sig,
                      bool ordered) {
  CollArgs a = args;
  if (a.coll == Coll::kAllGather || a.coll == Coll::kBroadcast) {
    // Pure data movement: bytes, whatever the datatype.
    a.count *= static_cast<int64_t>(base::DataTypeSize(a.dtype));
    a.dtype = base::DataType::kUint8;
    return OneShotFn<uint8_t, RedOp::kSum>::Run(a, rank, nranks, board, seq, wait, ll_max_bytes, sig, false);
  }
  return internal::DispatchTypeOp<OneShotFn>(a.dtype, a.op, a, rank, nranks, board, seq, wait, ll_max_bytes, sig,
                                             ordered);
}

}  // namespace ringo::kernels
