#include "collectives/engines/ordered.h"

#include <cstring>

#include "base/device/dtype.h"

namespace ringo::collectives {

base::Status Ordered::Run(Call& call) {
  using kernels::Coll;
  const kernels::CollArgs& args = call.args;
  const int n = ring_->nranks();
  if (n == 1 || !kernels::Reduces(args.coll)) return ring_->Run(call);
  RETURN_IF_ERROR(ring_->PostSignature(call));
  const int last = ring_->order()[n - 1];
  const int rank = ring_->rank();
  const size_t elem = base::DataTypeSize(args.dtype);
  if (args.coll == Coll::kReduce && args.root == last) {
    return ring_->RunPlanned(args, PlanRingCollective(args, n, geometry_), call);
  }
  kernels::CollArgs reduce = args;
  reduce.coll = Coll::kReduce;
  reduce.root = last;
  void* result = args.recv;  // where the full result lands on every rank
  const size_t full = static_cast<size_t>(args.count) * elem * (args.coll == Coll::kReduceScatter ? n : 1);
  if (args.coll == Coll::kReduceScatter || (args.coll == Coll::kReduce && rank != args.root)) {
    if (scratch_.size() < full) scratch_.resize(full);
    result = scratch_.data();
  }
  if (args.coll == Coll::kReduceScatter) reduce.count = args.count * n;
  reduce.recv = result;
  RETURN_IF_ERROR(ring_->RunPlanned(reduce, PlanRingCollective(reduce, n, geometry_), call));
  kernels::CollArgs bcast = reduce;
  bcast.coll = Coll::kBroadcast;
  bcast.send = result;
  RETURN_IF_ERROR(ring_->RunPlanned(bcast, PlanRingCollective(bcast, n, geometry_), call));
  if (args.coll == Coll::kReduceScatter && args.count > 0) {
    std::memmove(args.recv, static_cast<const char*>(result) + static_cast<size_t>(rank) * args.count * elem,
                 static_cast<size_t>(args.count) * elem);
  }
  return base::OkStatus();
}

}  // namespace ringo::collectives
