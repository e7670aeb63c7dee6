#include "collectives/control/gpu_times.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "base/cuda.h"
#include "base/logging.h"

namespace ringo::collectives {

using base::Status;

namespace {

constexpr int kMaxSlots = 64;
constexpr int64_t kReanchorNs = int64_t{10} * 1000 * 1000 * 1000;

int64_t MonoNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class CudaEvents : public GpuEvents {
 public:
  explicit CudaEvents(std::unique_ptr<base::CudaEventSet> set) : set_(std::move(set)) {}
  int size() const override { return set_->size(); }
  Status Record(int event, void* stream) override { return set_->Record(event, stream); }
  base::StatusOr<bool> Done(int event) override { return set_->Done(event); }
  base::StatusOr<double> ElapsedMs(int from, int to) override {
    ASSIGN_OR_RETURN(const float ms, set_->ElapsedMs(from, to));
    return static_cast<double>(ms);
  }
  base::StatusOr<uint64_t> RecordAnchor(int event) override {
    const uint64_t now = TraceTicks();
    RETURN_IF_ERROR(set_->RecordAside(event));
    return now;
  }

 private:
  std::unique_ptr<base::CudaEventSet> set_;
};

}  // namespace

base::StatusOr<std::unique_ptr<GpuEvents>> MakeCudaEvents(int device, int n) {
  ASSIGN_OR_RETURN(std::unique_ptr<base::CudaEventSet> set, base::CudaEventSet::Create(device, n));
  return std::unique_ptr<GpuEvents>(new CudaEvents(std::move(set)));
}

int GpuTimes::SlotsFor(size_t capacity) { return static_cast<int>(std::min<size_t>(kMaxSlots, capacity / 2)); }

GpuTimes::GpuTimes(std::unique_ptr<GpuEvents> events, FlightRecorder* recorder, int slots, double ticks_per_ns)
    : events_(std::move(events)), recorder_(recorder), slots_(slots), ticks_per_ns_(ticks_per_ns) {
  for (int s = slots_ - 1; s >= 0; --s) free_.push_back(s);
  if (events_ == nullptr || events_->size() < EventsFor(slots_) || slots_ <= 0) stopped_ = true;
  recorder_->EnableSharedWrites();
}

size_t GpuTimes::tracked() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.size();
}

bool GpuTimes::stopped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stopped_;
}

void GpuTimes::Drop(const Pending& p) {
  if (p.running) recorder_->SetGpuTimes(p.first, p.n, 0, 0, TraceState::kEnqueued);
}

void GpuTimes::Stop(const Status& why) {
  if (!stopped_) RINGO_LOG(WARN) << "flight recorder: GPU start and finish times stop: " << why.message();
  stopped_ = true;
  for (const Pending& p : pending_) Drop(p);
  pending_.clear();
}

uint64_t GpuTimes::ToTicks(int anchor, double ms) const {
  return anchor_ticks_[anchor] + static_cast<uint64_t>(std::max(0.0, ms) * 1e6 * ticks_per_ns_);
}

Status GpuTimes::Reanchor() {
  const int next = anchor_ < 0 ? 0 : 1 - anchor_;
  for (const Pending& p : pending_) {
    if (p.anchor == next) return Status();  // still counted from: later
  }
  ASSIGN_OR_RETURN(anchor_ticks_[next], events_->RecordAnchor(next));
  anchor_done_[next] = false;
  anchor_ = next;
  anchored_mono_ns_ = MonoNs();
  return Status();
}

int GpuTimes::Before(void* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) return -1;
  PollLocked();
  if (stopped_) return -1;
  if (free_.empty()) {  // the GPU is far behind: the oldest is no longer followed
    if (pending_.empty()) return -1;
    Drop(pending_.front());
    free_.push_back(pending_.front().slot);
    pending_.pop_front();
  }
  if (anchor_ < 0 || MonoNs() - anchored_mono_ns_ > kReanchorNs) {
    const Status st = Reanchor();
    if (!st.ok()) {
      Stop(st);
      return -1;
    }
  }
  const int slot = free_.back();
  const Status st = events_->Record(StartEvent(slot), stream);
  if (!st.ok()) {
    Stop(st);
    return -1;
  }
  free_.pop_back();
  return slot;
}

void GpuTimes::After(int slot, void* stream, uint64_t first, size_t n) {
  if (slot < 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) return;
  const Status st = first == 0 || n == 0 ? base::Internal("no entry") : events_->Record(EndEvent(slot), stream);
  if (!st.ok()) {
    free_.push_back(slot);
    if (first != 0 && n != 0) Stop(st);
    return;
  }
  pending_.push_back(Pending{slot, first, n, false, anchor_});
}

void GpuTimes::Cancel(int slot) {
  if (slot < 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!stopped_) free_.push_back(slot);
}

void GpuTimes::Poll() {
  std::lock_guard<std::mutex> lock(mu_);
  PollLocked();
}

bool GpuTimes::AnchorDone(int a) {
  if (anchor_done_[a]) return true;
  auto done = events_->Done(a);
  if (!done.ok()) {
    Stop(done.status());
    return false;
  }
  anchor_done_[a] = *done;
  return *done;
}

void GpuTimes::PollLocked() {
  if (stopped_) return;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (!AnchorDone(it->anchor)) {  // not yet on the host's clock
      if (stopped_) return;
      ++it;
      continue;
    }
    auto started = events_->Done(StartEvent(it->slot));
    auto finished = started.ok() && *started ? events_->Done(EndEvent(it->slot)) : base::StatusOr<bool>(false);
    if (!started.ok() || !finished.ok()) {
      Stop(!started.ok() ? started.status() : finished.status());
      return;
    }
    if (*finished) {
      auto from = events_->ElapsedMs(it->anchor, StartEvent(it->slot));
      auto to = events_->ElapsedMs(it->anchor, EndEvent(it->slot));
      if (!from.ok() || !to.ok()) {
        Stop(!from.ok() ? from.status() : to.status());
        return;
      }
      recorder_->SetGpuTimes(it->first, it->n, ToTicks(it->anchor, *from), ToTicks(it->anchor, *to),
                             TraceState::kDone);
      free_.push_back(it->slot);
      it = pending_.erase(it);
      continue;
    }
    if (*started && !it->running) {
      auto from = events_->ElapsedMs(it->anchor, StartEvent(it->slot));
      if (!from.ok()) {
        Stop(from.status());
        return;
      }
      recorder_->SetGpuTimes(it->first, it->n, ToTicks(it->anchor, *from), 0, TraceState::kRunning);
      it->running = true;
    }
    ++it;
  }
}

}  // namespace ringo::collectives
