#include "collectives/internal/gpu_comm.h"

#include <atomic>
#include <cstring>
#include <string>
#include <utility>

#include "collectives/internal/gpu_placement.h"
#include "kernels/cuda/launch.h"

namespace ringo::collectives::internal {

using base::Status;
using base::StatusOr;
using kernels::gpu::DeviceFifo;
using kernels::gpu::ErrorRecord;

DeviceFifo ToDeviceFifo(const transport::P2pFifo& f, bool receiving, int peer_rank) {
  return kernels::gpu::DeviceFifoAt(f.header, f.geometry, receiving, peer_rank, f.abort_word);
}

namespace {

// The communicator's completion event as LaunchOrder sees it.
class DoneEvent final : public LaunchEvent {
 public:
  explicit DoneEvent(base::CudaEvent* event) : event_(event) {}
  Status MakeStreamWait(void* stream) override { return event_->MakeStreamWait(stream); }
  Status Record(void* stream) override { return event_->Record(stream); }

 private:
  base::CudaEvent* event_;
};

}  // namespace

StatusOr<std::unique_ptr<GpuComm>> GpuComm::Create(int rank, int nranks, int device,
                                                   const std::vector<int>& order,
                                                   std::unique_ptr<transport::P2pEnds> ends,
                                                   const DeviceGeometry& geometry,
                                                   uint64_t timeout_ns, int ranks_sharing_gpu) {
  if (nranks > kernels::gpu::kMaxInlineRanks) {
    return base::InvalidUsage("GPU communicators take at most " +
                              std::to_string(kernels::gpu::kMaxInlineRanks) + " ranks");
  }
  if (nranks > 1 && ends == nullptr)
    return base::Internal("a GPU ring of several ranks without connectors");
  std::unique_ptr<GpuComm> g(new GpuComm());
  g->rank_ = rank;
  g->nranks_ = nranks;
  g->device_ = device;
  g->order_ = order;
  for (int p = 0; p < nranks; ++p) {
    if (order[p] == rank) g->pos_ = p;
  }
  g->geometry_ = geometry;
  g->timeout_ns_ = timeout_ns;
  g->ranks_sharing_gpu_ = ranks_sharing_gpu;
  g->ends_ = std::move(ends);
  g->channels_.resize(geometry.nchannels);
  if (nranks > 1) {
    const int prev = (g->pos_ + nranks - 1) % nranks;
    const int next = (g->pos_ + 1) % nranks;
    for (int c = 0; c < geometry.nchannels; ++c) {
      g->channels_[c].recv = ToDeviceFifo(g->ends_->Recv(c), true, order[prev]);
      g->channels_[c].send = ToDeviceFifo(g->ends_->Send(c), false, order[next]);
    }
  }
  const DeviceSlices slices = MaxDeviceSlices(geometry);  // for the protocol choice
  g->max_simple_slice_ = slices.simple;
  g->max_ll_slice_ = slices.ll;
  if (nranks > 1) {
    ASSIGN_OR_RETURN(g->device_channels_, base::DeviceCopy::Of(device, g->channels_.data(),
                                                               sizeof(kernels::gpu::DeviceChannel) *
                                                                   g->channels_.size()));
  }
  ASSIGN_OR_RETURN(g->error_, base::MappedHostMemory::Allocate(sizeof(ErrorRecord)));
  ASSIGN_OR_RETURN(g->abort_, base::MappedHostMemory::Allocate(sizeof(int)));
  ASSIGN_OR_RETURN(g->done_, base::CudaEvent::Create(device));
  return g;
}

GpuComm::~GpuComm() {
  // Errors here have nowhere to go; the kernels end (done, timed out or
  // aborted) before the memory they use is freed.
  (void)Synchronize();
  ends_.reset();
}

DevicePlan GpuComm::Plan(const kernels::CollArgs& args) const {
  return PlanDeviceCollective(args, nranks_, geometry_, max_simple_slice_, max_ll_slice_);
}

Status GpuComm::Enqueue(const kernels::CollArgs& args, void* stream) {
  if (args.count == 0) return Status();  // every rank skips it alike
  const DevicePlan plan = Plan(args);
  kernels::gpu::DeviceCollArgs a;
  a.ring = kernels::MakeRingArgs(args, rank_, nranks_, pos_, order_.data(), plan.nchannels, plan.slice_bytes);
  a.proto = plan.proto;
  ASSIGN_OR_RETURN(base::ScopedDevice scope, base::ScopedDevice::Enter(device_));
  if (ranks_sharing_gpu_ > 1) {
    ASSIGN_OR_RETURN(const base::StreamFacts facts, base::GetStreamFacts(stream));
    RETURN_IF_ERROR(GpuStreamRule(facts.non_blocking, facts.legacy, ranks_sharing_gpu_));
  }
  DoneEvent done(&done_);
  RETURN_IF_ERROR(order_launches_.Before(stream, done));
  RETURN_IF_ERROR(kernels::gpu::LaunchRingKernel(
      a, channels_.data(), static_cast<const kernels::gpu::DeviceChannel*>(device_channels_.get()),
      plan.nchannels, stream, Guard()));
  return order_launches_.After(stream, done);
}

Status GpuComm::EnqueueP2p(const kernels::gpu::P2pKernelArgs& args, void* stream) {
  ASSIGN_OR_RETURN(base::ScopedDevice scope, base::ScopedDevice::Enter(device_));
  if (ranks_sharing_gpu_ > 1) {
    ASSIGN_OR_RETURN(const base::StreamFacts facts, base::GetStreamFacts(stream));
    RETURN_IF_ERROR(GpuStreamRule(facts.non_blocking, facts.legacy, ranks_sharing_gpu_));
  }
  DoneEvent done(&done_);
  RETURN_IF_ERROR(order_launches_.Before(stream, done));
  RETURN_IF_ERROR(kernels::gpu::LaunchP2pKernel(args, stream, Guard()));
  return order_launches_.After(stream, done);
}

kernels::gpu::KernelGuard GpuComm::Guard() const {
  kernels::gpu::KernelGuard g;
  g.abort = static_cast<const volatile int*>(abort_.device());
  g.error = static_cast<ErrorRecord*>(error_.device());
  g.timeout_ns = timeout_ns_;
  g.rank = rank_;
  return g;
}

Status GpuComm::Synchronize() { return done_.Synchronize(); }

void GpuComm::RaiseAbort() {
  if (abort_.host() != nullptr) *static_cast<volatile int*>(abort_.host()) = 1;
  if (ends_ != nullptr) ends_->RaiseAbort();
}

Status GpuComm::KernelError() const {
  const auto* record = static_cast<const ErrorRecord*>(error_.host());
  if (record == nullptr) return Status();
  // The kernel writes `code` last, after a system fence.
  if (*reinterpret_cast<const volatile int32_t*>(&record->code) == 0) return Status();
  std::atomic_thread_fence(std::memory_order_acquire);
  ErrorRecord copy;
  std::memcpy(&copy, const_cast<const ErrorRecord*>(record), sizeof(copy));
  return kernels::gpu::ErrorRecordStatus(copy);
}

}  // namespace ringo::collectives::internal
