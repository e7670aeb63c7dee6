// One collective call as every engine receives it: what to do, on which
// buffers, with which datatype and operator. Plain data, the same on the
// host and on the device (the GPU kernels receive it inside their
// parameters, kernels/ring_loop.h's RingArgs).
#ifndef RINGO_KERNELS_COLL_ARGS_H_
#define RINGO_KERNELS_COLL_ARGS_H_

#include <cstdint>

#include "base/device/dtype.h"
#include "kernels/schedule.h"

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
  // kernel when it starts: NCCL's ncclScalarDevice); a host communicator
  // reads it into `scalar` first.
  const void* scalar_ptr = nullptr;
};

// Whether the collective combines values (and so has an operator).
RINGO_HD constexpr bool Reduces(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduceScatter || c == Coll::kReduce;
}

}  // namespace ringo::kernels

#endif  // RINGO_KERNELS_COLL_ARGS_H_
