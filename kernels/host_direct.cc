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
  static Status Run(const CollArgs& a, int rank, int nranks, const void* const* sends, void* const* recvs,
                    bool stream) {
    const Range part = DirectPart(a, rank, nranks);
    if (part.hi <= part.lo) return Status();
    // Reused per thread: no allocation per call once a thread has seen this many ranks.
    thread_local std::vector<const T*> in;
    thread_local std::vector<T*> out;
    in.resize(nranks);
    out.resize(nranks);
    for (int q = 0; q < nranks; ++q) {
      in[q] = static_cast<const T*>(sends[q]) + part.lo;
      out[q] = static_cast<T*>(recvs[q]) + part.lo;
    }
    const auto f = ReduceFunc<T, kOp>::Make(nranks);
    internal::ReduceAll(f, in.data(), nranks, out.data(), nranks, part.hi - part.lo, stream);
    if (stream) internal::StreamFence();
    return Status();
  }
};

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
  if (args.coll != Coll::kAllReduce) return base::InvalidUsage("the direct executor runs AllReduce only");
  return internal::DispatchTypeOp<DirectFn>(args.dtype, args.op, args, rank, nranks, sends, recvs, stream);
}

}  // namespace ringo::kernels
