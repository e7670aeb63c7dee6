#include "collectives/engines/gpu_doubling.h"

#include <string>
#include <vector>

#include "base/device/dtype.h"
#include "base/logging.h"
#include "collectives/engines/doubling_plan.h"
#include "kernels/cuda/launch.h"

namespace ringo::collectives {

using base::RedOp;
using base::Status;

GpuDoubling::GpuDoubling(const EngineSetup& setup, std::shared_ptr<GpuRank> gpu, PointToPoint* p2p)
    : rank_(setup.rank), nranks_(setup.nranks), gpu_(std::move(gpu)), p2p_(p2p) {}

base::StatusOr<std::unique_ptr<GpuDoubling>> GpuDoubling::Make(const EngineSetup& setup,
                                                                std::shared_ptr<GpuRank> gpu, PointToPoint* p2p) {
  std::unique_ptr<GpuDoubling> d(new GpuDoubling(setup, std::move(gpu), p2p));
  const std::vector<char> zeros(static_cast<size_t>(kMaxBytes), 0);
  ASSIGN_OR_RETURN(d->scratch_, base::DeviceCopy::Of(setup.device, zeros.data(), zeros.size()));
  return d;
}

bool GpuDoubling::Takes(Call& call) {
  const kernels::CollArgs& a = call.args;
  if (nranks_ < 2 || a.coll != kernels::Coll::kAllReduce || a.count <= 0) return false;
  if (a.op != RedOp::kSum && a.op != RedOp::kProd && a.op != RedOp::kMin && a.op != RedOp::kMax) return false;
  return a.count * static_cast<int64_t>(base::DataTypeSize(a.dtype)) <= kMaxBytes;
}

Status GpuDoubling::Run(Call& call) {
  const kernels::CollArgs& a = call.args;
  if (!logged_) {
    logged_ = true;
    RINGO_LOG(INFO) << "rank " << rank_ << ": GPU all-reduces up to " << kMaxBytes / 1024
                    << " KiB by recursive doubling (RINGO_ALGO=doubling; not yet verified on a GPU)";
  }
  const int64_t bytes = a.count * static_cast<int64_t>(base::DataTypeSize(a.dtype));
  void* acc = a.recv;
  // Once something is enqueued the peers may wait for this rank: a failure
  // from then on fails the communicator (a stream refused before it does not).
  auto enqueue = [&](const std::function<Status()>& launch) {
    Status st = gpu_->Enqueue(call.stream, call.capturing, call.capture_id, launch);
    if (st.ok()) call.fatal = true;
    return st;
  };
  if (a.send != a.recv) {
    RETURN_IF_ERROR(enqueue([&] { return kernels::gpu::LaunchCopyKernel(a.send, acc, bytes, call.stream); }));
  }
  for (const DoublingStep& step : DoublingSteps(rank_, nranks_)) {
    std::vector<P2pOp> ops;
    if (step.send) ops.push_back({true, step.peer, acc, nullptr, static_cast<size_t>(bytes)});
    if (step.recv) ops.push_back({false, step.peer, nullptr, scratch_.get(), static_cast<size_t>(bytes)});
    P2pCall p2p_call = CollectiveExchange(call);
    Status st = p2p_->Run(ops, p2p_call);
    call.fatal = call.fatal || p2p_call.fatal || st.ok();
    RETURN_IF_ERROR(st);
    if (step.combine) {
      const void* low = step.peer < rank_ ? scratch_.get() : acc;
      const void* high = step.peer < rank_ ? acc : scratch_.get();
      RETURN_IF_ERROR(enqueue(
          [&] { return kernels::gpu::LaunchReduceKernel(a.dtype, a.op, low, high, acc, a.count, call.stream); }));
    }
    if (step.take) {
      RETURN_IF_ERROR(
          enqueue([&] { return kernels::gpu::LaunchCopyKernel(scratch_.get(), acc, bytes, call.stream); }));
    }
  }
  return Status();
}

}  // namespace ringo::collectives
