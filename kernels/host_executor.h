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
#include "transport/fifo.h"

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
  // Write the FIFO slots with non-temporal stores. Measured on a 2-core AMD VM
  // (2 ranks, 16 KiB..256 MiB): 1.4x to 2.2x faster than cached stores, whose
  // lines the receiver then pulls from the writer's cache one miss at a time.
  bool stream_fifo = true;
};

struct ChannelEnds {
  transport::RecvEnd* recv = nullptr;
  transport::SendEnd* send = nullptr;
  transport::WaitContext wait;
};

base::Status RunHostChannel(const CollArgs& args, const RingPlace& place, const ChannelPlan& plan,
                            ChannelEnds& ends);

// Elements each channel splits and the alignment of chunk starts, as the
// executor uses them (exposed for the planner and tests).
int64_t SplitCount(const CollArgs& args);

}  // namespace ringo::kernels

#endif  // RINGO_KERNELS_HOST_EXECUTOR_H_
