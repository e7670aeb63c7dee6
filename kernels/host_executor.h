// The host executor: runs one channel of a ring collective on host memory,
// step by step as schedule.h says, over that channel's FIFO ends. The same
// schedule the CUDA kernels run; the (datatype, op) pair becomes a template
// instantiation in exactly one place (host_executor.cc).
//
// Blocking: returns when this channel's part of the collective is done on
// this rank, or with the first error (a peer that died, aborted or stalled
// past the timeout; a peer that sent a chunk of the wrong size).
// Thread safety: each channel runs on its own thread with its own ends.
#ifndef RINGO_KERNELS_HOST_EXECUTOR_H_
#define RINGO_KERNELS_HOST_EXECUTOR_H_

#include <cstdint>
#include <vector>

#include "base/device/dtype.h"
#include "base/status.h"
#include "kernels/schedule.h"
#include "transport/shm/fifo.h"
#include "transport/signature.h"

namespace ringo::kernels {

struct CollArgs {
  Coll coll = Coll::kAllReduce;
  base::DataType dtype = base::DataType::kFloat32;
  base::RedOp op = base::RedOp::kSum;
  const void* send = nullptr;
  void* recv = nullptr;
  // AllReduce, Broadcast, Reduce: elements; ReduceScatter: elements per rank
  // received; AllGather: elements per rank sent.
  int64_t count = 0;
  int root = 0;  // rank (Broadcast, Reduce)
  // RedOp::kPreMulSum: this rank's scalar, one value of dtype in the low
  // bytes (read from the caller's memory when the collective runs).
  uint64_t scalar = 0;
  // ...or, on a GPU communicator, device memory holding it (read by the
  // kernel when it runs); a host communicator reads it into `scalar` first.
  const void* scalar_ptr = nullptr;
};

struct RingPlace {
  int rank = 0;
  int nranks = 1;
  int pos = 0;                    // this rank's ring position
  const std::vector<int>* order;  // ring position -> rank
};

struct ChannelPlan {
  int nchannels = 1;
  int channel = 0;
  int64_t slice_bytes = 0;  // at most the FIFO's slot size
  bool stream_output = false;  // write the output with non-temporal stores (large collectives)
  // Write the FIFO slots with non-temporal stores. They go to memory, and
  // the receiver reads them from there; cached stores leave the lines in the
  // writer's cache, where the receiver's prefetch (internal/prefetch.h) finds
  // them. Cached stores, ring forced, medians of 4 interleaved ringo-perf
  // launches on the 2-core AMD EPYC (Zen 5) VM: 2 ranks 64 KiB 4.5 us against
  // 6.8, 1 MiB 68 / 94, 16 MiB 1.77 / 2.66 ms, 256 MiB 30 / 45 ms; 4 ranks 1
  // MiB 161 / 322 us, 256 MiB 62 / 114 ms. (An earlier 2-core AMD VM, before
  // the prefetch, had streamed stores 1.4x to 2.2x faster.)
  bool stream_fifo = false;
};

// `sig`: the collective's signature (kernels/signature.h), carried in every
// slot this channel posts. With sig.seq != 0 every slot received must carry
// the same signature (a mismatch is InvalidUsage naming both calls), and on
// channel 0 a rank that receives nothing in this collective (a Broadcast's
// root, a Reduce's first rank, every rank of an empty one) waits at its end
// for an empty slot from its ring predecessor, which sends it once its own
// first receive matched (or at once when it receives nothing either): so
// every rank of two, and the root of any ring, learns of a mismatch in the
// call itself.
struct ChannelEnds {
  transport::RecvEnd* recv = nullptr;
  transport::SendEnd* send = nullptr;
  transport::WaitContext wait;
  transport::CallSignature sig;
};

base::Status RunHostChannel(const CollArgs& args, const RingPlace& place, const ChannelPlan& plan,
                            ChannelEnds& ends);

// Elements each channel splits and the alignment of chunk starts, as the
// executor uses them (exposed for the planner and tests).
int64_t SplitCount(const CollArgs& args);

}  // namespace ringo::kernels

#endif  // RINGO_KERNELS_HOST_EXECUTOR_H_
