// The flight recorder: a communicator's last N operations (RINGO_TRACE_BUFFER,
// default 2000; 0 turns it off), kept in memory and written out as JSON
// lines only when something went wrong (a fault, a timeout, an abort) or
// when asked (ringoCommDumpTrace, or the signal RINGO_TRACE_SIGNAL names).
//
// One entry per operation: a collective, or each send and receive of a
// point-to-point call or group, with its arguments, the group it ran in,
// and when it was called (the C call, or its ringoGroupEnd for a group's
// operations, which start then), started (the engine took it) and finished
// (returned), and its state. A GPU operation is written at enqueue as
// "enqueued" (started and finished then being the enqueue's); the events
// recorded around its launch (gpu_times.h) then make it "running", and
// "done" with the GPU's own start and finish times, the enqueue time kept
// as "enqueued". Operations captured in a CUDA graph are recorded once, at
// capture, as "captured".
//
// Cost: the owning thread writes an entry in place (no lock, no
// allocation) and stamps it with the CPU's time-stamp counter; readers on
// other threads (the control service, a dump) see a consistent entry
// through a per-entry sequence count, or skip it. The position summary
// (what this rank is in, and what it last finished) is a handful of
// relaxed atomics.
//
// Thread safety: Begin/Finish by the communicator's calling thread (the
// communicator's run lock is held); Where and Dump from any thread.
#ifndef RINGO_COLLECTIVES_CONTROL_RECORDER_H_
#define RINGO_COLLECTIVES_CONTROL_RECORDER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace ringo::collectives {

// What an entry records (kernels::Coll's values, then point-to-point).
enum class TraceOp : uint8_t {
  kAllReduce = 0,
  kReduceScatter = 1,
  kAllGather = 2,
  kBroadcast = 3,
  kReduce = 4,
  kSend = 16,
  kRecv = 17,
};
const char* TraceOpName(TraceOp op);

// kEnqueued: a GPU operation on its stream (its completion is the stream's).
enum class TraceState : uint8_t { kEmpty = 0, kRunning = 1, kDone = 2, kFailed = 3, kCaptured = 4, kEnqueued = 5 };
const char* TraceStateName(TraceState state);

// The time-stamp counter (x86), or a monotonic clock's nanoseconds elsewhere.
uint64_t TraceTicks();
// Converts ticks to this process's monotonic and wall clocks (calibrated
// against them at the first use and again at every call: cheap enough for
// dumps and answers, not for the hot path).
struct TraceClock {
  double ticks_per_ns = 1.0;
  uint64_t ref_ticks = 0;
  int64_t ref_mono_ns = 0;
  int64_t ref_wall_ns = 0;
  int64_t MonoNs(uint64_t ticks) const;
  int64_t WallNs(uint64_t ticks) const;
  static TraceClock Now();
};

struct TraceEntry {
  std::atomic<uint64_t> version{0};  // odd while being written
  uint64_t id = 0;                   // this communicator's operation number, from 1
  uint64_t seq = 0;                  // collectives: the call's sequence number; send/recv: the message's on its pair
  int64_t count = 0;                 // elements
  uint64_t group = 0;                // the group it ran in (this thread's outermost ringoGroupStart count); 0: none
  uint64_t called = 0, started = 0, finished = 0;  // ticks; 0: not yet
  uint64_t enqueued = 0;             // GPU operations timed on the GPU: when the call returned; 0: none
  int32_t peer = -1;                 // send/recv: the peer; Broadcast/Reduce: the root; else -1
  TraceOp op = TraceOp::kAllReduce;
  uint8_t dtype = 0;                 // base::DataType
  uint8_t redop = 0;                 // base::RedOp (collectives that reduce)
  TraceState state = TraceState::kEmpty;
  char label[24] = {};               // the caller's name for it (ringo_torch: torch's), "" when none
};

// What the recorder says about this rank's position (Where()).
struct TracePosition {
  bool on = false;
  uint64_t ops = 0;            // operations begun so far
  // The operation running now, if any.
  bool running = false;
  TraceOp running_op = TraceOp::kAllReduce;
  uint64_t running_seq = 0;
  uint64_t running_since = 0;  // ticks
  // The last one that finished.
  uint64_t done_seq = 0;       // its seq (collectives), 0: none yet
  TraceOp done_op = TraceOp::kAllReduce;
  uint64_t done_at = 0;        // ticks
  uint64_t collectives_done = 0;  // collectives finished so far
};

class FlightRecorder {
 public:
  explicit FlightRecorder(size_t capacity);
  bool on() const { return capacity_ > 0; }
  size_t capacity() const { return capacity_; }

  // A new entry, called at `called` and started at `started` (ticks; 0:
  // now); null when the recorder is off. `label` may be null.
  TraceEntry* Begin(TraceOp op, uint64_t seq, int64_t count, int peer, uint8_t dtype, uint8_t redop, uint64_t group,
                    uint64_t called, uint64_t started, const char* label);
  void Finish(TraceEntry* entry, TraceState state);
  // Finishes the `n` entries begun from id `first` on (a batch of sends and
  // receives); those already overwritten are skipped. first 0: none.
  void FinishBatch(uint64_t first, size_t n, TraceState state);
  // The GPU's times of the entries from id `first` on (`n` of them), with
  // `state`; started 0 keeps the entry's start, finished 0 clears its
  // finish. Entries overwritten since are skipped. Any thread, once
  // EnableSharedWrites was called (GpuTimes does, under its own lock).
  void SetGpuTimes(uint64_t first, size_t n, uint64_t started, uint64_t finished, TraceState state);
  // From now on every writer claims an entry (its version from even to odd,
  // by compare-and-swap) before writing it, so that SetGpuTimes on another
  // thread and the owning thread never write one entry at once. Called
  // before the communicator's first call; host communicators never do, and
  // keep their writes free of atomics' read-modify-writes.
  void EnableSharedWrites() { shared_writes_ = true; }

  TracePosition Where() const;

  // The entries still held, oldest first, each as one JSON line; entries
  // being written at that moment are skipped.
  std::vector<std::string> JsonLines(const TraceClock& clock) const;

 private:
  // Claims `e` for writing; returns the even version it had (Release
  // writes it + 2).
  uint64_t Claim(TraceEntry& e);
  static void Release(TraceEntry& e, uint64_t v) { e.version.store(v + 2, std::memory_order_release); }

  const size_t capacity_;
  bool shared_writes_ = false;
  std::unique_ptr<TraceEntry[]> entries_;
  uint64_t next_ = 0;  // the owning thread's
  std::atomic<uint64_t> ops_{0};
  std::atomic<uint64_t> running_{0};  // the running entry's id, 0: none
  std::atomic<uint8_t> running_op_{0};
  std::atomic<uint64_t> running_seq_{0};
  std::atomic<uint64_t> running_since_{0};
  std::atomic<uint64_t> done_seq_{0};
  std::atomic<uint8_t> done_op_{0};
  std::atomic<uint64_t> done_at_{0};
  std::atomic<uint64_t> collectives_done_{0};
};

// RINGO_TRACE_BUFFER's default.
inline constexpr size_t kDefaultTraceEntries = 2000;

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_CONTROL_RECORDER_H_
