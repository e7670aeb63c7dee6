// Where a communicator's buffers live and its calls run: host memory, where
// every call completes inside it, or a CUDA device, where every call is
// enqueued on the caller's stream. The engine registry prepares one per
// communicator, before the engines (registry.h), with what they need first
// (host: the pages the ranks of one memory domain share; GPU: every rank's
// GPU and the ring's geometry there); the communicator asks it instead of
// branching on the device.
//
// Thread safety: as the communicator's calls (one user thread at a time);
// Abort from any thread.
#ifndef RINGO_COLLECTIVES_ENGINES_RESIDENCE_H_
#define RINGO_COLLECTIVES_ENGINES_RESIDENCE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "collectives/control/gpu_times.h"
#include "collectives/control/recorder.h"
#include "collectives/engines/setup.h"
#include "transport/fifo/counter.h"

namespace ringo::collectives {

class Residence {
 public:
  // How a call's flight record ends when it succeeds (done on the host;
  // enqueued, or captured into a CUDA graph, on a GPU), and the slot of its
  // GPU times (-1: none).
  struct Launch {
    TraceState state = TraceState::kDone;
    int slot = -1;
    // The caller's stream is capturing a CUDA graph (into capture sequence
    // capture_id): asked once, here, for the whole call.
    bool capturing = false;
    unsigned long long capture_id = 0;
  };

  virtual ~Residence() = default;
  // The CUDA device ordinal; -1 for host memory.
  virtual int device() const = 0;
  // InvalidArgument unless `ptr` is memory this communicator can use: host
  // memory for a host communicator, memory of its device for a GPU one.
  virtual base::Status CheckBuffer(const void* ptr, const char* name) const = 0;
  // InvalidUsage when `stream` (not null) is capturing a CUDA graph that
  // this communicator's calls cannot be part of.
  virtual base::Status CheckCapture(void* stream) const = 0;
  // Around a call's launch, once its arguments were accepted: `times` are
  // the observer's GPU times (null: none kept), `recorded` whether the call
  // has a flight record. A refusal leaves the communicator as it was.
  virtual base::Status BeginLaunch(GpuTimes* times, bool recorded, void* stream, Launch* launch) = 0;
  // After it: `first` is the first of the call's `n` record entries, 0 when
  // the launch failed.
  virtual void EndLaunch(GpuTimes* times, const Launch& launch, void* stream, uint64_t first, size_t n) = 0;
  // Tells the ranks that wait on this rank through the shared pages why it
  // stops, and wakes them. Any thread; does not wait.
  virtual void Abort(const base::Status& why, uint64_t seq) {}
  // Where the ranks share pages: this rank's wait cells and every rank's.
  virtual void ConfigureWait(transport::WaitContext* wait) const {}
  // For the INFO line of a ready rank: "host memory, 2 channel(s), ...".
  virtual std::string Describe(const EngineSetup& setup) const = 0;
};

// Completes `setup` for where the ranks agreed to run (setup->device) and
// makes the residence: collective over the communicator's ranks (every rank
// decides alike). Host memory: the shared pages, where the ranks share one
// memory domain and the planner gave the board room. GPU: every rank's
// place, the device geometry, the ranks that share this rank's GPU.
base::StatusOr<std::unique_ptr<Residence>> PrepareResidence(EngineSetup* setup);

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_RESIDENCE_H_
