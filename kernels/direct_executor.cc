#include "kernels/direct_executor.h"

#include <sched.h>

#include <algorithm>
#include <vector>

#include "kernels/internal/dispatch.h"
#include "kernels/internal/host_loops_table.h"
#include "kernels/internal/stream_store.h"
#include "kernels/reduce_op.h"

namespace ringo::kernels {
namespace {

using base::RedOp;
using base::Status;

// Whether a rank running on core `cpu` takes what is left of rank q's part:
// q last ran on this core (so it is not running now), or on a core that
// carries more ranks than this one. Taking from a rank that runs on a core
// no busier than this one only moves lines from one core's cache to the
// other's. Measured with ringo-perf -R 1 on 2 cores (medians of 5
// interleaved launches; this VM's memory bandwidth moved by up to 2x over
// the session, so only side-by-side figures compare): 4 ranks, 4 MiB, each
// rank on its own part 294 us, any rank taking from any other 478 us; 3
// ranks (one core carries two), 4 MiB 329 us own parts only, 260 us with
// this rule; 64 MiB 9.2 ms / 6.2 ms.
// Ranks last seen on core `cpu`.
int RanksOn(const DirectShare& share, int nranks, int cpu) {
  int n = 0;
  for (int r = 0; r < nranks; ++r) n += share.cpus[r]->load(std::memory_order_relaxed) == cpu ? 1 : 0;
  return n;
}

// `on_mine`: RanksOn(this rank's core).
bool MayTake(const DirectShare& share, int nranks, int q, int cpu, int on_mine) {
  if (share.cpus == nullptr) return true;
  const int theirs = share.cpus[q]->load(std::memory_order_relaxed);
  return theirs == cpu || RanksOn(share, nranks, theirs) > on_mine;
}

// AllReduce, ReduceScatter and Reduce: this rank reduces its share, read
// from every rank's input, into the output(s) that receive it; with
// `share`, AllReduce and Reduce chunks are claimed (direct_executor.h). Element
// type only: the reductions come from the host loops' table.
template <typename T>
struct Direct {
  static Status Run(const CollArgs& a, int rank, int nranks, const void* const* sends, void* const* recvs,
                    bool stream, const DirectShare& share) {
    // Reused per thread: no allocation per call once a thread has seen this many ranks.
    thread_local std::vector<const T*> in;
    thread_local std::vector<T*> out;
    in.resize(nranks);
    out.resize(nranks);
    const internal::HostLoops& loops = internal::GetHostLoops(a.dtype, a.op);
    const auto reduce_fn = share.ordered ? loops.reduce_ordered : loops.reduce_all;
    auto reduce_all = [&](int64_t count, int nout) {
      reduce_fn(reinterpret_cast<const void* const*>(in.data()), nranks, reinterpret_cast<void* const*>(out.data()),
                nout, count, nranks, stream);
    };
    // Elements [lo, hi) of every input, into `nout` outputs at the same offsets.
    auto reduce = [&](int64_t lo, int64_t hi, int nout) {
      if (hi <= lo) return;
      for (int q = 0; q < nranks; ++q) in[q] = static_cast<const T*>(sends[q]) + lo;
      if (a.coll == Coll::kAllReduce) {
        for (int q = 0; q < nranks; ++q) out[q] = static_cast<T*>(recvs[q]) + lo;
      } else {
        out[0] = static_cast<T*>(recvs[a.root]) + lo;
      }
      reduce_all(hi - lo, nout);
    };
    switch (a.coll) {
      case Coll::kAllReduce:
      case Coll::kReduce: {
        const int nout = a.coll == Coll::kAllReduce ? nranks : 1;
        if (share.words == nullptr) {
          const Range part = DirectPart(a, rank, nranks);
          reduce(part.lo, part.hi, nout);
          break;
        }
        const int64_t chunk = DirectChunkElems(a, nranks);
        auto reduce_chunk = [&](int q, int64_t c) {
          const Range part = DirectPart(a, q, nranks);
          const int64_t lo = part.lo + c * chunk;
          reduce(lo, std::min(part.hi, lo + chunk), nout);
        };
        for (int64_t c; (c = DirectClaimFront(*share.words[rank])) >= 0;) reduce_chunk(rank, c);
        const int cpu = share.cpus != nullptr ? sched_getcpu() : -1;
        const int on_mine = share.cpus != nullptr ? RanksOn(share, nranks, cpu) : 0;
        for (int k = 1; k < nranks; ++k) {
          const int q = (rank + k) % nranks;
          if (!MayTake(share, nranks, q, cpu, on_mine)) continue;
          for (int64_t c; (c = DirectClaimBack(*share.words[q])) >= 0;) reduce_chunk(q, c);
        }
        break;
      }
      case Coll::kReduceScatter: {  // this rank's block of every input, into its own output
        if (a.count <= 0) break;
        const int64_t offset = static_cast<int64_t>(rank) * a.count;
        for (int q = 0; q < nranks; ++q) in[q] = static_cast<const T*>(sends[q]) + offset;
        out[0] = static_cast<T*>(recvs[rank]);
        reduce_all(a.count, 1);
        break;
      }
      default:
        return base::Internal("the direct reduction run on a collective that does not reduce");
    }
    if (stream) internal::StreamFence();
    return Status();
  }
};

template <typename T, RedOp kOp>
struct DirectFn : Direct<T> {};

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

int64_t DirectChunkElems(const CollArgs& args, int nranks) {
  // About eight chunks per part, from 16 KiB (a claim costs well under a
  // microsecond; the reduction of 16 KiB a few) to 1 MiB.
  constexpr int64_t kMinChunkBytes = 16 << 10;
  constexpr int64_t kMaxChunkBytes = 1 << 20;
  const int64_t elem = static_cast<int64_t>(base::DataTypeSize(args.dtype));
  const Range part = DirectPart(args, 0, nranks);
  const int64_t bytes = std::clamp((part.hi - part.lo) * elem / 8, kMinChunkBytes, kMaxChunkBytes);
  const int64_t unit = ChunkAlignElems(elem);
  return (bytes / elem + unit - 1) / unit * unit;
}

namespace {
constexpr uint64_t kLowHalf = 0xffffffffu;
}  // namespace

int64_t DirectClaimFront(std::atomic<uint64_t>& word) {
  uint64_t w = word.load(std::memory_order_relaxed);
  while ((w & kLowHalf) < (w >> 32)) {
    if (word.compare_exchange_weak(w, w + 1, std::memory_order_relaxed)) return static_cast<int64_t>(w & kLowHalf);
  }
  return -1;
}

int64_t DirectClaimBack(std::atomic<uint64_t>& word) {
  uint64_t w = word.load(std::memory_order_relaxed);
  while ((w & kLowHalf) < (w >> 32)) {
    const uint64_t end = (w >> 32) - 1;
    if (word.compare_exchange_weak(w, (end << 32) | (w & kLowHalf), std::memory_order_relaxed)) {
      return static_cast<int64_t>(end);
    }
  }
  return -1;
}

uint64_t DirectShareWord(const CollArgs& args, int rank, int nranks) {
  const Range part = DirectPart(args, rank, nranks);
  const int64_t chunk = DirectChunkElems(args, nranks);
  const uint64_t chunks = static_cast<uint64_t>((part.hi - part.lo + chunk - 1) / chunk);
  return chunks << 32;  // front 0, end `chunks`
}

Status RunHostDirect(const CollArgs& args, int rank, int nranks, const void* const* sends, void* const* recvs,
                     bool stream, const DirectShare& share) {
  if (args.coll == Coll::kAllGather || args.coll == Coll::kBroadcast) {
    return PullCopies(args, rank, nranks, sends, recvs, stream);
  }
  return internal::DispatchTypeOp<DirectFn>(args.dtype, args.op, args, rank, nranks, sends, recvs, stream, share);
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
