#include "kernels/host_direct.h"

#include <algorithm>
#include <vector>

#include "kernels/internal/dispatch.h"
#include "kernels/internal/reduce_all.h"
#include "kernels/internal/stream_store.h"
#include "kernels/reduce_op.h"

namespace ringo::kernels {
namespace {

using base::RedOp;
using base::Status;

template <typename T, RedOp kOp>
struct DirectFn {
  // AllReduce, ReduceScatter and Reduce: this rank reduces its share, read
  // from every rank's input, into the output(s) that receive it.
  static Status Run(const CollArgs& a, int rank, int nranks, const void* const* sends, void* const* recvs,
                    bool stream) {
    // Reused per thread: no allocation per call once a thread has seen this many ranks.
    thread_local std::vector<const T*> in;
    thread_local std::vector<T*> out;
    in.resize(nranks);
    out.resize(nranks);
    int64_t lo = 0, n = 0, in_offset = 0;
    int nout = 0;
    switch (a.coll) {
      case Coll::kAllReduce:
      case Coll::kReduce: {
        const Range part = DirectPart(a, rank, nranks);
        lo = part.lo;
        n = part.hi - part.lo;
        in_offset = lo;
        if (a.coll == Coll::kAllReduce) {
          for (int q = 0; q < nranks; ++q) out[q] = static_cast<T*>(recvs[q]) + lo;
          nout = nranks;
        } else {
          out[0] = static_cast<T*>(recvs[a.root]) + lo;
          nout = 1;
        }
        break;
      }
      case Coll::kReduceScatter:  // this rank's block of every input, into its own output
        n = a.count;
        in_offset = static_cast<int64_t>(rank) * a.count;
        out[0] = static_cast<T*>(recvs[rank]);
        nout = 1;
        break;
      default:
        return base::Internal("DirectFn::Run on a collective that does not reduce");
    }
    if (n <= 0) return Status();
    for (int q = 0; q < nranks; ++q) in[q] = static_cast<const T*>(sends[q]) + in_offset;
    const auto f = ReduceFunc<T, kOp>::Make(nranks);
    internal::ReduceAll(f, in.data(), nranks, out.data(), nout, n, stream);
    if (stream) internal::StreamFence();
    return Status();
  }
};

// AllGather and Broadcast: pure data movement, each rank pulls into its own output.
Status PullCopies(const CollArgs& a, int rank, int nranks, const void* const* sends, void* const* recvs,
                  bool stream) {
  const size_t bytes = static_cast<size_t>(a.count) * base::DataTypeSize(a.dtype);
  char* mine = static_cast<char*>(recvs[rank]);
  auto copy = [&](char* dst, const void* src) {
    if (bytes > 0 && dst != src) internal::CopyOut(dst, src, bytes, stream);
  };
  if (a.coll == Coll::kAllGather) {
    for (int k = 0; k < nranks; ++k) {
      const int q = (rank + k) % nranks;  // start with this rank's own block: ranks read different peers at once
      copy(mine + static_cast<size_t>(q) * bytes, sends[q]);
    }
  } else {
    copy(mine, sends[a.root]);
  }
  if (stream) internal::StreamFence();
  return Status();
}

}  // namespace

Range DirectPart(const CollArgs& args, int rank, int nranks) {
  const int64_t elem = static_cast<int64_t>(base::DataTypeSize(args.dtype));
  const int64_t unit = ChunkAlignElems(elem);
  const int64_t share = (args.count + nranks - 1) / nranks;
  const int64_t per = (share + unit - 1) / unit * unit;
  const int64_t begin = std::min(args.count, per * rank);
  const int64_t end = std::min(args.count, per * (rank + 1));
  return Range{begin, end};
}

Status RunHostDirect(const CollArgs& args, int rank, int nranks, const void* const* sends, void* const* recvs,
                     bool stream) {
  if (args.coll == Coll::kAllGather || args.coll == Coll::kBroadcast) {
    return PullCopies(args, rank, nranks, sends, recvs, stream);
  }
  return internal::DispatchTypeOp<DirectFn>(args.dtype, args.op, args, rank, nranks, sends, recvs, stream);
}

DirectNeeds DirectBuffersNeeded(const CollArgs& args, int rank, int nranks) {
  DirectNeeds n;
  const int64_t bytes = args.count * static_cast<int64_t>(base::DataTypeSize(args.dtype));
  switch (args.coll) {
    case Coll::kAllReduce:  // others read its input and write its output
      n.send_bytes = n.recv_bytes = bytes;
      break;
    case Coll::kReduceScatter:  // others read their block of its input
      n.send_bytes = bytes * nranks;
      break;
    case Coll::kAllGather:
      n.send_bytes = bytes;
      break;
    case Coll::kBroadcast:
      n.send_bytes = rank == args.root ? bytes : 0;
      break;
    case Coll::kReduce:  // others read its input and write their part of the root's output
      n.send_bytes = bytes;
      n.recv_bytes = rank == args.root ? bytes : 0;
      break;
  }
  return n;
}

}  // namespace ringo::kernels
