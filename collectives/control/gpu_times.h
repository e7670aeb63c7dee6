// When GPU operations started and finished, for the flight recorder: a pair
// of timing events recorded on the caller's stream around each operation's
// launch (the GPU stamps them as the stream reaches them), placed on the
// host's clock through an anchor event recorded on an idle stream of its
// own: the host's clock is read just before it is recorded, and the GPU
// completes it at once (nothing runs before it on that stream). Nothing
// here waits for the GPU: the anchor is never waited for (with several
// ranks on one GPU a wait could sit behind another rank's kernel), and an
// operation's times are written once its anchor and its events have
// completed, as Poll finds them.
//
// An operation's entry is written at enqueue as "enqueued" (recorder.h);
// Poll moves it to "running" once its first event has passed and to "done"
// with the GPU's start and finish times once its second has, keeping the
// enqueue time apart. Poll runs at every GPU call (on the calling thread)
// and before every dump (any thread).
//
// Bounds: at most `slots` operations are tracked at once (the recorder's
// capacity / 2, at most 64); a launch that finds every slot taken first
// polls, then gives up tracking the oldest (its entry is left, or put back,
// as "enqueued"). An entry the calling thread has rewritten since is
// skipped: the recorder's writers claim an entry before writing it
// (FlightRecorder::EnableSharedWrites). Two anchor events take turns: a new
// one is taken every 10 s (clocks drift apart slowly) once no tracked
// operation counts from the older one. Calls captured into a CUDA graph are
// not tracked (recorded once, at capture). A CUDA error stops the
// tracking, logged once.
//
// Thread safety: every method takes the one lock.
#ifndef RINGO_COLLECTIVES_CONTROL_GPU_TIMES_H_
#define RINGO_COLLECTIVES_CONTROL_GPU_TIMES_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "base/status.h"
#include "collectives/control/recorder.h"

namespace ringo::collectives {

// What GpuTimes needs of events: CUDA's (MakeCudaEvents), or a test's.
class GpuEvents {
 public:
  virtual ~GpuEvents() = default;
  virtual int size() const = 0;  // events 0..size()-1
  virtual base::Status Record(int event, void* stream) = 0;
  virtual base::StatusOr<bool> Done(int event) = 0;
  virtual base::StatusOr<double> ElapsedMs(int from, int to) = 0;
  // Records `event` where nothing runs before it, without waiting for it,
  // and returns TraceTicks() read just before: the event's time on the GPU
  // (Done(event) says when it completed).
  virtual base::StatusOr<uint64_t> RecordAnchor(int event) = 0;
};

// `n` timing events on CUDA device `device`.
base::StatusOr<std::unique_ptr<GpuEvents>> MakeCudaEvents(int device, int n);

class GpuTimes {
 public:
  // Slots for the recorder's capacity; 0 means no tracking at all.
  static int SlotsFor(size_t capacity);
  // Events needed for `slots`.
  static int EventsFor(int slots) { return 2 + 2 * slots; }
  // `events` must hold EventsFor(slots) events; `ticks_per_ns` converts the
  // GPU's milliseconds to the recorder's ticks. Enables the recorder's
  // shared writes.
  GpuTimes(std::unique_ptr<GpuEvents> events, FlightRecorder* recorder, int slots, double ticks_per_ns);

  // Before an operation's launch on `stream`: its start event; the slot to
  // give After, or -1 (not tracked).
  int Before(void* stream);
  // After the launch of the entries from id `first` on (`n` of them: a
  // batch of sends and receives is several): its finish event.
  void After(int slot, void* stream, uint64_t first, size_t n);
  // The launch Before was called for did not happen: the slot is free.
  void Cancel(int slot);
  // Writes what the events say into the entries they track (those whose
  // anchor has completed). Never waits for the GPU.
  void Poll();

  size_t tracked() const;
  bool stopped() const;

 private:
  struct Pending {
    int slot;
    uint64_t first;
    size_t n;
    bool running;
    int anchor;  // the anchor event its times count from (0 or 1)
  };
  int StartEvent(int slot) const { return 2 + 2 * slot; }
  int EndEvent(int slot) const { return 3 + 2 * slot; }
  void PollLocked();
  // No longer followed: a "running" entry goes back to "enqueued".
  void Drop(const Pending& p);
  void Stop(const base::Status& why);
  base::Status Reanchor();
  // Whether anchor `a` has completed (asked once until it has); false on an error (stopped).
  bool AnchorDone(int a);
  uint64_t ToTicks(int anchor, double ms) const;

  mutable std::mutex mu_;
  std::unique_ptr<GpuEvents> events_;
  FlightRecorder* const recorder_;
  const int slots_;
  const double ticks_per_ns_;
  std::vector<int> free_;        // slots not tracking anything
  std::deque<Pending> pending_;  // oldest first
  uint64_t anchor_ticks_[2] = {0, 0};  // each anchor event's host time; 0: never taken
  bool anchor_done_[2] = {false, false};  // the GPU has completed it: times can count from it
  int anchor_ = -1;                    // the anchor new operations count from; -1: none yet
  int64_t anchored_mono_ns_ = 0;
  bool stopped_ = false;
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_CONTROL_GPU_TIMES_H_
