#include "collectives/engines/gpu_rank.h"

#include <atomic>
#include <cstring>

#include "collectives/engines/gpu_placement.h"
#include "kernels/cuda/launch.h"

namespace ringo::collectives {

using base::Status;
using base::StatusOr;
using kernels::gpu::ErrorRecord;

namespace {

// The rank's completion event as LaunchOrder sees it.
class DoneEvent final : public LaunchEvent {
 public:
  explicit DoneEvent(base::CudaEvent* event) : event_(event) {}
  Status MakeStreamWait(void* stream) override { return event_->MakeStreamWait(stream); }
  Status Record(void* stream) override { return event_->Record(stream); }

 private:
  base::CudaEvent* event_;
};

}  // namespace

StatusOr<std::shared_ptr<GpuRank>> GpuRank::Create(int rank, int device, int64_t timeout_ms, int ranks_sharing_gpu) {
  std::shared_ptr<GpuRank> g(new GpuRank());
  g->rank_ = rank;
  g->device_ = device;
  g->timeout_ns_ = static_cast<uint64_t>(timeout_ms) * 1000000ull;
  g->ranks_sharing_gpu_ = ranks_sharing_gpu;
  ASSIGN_OR_RETURN(base::ScopedDevice scope, base::ScopedDevice::Enter(device));
  ASSIGN_OR_RETURN(g->error_, base::MappedHostMemory::Allocate(sizeof(ErrorRecord)));
  ASSIGN_OR_RETURN(g->abort_, base::MappedHostMemory::Allocate(sizeof(int)));
  ASSIGN_OR_RETURN(g->done_, base::CudaEvent::Create(device));
  ASSIGN_OR_RETURN(g->captured_, base::CudaEvent::Create(device));
  ASSIGN_OR_RETURN(g->words_, transport::DeviceWords::Create(device));
  return g;
}

GpuRank::~GpuRank() {
  // Errors here have nowhere to go; the kernels end (done, timed out or
  // aborted) before the memory they use is freed.
  (void)Synchronize();
}

kernels::gpu::KernelGuard GpuRank::Guard() const {
  kernels::gpu::KernelGuard g;
  g.abort = static_cast<const volatile int*>(abort_.device());
  g.error = static_cast<ErrorRecord*>(error_.device());
  g.timeout_ns = timeout_ns_;
  g.rank = rank_;
  return g;
}

Status GpuRank::Enqueue(void* stream, const std::function<Status()>& launch) {
  ASSIGN_OR_RETURN(base::ScopedDevice scope, base::ScopedDevice::Enter(device_));
  ASSIGN_OR_RETURN(const base::StreamCapture c, base::GetStreamCapture(stream));
  // The rule for ranks sharing a GPU is about the stream the kernel runs on:
  // a captured launch runs on whatever stream the graph is launched on (and
  // CUDA refuses cudaStreamGetFlags on a capturing stream).
  if (ranks_sharing_gpu_ > 1 && !c.active) {
    ASSIGN_OR_RETURN(const base::StreamFacts facts, base::GetStreamFacts(stream));
    RETURN_IF_ERROR(GpuStreamRule(facts.non_blocking, facts.legacy, ranks_sharing_gpu_));
  }
  CaptureState capture;
  capture.active = c.active;
  capture.id = c.id;
  DoneEvent done(&done_);
  DoneEvent captured(&captured_);
  RETURN_IF_ERROR(order_.Before(stream, capture, done, captured));
  RETURN_IF_ERROR(launch());
  return order_.After(stream, capture, done, captured);
}

Status GpuRank::Synchronize() { return done_.Synchronize(); }

void GpuRank::RaiseAbort() {
  if (abort_.host() != nullptr) *static_cast<volatile int*>(abort_.host()) = 1;
}

void GpuRank::RaiseAbortWords(const std::vector<uint32_t*>& words) {
  std::lock_guard<std::mutex> lock(words_mu_);
  if (words_ == nullptr) return;
  for (uint32_t* w : words) words_->WriteOne(w);
}

Status GpuRank::KernelError() const {
  const auto* record = static_cast<const ErrorRecord*>(error_.host());
  if (record == nullptr) return Status();
  // The kernel writes `code` last, after a system fence.
  if (*reinterpret_cast<const volatile int32_t*>(&record->code) == 0) return Status();
  std::atomic_thread_fence(std::memory_order_acquire);
  ErrorRecord copy;
  std::memcpy(&copy, const_cast<const ErrorRecord*>(record), sizeof(copy));
  return kernels::gpu::ErrorRecordStatus(copy);
}

}  // namespace ringo::collectives
