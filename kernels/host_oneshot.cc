#include "kernels/host_oneshot.h"

#include <cstring>
#include <vector>

#include "kernels/internal/dispatch.h"
#include "kernels/internal/prefetch.h"
#include "kernels/internal/host_loops_table.h"
#include "kernels/reduce_op.h"

namespace ringo::kernels {
namespace {

using base::RedOp;
using base::Status;

template <typename T, RedOp kOp>
struct OneShotFn {
  static Status Run(const CollArgs& a, int rank, int nranks, transport::Board& board, uint64_t seq,
                    const transport::WaitContext& wait, int64_t ll_max_bytes) {
    const size_t elem = sizeof(T);
    const int64_t block = a.count;  // per-rank block for ReduceScatter / AllGather
    ASSIGN_OR_RETURN(void* mine, board.AcquireWrite(seq, wait));
    // A non-root Broadcast rank posts nothing but still takes part in the sequence.
    const bool posts = a.coll != Coll::kBroadcast || rank == a.root;
    const int64_t post = posts ? OneShotPostBytes(a, nranks) : 0;
    // Small posts in the LL format (board.h). The choice depends only on the
    // arguments and the geometry, so every rank makes the same one.
    const bool ll = OneShotPostBytes(a, nranks) <= ll_max_bytes;
    const size_t ll_stride = (static_cast<size_t>(ll_max_bytes) + 4 + 63) / 64 * 64;
    if (ll) {
      board.PostLL(seq, a.send, static_cast<size_t>(post));
    } else {
      if (post > 0) std::memcpy(mine, a.send, static_cast<size_t>(post));
      board.Post(seq);
    }

    // The posts this rank reads, in rank order.
    // Reused per thread: no allocation per call once a thread has seen this many ranks.
    thread_local std::vector<const T*> in_storage, block_storage;
    thread_local std::vector<char> ll_storage;
    in_storage.assign(nranks, nullptr);
    const T** in = in_storage.data();
    // Rank q's post: unpacked from its LL words (this rank's own: its input).
    auto read_ll = [&](int q) -> Status {
      if (q == rank) {
        in[q] = static_cast<const T*>(a.send);
        return Status();
      }
      char* dst = ll_storage.data() + static_cast<size_t>(q) * ll_stride;
      RETURN_IF_ERROR(board.ReadLL(q, seq, dst, static_cast<size_t>(post), wait));
      in[q] = reinterpret_cast<const T*>(dst);
      return Status();
    };
    if (ll && ll_storage.size() < static_cast<size_t>(nranks) * ll_stride) {
      ll_storage.resize(static_cast<size_t>(nranks) * ll_stride);
    }
    if (a.coll == Coll::kBroadcast) {
      if (ll) {
        if (post == 0) {  // a non-root rank: the root's post has the root's size
          const int64_t root_post = OneShotPostBytes(a, nranks);
          if (rank != a.root) {
            char* dst = ll_storage.data() + static_cast<size_t>(a.root) * ll_stride;
            RETURN_IF_ERROR(board.ReadLL(a.root, seq, dst, static_cast<size_t>(root_post), wait));
            in[a.root] = reinterpret_cast<const T*>(dst);
          }
        } else {
          in[a.root] = static_cast<const T*>(a.send);
        }
      } else {
        ASSIGN_OR_RETURN(const void* p, board.WaitPosted(a.root, seq, wait));
        in[a.root] = static_cast<const T*>(p);
      }
    } else if (a.coll != Coll::kReduce || rank == a.root) {
      if (ll) {
        for (int q = 0; q < nranks; ++q) RETURN_IF_ERROR(read_ll(q));
      } else {
        RETURN_IF_ERROR(board.WaitAllPosted(seq, wait));
        for (int q = 0; q < nranks; ++q) in[q] = static_cast<const T*>(board.Posted(q, seq));
        for (int q = 0; q < nranks; ++q) {
          if (q != rank) internal::PrefetchPeerData(in[q], static_cast<size_t>(post));
        }
      }
    }
    T* out = static_cast<T*>(a.recv);
    void* outs[1] = {out};
    const internal::HostLoops& loops = internal::GetHostLoops(a.dtype, a.op);
    auto reduce = [&](const T* const* ins, int64_t count) {
      loops.reduce_all(reinterpret_cast<const void* const*>(ins), nranks, outs, 1, count, nranks, false);
    };
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
        if (a.recv != a.send || rank != a.root) std::memcpy(out, in[a.root], a.count * elem);
        break;
    }
    board.Done(seq);
    return Status();
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
                      const transport::WaitContext& wait, int64_t ll_max_bytes) {
  CollArgs a = args;
  if (a.coll == Coll::kAllGather || a.coll == Coll::kBroadcast) {
    // Pure data movement: bytes, whatever the datatype.
    a.count *= static_cast<int64_t>(base::DataTypeSize(a.dtype));
    a.dtype = base::DataType::kUint8;
    return OneShotFn<uint8_t, RedOp::kSum>::Run(a, rank, nranks, board, seq, wait, ll_max_bytes);
  }
  return internal::DispatchTypeOp<OneShotFn>(a.dtype, a.op, a, rank, nranks, board, seq, wait, ll_max_bytes);
}

}  // namespace ringo::kernels
