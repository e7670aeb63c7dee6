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
  // `in_graph`: recorded as a graph node, at each replay (CudaEvent::RecordInGraph).
  DoneEvent(base::CudaEvent* event, bool in_graph) : event_(event), in_graph_(in_graph) {}
  Status MakeStreamWait(void* stream) override { return event_->MakeStreamWait(stream); }
  Status Record(void* stream) override { return in_graph_ ? event_->RecordInGraph(stream) : event_->Record(stream); }

 private:
  base::CudaEvent* event_;
  bool in_graph_;
};

}  // namespace

StatusOr<std::shared_ptr<GpuRank>> GpuRank::Create(int rank, int device, int64_t timeout_ms, int ranks_sharing_gpu,
                                                   bool track_replays) {
  std::shared_ptr<GpuRank> g(new GpuRank());
  g->rank_ = rank;
  g->device_ = device;
  g->timeout_ns_ = static_cast<uint64_t>(timeout_ms) * 1000000ull;
  g->ranks_sharing_gpu_ = ranks_sharing_gpu;
  ASSIGN_OR_RETURN(base::ScopedDevice scope, base::ScopedDevice::Enter(device));
  ASSIGN_OR_RETURN(g->error_, base::MappedHostMemory::Allocate(sizeof(ErrorRecord)));
  const int unclaimed = 0;
  ASSIGN_OR_RETURN(g->claim_, base::DeviceCopy::Of(device, &unclaimed, sizeof(unclaimed)));
  ASSIGN_OR_RETURN(g->abort_, base::MappedHostMemory::Allocate(sizeof(int)));
  ASSIGN_OR_RETURN(g->done_, base::CudaEvent::Create(device));
  ASSIGN_OR_RETURN(g->captured_, base::CudaEvent::Create(device));
  g->track_replays_ = track_replays;
  if (track_replays) {
    ASSIGN_OR_RETURN(g->replayed_, base::CudaEvent::Create(device));
  }
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
  g.claim = static_cast<int*>(claim_.get());
  g.timeout_ns = timeout_ns_;
  g.rank = rank_;
  g.launch = launches_;
  return g;
}

Status GpuRank::Enqueue(void* stream, bool capturing, unsigned long long capture_id,
                        const std::function<Status()>& launch) {
  ASSIGN_OR_RETURN(base::ScopedDevice scope, base::ScopedDevice::Enter(device_));
  ++launches_;
  LaunchSite site;
  site.stream = stream;
  site.capturing = capturing;
  site.capture_id = capture_id;
  if (!capturing) {
    ASSIGN_OR_RETURN(site.stream_id, base::StreamId(stream));
    // The rule for ranks sharing a GPU is about the stream the kernel runs
    // on: a captured launch runs on whatever stream the graph is launched
    // on (and CUDA refuses cudaStreamGetFlags on a capturing stream). A
    // stream's flags never change: asked again only for another stream.
    if (ranks_sharing_gpu_ > 1 && !(ruled_ && site.stream_id == ruled_stream_)) {
      ASSIGN_OR_RETURN(const base::StreamFacts facts, base::GetStreamFacts(stream));
      RETURN_IF_ERROR(GpuStreamRule(facts.non_blocking, facts.legacy, ranks_sharing_gpu_));
      ruled_ = true;
      ruled_stream_ = site.stream_id;
    }
  }
  DoneEvent done(&done_, false);
  DoneEvent captured(&captured_, false);
  DoneEvent replayed(&replayed_, true);
  LaunchEvents events;
  events.eager = &done;
  events.captured = &captured;
  events.replayed = track_replays_ ? &replayed : nullptr;
  RETURN_IF_ERROR(order_.Before(site, events));
  RETURN_IF_ERROR(launch());
  return order_.After(site, events);
}

Status GpuRank::Synchronize() {
  RETURN_IF_ERROR(done_.Synchronize());
  // The last replay of a graph holding this rank's launches, where tracked.
  return order_.replays_tracked() ? replayed_.Synchronize() : Status();
}

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
