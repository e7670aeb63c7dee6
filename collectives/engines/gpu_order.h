// Order within a GPU communicator: its collectives run one after another in
// the order they were called, whichever streams they were enqueued on. Two
// ring kernels of one rank running at once would both advance the same FIFO
// counters and corrupt them, so every launch after the first makes its stream
// wait for the previous launch's completion event. On the same stream the
// wait is redundant but cheap (one host call), and it keeps the order right
// when a destroyed stream's handle comes back as a new stream's.
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
// number of times, between eager calls and other graphs. What the graph's
// launches cannot order by themselves is a replay against the
// communicator's other work on other streams: launch graphs on the stream of
// the eager calls, or order the streams yourself (as NCCL asks).
//
// The bookkeeping is here, behind a two-call interface to the events, so it
// is tested on the CPU; GpuRank provides the CUDA events and the capture
// state.
//
// Thread safety: used by the communicator's one user thread at a time.
#ifndef RINGO_COLLECTIVES_ENGINES_GPU_ORDER_H_
#define RINGO_COLLECTIVES_ENGINES_GPU_ORDER_H_

#include "base/status.h"

namespace ringo::collectives {

// The completion event of a communicator's latest launch.
class LaunchEvent {
 public:
  virtual ~LaunchEvent() = default;
  // Makes `stream`'s later work wait for the work last recorded.
  virtual base::Status MakeStreamWait(void* stream) = 0;
  // Marks the work enqueued on `stream` so far.
  virtual base::Status Record(void* stream) = 0;
};

// Whether the stream of a launch is capturing, and which capture sequence.
struct CaptureState {
  bool active = false;
  unsigned long long id = 0;
};

class LaunchOrder {
 public:
  // Before enqueuing a collective on `stream`: eager, a wait for the previous
  // eager launch, if any; capturing, a wait for the previous launch of the
  // same capture sequence, if any.
  base::Status Before(void* stream, const CaptureState& capture, LaunchEvent& eager,
                      LaunchEvent& captured) const;
  // After enqueuing it: records the event of its kind. A failed record
  // leaves the order as it was (the next launch waits for the launch before).
  base::Status After(void* stream, const CaptureState& capture, LaunchEvent& eager, LaunchEvent& captured);

  bool launched() const { return launched_; }
  // The capture sequence the captured event was last recorded in (0: none).
  unsigned long long last_capture() const { return last_capture_; }

 private:
  bool launched_ = false;
  unsigned long long last_capture_ = 0;
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_GPU_ORDER_H_
