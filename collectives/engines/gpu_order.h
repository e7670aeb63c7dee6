// Order within a GPU communicator: its collectives run one after another in
// the order they were called, whichever streams they were enqueued on. Two
// ring kernels of one rank running at once would both advance the same FIFO
// counters and corrupt them, so a launch on another stream than the previous
// eager launch's makes its stream wait for that launch's completion event.
// On the same stream the order is the stream's own, and no wait is enqueued:
// streams are told apart by their CUDA stream id (cudaStreamGetId), unique
// in the process, so a destroyed stream's handle coming back as a new
// stream's is a new stream here.
//
// CUDA graphs. A launch enqueued on a capturing stream becomes a node of the
// graph and runs at each replay. Its stream must not wait for the eager
// event (a dependency across the capture's boundary invalidates the capture)
// and must not record it (the event would then stand for a graph node, not
// for work the host can wait on). Inside one capture sequence the launches
// are chained by a second event recorded in the capture: two collectives
// captured on two streams of one capture still run one after the other at
// replay. The kernels read their FIFO positions from the counters in device
// memory when they start, not from launch arguments, so a graph replays any
// number of times, between eager calls and other graphs.
//
// Replays. What the graph's launches cannot order by themselves is a replay
// against the communicator's other work on other streams. Where replays are
// tracked (RINGO_GPU_TRACK_REPLAYS=1: off until a GPU run has verified it),
// each captured launch also adds an event-record node after its kernel (the
// third event, recorded as a replay reaches it), and once anything was
// captured an eager launch waits for that event: an eager call issued after
// a replay runs after it, whatever its stream, and GpuRank::Synchronize
// (destroy, finalize, abort) waits for the last replay as for the last eager
// launch. A replay launched after an eager call on another stream is the
// caller's to order, as with NCCL. Untracked, the caller orders replays
// against everything else and synchronizes before destroying, as NCCL asks.
//
// The bookkeeping is here, behind a two-call interface to the events, so it
// is tested on the CPU; GpuRank provides the CUDA events, the stream ids and
// the capture state.
//
// Thread safety: used by the communicator's one user thread at a time.
#ifndef RINGO_COLLECTIVES_ENGINES_GPU_ORDER_H_
#define RINGO_COLLECTIVES_ENGINES_GPU_ORDER_H_

#include "base/status.h"

namespace ringo::collectives {

// A communicator's completion event of one kind.
class LaunchEvent {
 public:
  virtual ~LaunchEvent() = default;
  // Makes `stream`'s later work wait for the work last recorded.
  virtual base::Status MakeStreamWait(void* stream) = 0;
  // Marks the work enqueued on `stream` so far (on a capturing stream: a
  // dependency inside the capture, or, for the replayed event, a node of
  // the graph that records the event at each replay).
  virtual base::Status Record(void* stream) = 0;
};

// The events a launch is ordered by.
struct LaunchEvents {
  LaunchEvent* eager = nullptr;     // after each eager launch
  LaunchEvent* captured = nullptr;  // after each captured launch, inside its capture
  LaunchEvent* replayed = nullptr;  // after each captured launch, at each replay; null: replays untracked
};

// Where a launch is enqueued: the stream, its process-unique id (eager
// launches), and whether it is capturing and into which capture sequence.
struct LaunchSite {
  void* stream = nullptr;
  unsigned long long stream_id = 0;
  bool capturing = false;
  unsigned long long capture_id = 0;
};

class LaunchOrder {
 public:
  // Before enqueuing a collective: eager, a wait for the previous eager
  // launch if it was on another stream, and for the last replay if replays
  // are tracked and anything was captured; capturing, a wait for the
  // previous launch of the same capture sequence, if any.
  base::Status Before(const LaunchSite& site, const LaunchEvents& events) const;
  // After enqueuing it: records the events of its kind. A failed record
  // leaves the order as it was (the next launch waits for the launch before).
  base::Status After(const LaunchSite& site, const LaunchEvents& events);

  bool launched() const { return launched_; }
  // The capture sequence the captured event was last recorded in (0: none).
  unsigned long long last_capture() const { return last_capture_; }
  // Whether a replayed event was ever recorded into a graph.
  bool replays_tracked() const { return replays_tracked_; }

 private:
  bool launched_ = false;
  unsigned long long last_stream_ = 0;  // the stream id of the last eager launch
  unsigned long long last_capture_ = 0;
  bool replays_tracked_ = false;
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_GPU_ORDER_H_
