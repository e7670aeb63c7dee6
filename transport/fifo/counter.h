// Shared counters and the one way Ringo waits on a peer. A SharedCounter is a
// 64-bit value that only grows, in memory both sides map (process memory or
// POSIX shared memory), plus a count of sleepers.
//
// Waiting: `spin_count` polls with a pause, then `yield_count` polls that
// each give the core away (sched_yield: when ranks outnumber cores the peer
// we wait for may need this core), then futex sleeps on the value's low 32
// bits (shared, not private: the peer may be another process). A publisher
// wakes only when the sleeper count is non-zero; both sides use seq_cst, so a
// sleeper that registered before re-checking cannot miss a publish.
//
// Ordering: Publish is a release (seq_cst) store; a successful wait is an
// acquire, so what the publisher wrote before publishing is visible after.
// Every wait has a deadline (no progress for timeout_ms) and checks the local
// abort flag, the peer's abort flag (and then its fault notice, whose origin
// the error names), and whether the peer process still exists (a zombie, or
// a reused pid, counts as gone). A deadline that passes while the peer is
// itself waiting on another rank, for less than a timeout, is extended: that
// peer times out first and names the rank where the stall began.
#ifndef RINGO_TRANSPORT_FIFO_COUNTER_H_
#define RINGO_TRANSPORT_FIFO_COUNTER_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "transport/fifo/layout.h"  // SharedCounter
#include "transport/peer_state.h"
#include "transport/socket.h"

namespace ringo::transport {

struct WaitContext;

// What a wait does once it has lasted `after_ms`: calls `diagnose` (the
// hang diagnosis, collectives/control/diagnosis.h) once, and keeps its text
// for the timeout's message; with `abort`, fails at once instead of
// waiting on until the timeout.
struct StallHook {
  int64_t after_ms = 0;
  bool abort = false;
  std::string (*diagnose)(void* arg, const WaitContext& ctx, int peer_rank, int64_t waited_ms) = nullptr;
  void* arg = nullptr;
};

// How a rank waits: its own abort flag and patience.
struct WaitContext {
  const std::atomic<bool>* local_abort = nullptr;
  int64_t timeout_ms = 0;  // a wait with no progress for this long fails
  int spin_count = 1000;   // polls with a pause instruction
  int yield_count = 0;     // then polls with sched_yield, then futex sleeps
  int self_rank = -1;
  int channel = 0;
  // Ranks outnumber cores: the board's waits yield only to a rank on this
  // core that can move (see board.h).
  bool crowded = false;
  // For messages: the collective being run and its sequence number (0: none).
  const char* coll = nullptr;
  uint64_t seq = 0;
  // Wait states (peer_state.h), where the ranks share memory: this rank's
  // cells (published while a wait sleeps) and every rank's, by rank; null
  // where there are none.
  WaitCells* self_wait = nullptr;
  const WaitCells* const* rank_waits = nullptr;
  int nranks = 0;
  // The hang diagnosis after a long wait; null: none.
  const StallHook* stall = nullptr;
};



// Whom a wait is on, for the checks and the error message.
struct PeerRef {
  const std::atomic<uint32_t>* aborted;  // the peer's abort flag (in shared memory)
  int rank;
  ProcessId process;
  const char* what;  // "receiving from", "sending to", ...
  int64_t step;
  const FaultNotice* notice = nullptr;  // the peer's, read once its flag is up
};

// A wait's clock and what its stall check found (the waits of
// counter.cc, and engines that wait in slices of their own).
struct WaitTracker {
  Deadline deadline;
  int64_t last_probe_ms = 0;
  int64_t started_ms = 0;
  bool stall_checked = false;
  std::string diagnosis;  // the stall hook's text, for the timeout's message
};
// Runs ctx.stall once `t` has waited long enough; an error only under
// the hook's `abort`.
base::Status CheckStall(const PeerRef& peer, const WaitContext& ctx, WaitTracker& t, int64_t now_ms);

// "rank R <what> peer rank P (AllReduce #S, channel C, step T)".
std::string DescribeWait(const PeerRef& peer, const WaitContext& ctx);
// The error for a peer whose abort flag is up: its notice's origin and
// message, or a plain "aborted" when it wrote none.
base::Status PeerAbortedStatus(const PeerRef& peer, const WaitContext& ctx);

// Stores `value` and wakes sleepers.
void Publish(SharedCounter& counter, uint64_t value);
// Wakes sleepers so they re-check their flags.
void Wake(SharedCounter& counter);

// Waits until counter.value >= target; returns the value read.
base::StatusOr<uint64_t> WaitAtLeast(SharedCounter& counter, uint64_t target, const PeerRef& peer,
                                     const WaitContext& ctx);

// One of several conditions a waiter sleeps on at once.
struct CounterTarget {
  SharedCounter* counter;
  uint64_t target;
};

// Sleeps until some counters[i].value >= targets[i] or `timeout_ms` passes
// (checks nothing else: the caller polls its flags between calls); true when
// one is met. Registers as a sleeper on every counter, so any publish wakes
// it, and sleeps on all of them at once (Linux's futex_waitv; where the
// kernel lacks it, on the first counter alone, at most 1 ms at a time).
bool SleepUntilAny(const CounterTarget* targets, int n, int64_t timeout_ms);

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_FIFO_COUNTER_H_
