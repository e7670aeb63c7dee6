// Order within a GPU communicator: its collectives run one after another in
// the order they were called, whichever streams they were enqueued on. Two
// ring kernels of one rank running at once would both advance the same FIFO
// counters and corrupt them, so every launch after the first makes its stream
// wait for the previous launch's completion event. On the same stream the
// wait is redundant but cheap (one host call), and it keeps the order right
// when a destroyed stream's handle comes back as a new stream's.
//
// The bookkeeping is here, behind a two-call interface to the event, so it is
// tested on the CPU; GpuComm provides the CUDA event.
//
// Thread safety: used by the communicator's one user thread at a time.
#ifndef RINGO_COLLECTIVES_INTERNAL_GPU_ORDER_H_
#define RINGO_COLLECTIVES_INTERNAL_GPU_ORDER_H_

#include "base/status.h"

namespace ringo::collectives::internal {

// The completion event of a communicator's latest launch.
class LaunchEvent {
 public:
  virtual ~LaunchEvent() = default;
  // Makes `stream`'s later work wait for the work last recorded.
  virtual base::Status MakeStreamWait(void* stream) = 0;
  // Marks the work enqueued on `stream` so far.
  virtual base::Status Record(void* stream) = 0;
};

class LaunchOrder {
 public:
  // Before enqueuing a collective on `stream`: a wait for the previous
  // launch, if any.
  base::Status Before(void* stream, LaunchEvent& event) const;
  // After enqueuing it: records the event. A failed record leaves the order
  // as it was (the next launch waits for the launch before).
  base::Status After(void* stream, LaunchEvent& event);

  bool launched() const { return launched_; }

 private:
  bool launched_ = false;
};

}  // namespace ringo::collectives::internal

#endif  // RINGO_COLLECTIVES_INTERNAL_GPU_ORDER_H_
