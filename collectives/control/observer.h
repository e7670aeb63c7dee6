// What a communicator keeps to explain itself: its flight recorder
// (recorder.h), the hang diagnosis (diagnosis.h), the thread that drives
// it, and the dumps of its record: a file of JSON lines per rank and
// communicator in RINGO_TRACE_DIR (or a folder the caller names), written
// on a fault, a timeout, an abort, on request, and on RINGO_TRACE_SIGNAL,
// whose handler only wakes a thread of Ringo's that writes every live
// communicator's record.
//
// The file: a header line (the communicator, rank, host, process, why it
// was written, and this rank's clock against rank 0's, estimated at init
// over the control connections), then one line per recorded operation,
// oldest first. ringo-doctor reads a folder of them.
//
// Thread safety: Dump from any thread (one at a time per observer); the
// rest as recorder.h and diagnosis.h say.
#ifndef RINGO_COLLECTIVES_CONTROL_OBSERVER_H_
#define RINGO_COLLECTIVES_CONTROL_OBSERVER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/status.h"
#include "collectives/control/diagnosis.h"
#include "collectives/control/gpu_times.h"
#include "collectives/control/recorder.h"
#include "collectives/control/thread_call.h"
#include "transport/bootstrap/exchange.h"
#include "transport/connect/peer_info.h"

namespace ringo::collectives {

struct ObserverSetup {
  int rank = 0;
  int nranks = 1;
  uint64_t comm_id = 0;
  transport::Exchange* exchange = nullptr;
  std::vector<transport::PeerInfo> peers;
  const base::Config* config = nullptr;
  bool gpu = false;
  int device = -1;  // GPU communicators: the CUDA device (the GPU times' events)
};

class Observer {
 public:
  // Collective over the communicator's ranks when a trace folder is set
  // (each rank asks rank 0's clock); local otherwise.
  explicit Observer(ObserverSetup setup);
  ~Observer();
  Observer(const Observer&) = delete;
  Observer& operator=(const Observer&) = delete;

  FlightRecorder& recorder() { return recorder_; }
  // GPU communicators with the recorder on: the GPU times of their
  // operations (gpu_times.h); null otherwise.
  GpuTimes* gpu_times() { return gpu_times_.get(); }
  const transport::StallHook* stall_hook() const { return diagnosis_ ? diagnosis_->hook() : nullptr; }
  // This rank's diagnosis of call #`seq` ("" where none was made).
  std::string DiagnosisOf(uint64_t seq) const { return diagnosis_ ? diagnosis_->TextFor(seq) : std::string(); }
  // The thread calling this communicator now (the C boundary says).
  void Driven(ThreadCall* call) { driver_.store(call, std::memory_order_release); }
  // How this rank runs its current collective (a string of static storage:
  // "ring", "wire bf16", ...; "" between calls), for the hang diagnosis.
  void Running(const char* engine) { engine_.store(engine, std::memory_order_release); }

  // Writes the record to `dir` ("": RINGO_TRACE_DIR; nothing, and OK, when
  // neither names a folder) because of `reason`; the file's path in *path.
  base::Status Dump(const std::string& reason, const std::string& dir = "", std::string* path = nullptr);

 private:
  ObserverSetup setup_;
  FlightRecorder recorder_;
  std::unique_ptr<GpuTimes> gpu_times_;
  std::atomic<ThreadCall*> driver_{nullptr};
  std::atomic<const char*> engine_{""};
  std::unique_ptr<Diagnosis> diagnosis_;
  bool clock_registered_ = false;
  int64_t clock_offset_ns_ = 0;   // this rank's wall clock minus rank 0's
  int64_t clock_error_ns_ = -1;   // half the round trip of the best estimate; -1: not estimated
  std::mutex dump_mu_;
  std::string reasons_;           // GUARDED_BY(dump_mu_): why earlier dumps were written
};

// Every live observer of the process writes its record (the signal's thread).
void DumpEveryObserver(const std::string& reason);

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_CONTROL_OBSERVER_H_
