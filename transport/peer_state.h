// What a rank publishes about itself in memory its peers map (FIFO and board
// headers), so that a peer that fails can be named on every survivor:
//
// - ProcessId: pid and start time. A peer is gone when its process no longer
//   exists, is a zombie (killed but not yet reaped by its parent), or its pid
//   now belongs to a process started later (reused).
// - FaultNotice: why this rank stopped (the rank where the fault started, the
//   result code, the collective's sequence number and that rank's message).
//   Written once, by its owner only, before the owner raises its abort flag;
//   a peer that sees the flag (acquire) reads the notice and relays it, so the
//   origin travels around the ring unchanged.
// - WaitState: whom this rank's channel waits on, and since when (steady
//   clock, which every process of a host shares). A rank whose deadline
//   passes while its peer is itself waiting on someone else lets the peer
//   time out first, so the stall is blamed on the rank where it started.
//
// All of it lives in shared memory: plain data, lock-free atomics only.
#ifndef RINGO_TRANSPORT_PEER_STATE_H_
#define RINGO_TRANSPORT_PEER_STATE_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace ringo::transport {

struct ProcessId {
  int32_t pid = 0;
  uint64_t start_ticks = 0;  // /proc/<pid>/stat field 22; 0: unknown
};

ProcessId SelfProcessId();

enum class ProcessState { kRunning, kStopped, kGone };

// Whether `id` still runs. kStopped: stopped by a signal or a debugger.
// Reads /proc (a few microseconds); pid 0 is reported running (unknown).
ProcessState ProbeProcess(const ProcessId& id);

inline constexpr size_t kFaultTextBytes = 232;
// The sequence number of a notice that concerns no collective in flight: a
// peer that closed in good order. Data it delivered is still read; only a
// wait for more fails.
inline constexpr uint64_t kAfterEveryCollective = ~uint64_t{0};

struct FaultNotice {
  std::atomic<uint32_t> set{0};  // 1 once the fields below are written (release)
  int32_t origin = -1;           // the rank where the fault started
  int32_t code = 0;              // base::Code
  int32_t reserved = 0;
  uint64_t seq = 0;              // the collective (per communicator, from 1) it happened in
  char text[kFaultTextBytes] = {};  // the origin's message, NUL-terminated
};
static_assert(sizeof(FaultNotice) == 256, "notices are four cache lines");

// Writes `st` (a failed status) into `notice` unless one is there already:
// its origin if it came from a peer, else `self_rank`.
void WriteFaultNotice(FaultNotice& notice, const base::Status& st, int self_rank, uint64_t seq);

// The status a survivor reports for the notice of peer `peer_rank`: the
// origin's code, `where` followed by the origin rank and its message,
// carrying the origin (the peer itself when the notice names no rank of
// `nranks`). Not OK only when the notice is set.
base::Status NoticeStatus(const FaultNotice& notice, const std::string& where, int peer_rank, int nranks);

// ---- wait states ----

inline constexpr int kWaitCells = 8;  // one per channel (channel % kWaitCells)

struct WaitCells {
  std::atomic<uint64_t> cell[kWaitCells];
};

// 0: not waiting; else bits 16.. the steady clock in ms when the wait began,
// bits 0..15 the rank waited on + 1.
uint64_t EncodeWait(int rank, int64_t since_ms);
int64_t NowMs();

struct PeerWait {
  bool waiting = false;
  int on_rank = -1;
  int64_t age_ms = 0;  // of the oldest wait
};
PeerWait ReadWait(const WaitCells& cells);

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_PEER_STATE_H_
