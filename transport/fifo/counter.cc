#include "transport/fifo/counter.h"

#include <linux/futex.h>
#include <linux/time_types.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <string>

#include "base/cpu_relax.h"
#include "transport/socket.h"  // Clock, Deadline

namespace ringo::transport {
namespace {

constexpr int64_t kPollSliceMs = 50;  // how often a sleeper re-checks peer and abort

uint32_t* FutexWord(std::atomic<uint64_t>* value) {
  // The low half of the 64-bit counter (x86-64 and arm64 are little-endian).
  return reinterpret_cast<uint32_t*>(value);
}

void FutexWait(std::atomic<uint64_t>* value, uint32_t expected, int64_t ms) {
  timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>((ms % 1000) * 1000000)};
  syscall(SYS_futex, FutexWord(value), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

using base::CpuRelax;

// A deadline that passes while the peer waits on another rank for less than
// this beyond a timeout is extended (the peer will time out and say why).
constexpr int64_t kStallGraceMs = 2000;
// /proc is read at most this often per wait (kill(pid, 0) at every check).
constexpr int64_t kProbeIntervalMs = 20;

base::Status Blame(base::Status st, const PeerRef& peer) { return st.WithOrigin(peer.rank, st.message()); }

// A timeout's message with the stall diagnosis, when there was one.
std::string WithDiagnosis(std::string msg, const WaitTracker& t) {
  if (!t.diagnosis.empty()) msg += "\n" + t.diagnosis;
  return msg;
}

}  // namespace

base::Status CheckStall(const PeerRef& peer, const WaitContext& ctx, WaitTracker& t, int64_t now_ms) {
  if (ctx.stall == nullptr || t.stall_checked || ctx.stall->diagnose == nullptr) return base::OkStatus();
  if (t.started_ms == 0) t.started_ms = now_ms;
  const int64_t waited = now_ms - t.started_ms;
  if (waited < ctx.stall->after_ms) return base::OkStatus();
  t.stall_checked = true;
  t.diagnosis = ctx.stall->diagnose(ctx.stall->arg, ctx, peer.rank, waited);
  if (!ctx.stall->abort) return base::OkStatus();
  return Blame(base::Timeout(WithDiagnosis(DescribeWait(peer, ctx) + ": no progress for " + std::to_string(waited) +
                                               " ms, and RINGO_STALL_ABORT=1 stops at the diagnosis",
                                           t)),
               peer);
}

namespace {

// The reason to stop waiting, if any; extends the deadline when the peer is
// itself waiting on someone else (see counter.h).
base::Status CheckWait(const PeerRef& peer, const WaitContext& ctx, WaitTracker& t) {
  if (ctx.local_abort != nullptr && ctx.local_abort->load(std::memory_order_relaxed)) {
    return base::InvalidUsage("the communicator was aborted");
  }
  if (peer.aborted != nullptr && peer.aborted->load(std::memory_order_acquire) != 0) {
    return PeerAbortedStatus(peer, ctx);
  }
  const int64_t now_ms = NowMs();
  const bool expired = Clock::now() >= t.deadline;
  ProcessState state = ProcessState::kRunning;
  if (expired || now_ms - t.last_probe_ms >= kProbeIntervalMs) {
    t.last_probe_ms = now_ms;
    state = ProbeProcess(peer.process);
  } else if (peer.process.pid > 0 && kill(peer.process.pid, 0) == -1 && errno == ESRCH) {
    state = ProcessState::kGone;
  }
  if (state == ProcessState::kGone) {
    return Blame(base::RemoteError(DescribeWait(peer, ctx) + ": the peer process (pid " +
                                   std::to_string(peer.process.pid) + ") has exited"),
                 peer);
  }
  RETURN_IF_ERROR(CheckStall(peer, ctx, t, now_ms));
  if (!expired) return base::OkStatus();
  const std::string stalled = DescribeWait(peer, ctx) + ": no progress for " + std::to_string(ctx.timeout_ms) + " ms";
  if (state == ProcessState::kStopped) {
    return Blame(base::Timeout(WithDiagnosis(stalled + "; the peer process (pid " + std::to_string(peer.process.pid) +
                                                 ") is stopped (by a signal or a debugger)",
                                             t)),
                 peer);
  }
  PeerWait w;
  if (ctx.rank_waits != nullptr && peer.rank >= 0 && peer.rank < ctx.nranks && ctx.rank_waits[peer.rank] != nullptr) {
    w = ReadWait(*ctx.rank_waits[peer.rank]);
  }
  if (w.waiting && w.on_rank != ctx.self_rank && w.age_ms < ctx.timeout_ms + kStallGraceMs) {
    t.deadline = Clock::now() + std::chrono::milliseconds(kPollSliceMs);
    return base::OkStatus();
  }
  std::string msg = stalled;
  if (w.waiting && w.on_rank == ctx.self_rank) {
    msg += "; rank " + std::to_string(peer.rank) + " waits on this rank too (did the ranks call different collectives?)";
  } else if (w.waiting) {
    msg += "; rank " + std::to_string(peer.rank) + " has itself waited on rank " + std::to_string(w.on_rank) + " for " +
           std::to_string(w.age_ms) + " ms";
  }
  return Blame(base::Timeout(WithDiagnosis(msg, t)), peer);
}

// Publishes this channel's wait while it sleeps (peer_state.h).
class PublishedWait {
 public:
  PublishedWait(const WaitContext& ctx, int peer_rank) {
    if (ctx.self_wait == nullptr) return;
    cell_ = &ctx.self_wait->cell[ctx.channel % kWaitCells];
    cell_->store(EncodeWait(peer_rank, NowMs()), std::memory_order_relaxed);
  }
  ~PublishedWait() {
    if (cell_ != nullptr) cell_->store(0, std::memory_order_relaxed);
  }
  // A wait that failed stays published: this rank is about to raise its
  // abort flag with its notice, and a peer whose own deadline passes in
  // between must still see that this rank waited on someone else.
  base::Status Keep(base::Status st) {
    if (!st.ok()) cell_ = nullptr;
    return st;
  }

 private:
  std::atomic<uint64_t>* cell_ = nullptr;
};

}  // namespace

void Publish(SharedCounter& c, uint64_t value) {
  c.value.store(value, std::memory_order_seq_cst);
  if (c.waiters.load(std::memory_order_seq_cst) != 0) Wake(c);
}

void Wake(SharedCounter& c) {
  syscall(SYS_futex, FutexWord(&c.value), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

bool SleepUntilAny(const CounterTarget* targets, int n, int64_t timeout_ms) {
  constexpr int kMax = 128;  // futex_waitv's limit
  if (n <= 0) return false;
  if (n > kMax) n = kMax;
  for (int i = 0; i < n; ++i) targets[i].counter->waiters.fetch_add(1, std::memory_order_seq_cst);
  bool ready = false;
#if defined(SYS_futex_waitv)
  futex_waitv waits[kMax];
  for (int i = 0; i < n && !ready; ++i) {
    const uint64_t v = targets[i].counter->value.load(std::memory_order_seq_cst);
    ready = v >= targets[i].target;
    waits[i] = futex_waitv{};
    waits[i].val = static_cast<uint32_t>(v);
    waits[i].uaddr = reinterpret_cast<uintptr_t>(FutexWord(&targets[i].counter->value));
    waits[i].flags = FUTEX_32;  // shared: the peer may be another process
  }
  static std::atomic<bool> missing{false};
  if (!ready && !missing.load(std::memory_order_relaxed)) {
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    __kernel_timespec until{now.tv_sec + timeout_ms / 1000, now.tv_nsec + (timeout_ms % 1000) * 1000000};
    if (until.tv_nsec >= 1000000000) {
      until.tv_sec += 1;
      until.tv_nsec -= 1000000000;
    }
    if (syscall(SYS_futex_waitv, waits, n, 0, &until, CLOCK_MONOTONIC) == -1 && errno == ENOSYS) {
      missing.store(true, std::memory_order_relaxed);
    }
    for (int i = 0; i < n && !ready; ++i) ready = targets[i].counter->value.load(std::memory_order_acquire) >= targets[i].target;
  } else if (!ready) {
#else
  {
#endif
    const uint64_t v = targets[0].counter->value.load(std::memory_order_seq_cst);
    ready = v >= targets[0].target;
    if (!ready) FutexWait(&targets[0].counter->value, static_cast<uint32_t>(v), timeout_ms < 1 ? timeout_ms : 1);
    for (int i = 0; i < n && !ready; ++i) ready = targets[i].counter->value.load(std::memory_order_acquire) >= targets[i].target;
  }
  for (int i = 0; i < n; ++i) targets[i].counter->waiters.fetch_sub(1, std::memory_order_seq_cst);
  return ready;
}

std::string DescribeWait(const PeerRef& peer, const WaitContext& ctx) {
  std::string s = "rank " + std::to_string(ctx.self_rank) + " " + peer.what + " peer rank " + std::to_string(peer.rank) + " (";
  if (ctx.coll != nullptr) s += std::string(ctx.coll) + " #" + std::to_string(ctx.seq) + ", ";
  return s + "channel " + std::to_string(ctx.channel) + ", step " + std::to_string(peer.step) + ")";
}

base::Status PeerAbortedStatus(const PeerRef& peer, const WaitContext& ctx) {
  const std::string where = DescribeWait(peer, ctx);
  if (peer.notice != nullptr) {
    base::Status st = NoticeStatus(*peer.notice, where, peer.rank, ctx.nranks > 0 ? ctx.nranks : peer.rank + 1);
    if (!st.ok()) return st;
  }
  return Blame(base::RemoteError(where + ": the peer's communicator was aborted"), peer);
}

base::StatusOr<uint64_t> WaitAtLeast(SharedCounter& c, uint64_t target, const PeerRef& peer,
                                     const WaitContext& ctx) {
  // A ready counter still goes through the peer's flag: a peer that aborted
  // after publishing is gone, and every survivor must hear it; unless its
  // notice says it failed in a later collective than this one, whose data
  // it had all published (a rank still finishing collective #k must not
  // fail because its peer went on to a mismatched #k+1).
  auto accept = [&](uint64_t value) -> base::StatusOr<uint64_t> {
    if (peer.aborted != nullptr && peer.aborted->load(std::memory_order_acquire) != 0) {
      const bool later = peer.notice != nullptr && ctx.seq != 0 &&
                         peer.notice->set.load(std::memory_order_acquire) != 0 && peer.notice->seq > ctx.seq;
      if (!later) return PeerAbortedStatus(peer, ctx);
    }
    return value;
  };
  uint64_t v = c.value.load(std::memory_order_acquire);
  if (v >= target) return accept(v);
  for (int i = 0; i < ctx.spin_count; ++i) {
    CpuRelax();
    v = c.value.load(std::memory_order_acquire);
    if (v >= target) return accept(v);
  }
  WaitTracker t;
  t.deadline = DeadlineAfterMs(ctx.timeout_ms);  // no progress for timeout_ms
  t.last_probe_ms = t.started_ms = NowMs();
  PublishedWait published(ctx, peer.rank);
  for (int i = 0; i < ctx.yield_count; ++i) {
    sched_yield();
    v = c.value.load(std::memory_order_acquire);
    if (v >= target) return accept(v);
    if ((i & 63) == 63) RETURN_IF_ERROR(published.Keep(CheckWait(peer, ctx, t)));
  }
  while (true) {
    RETURN_IF_ERROR(published.Keep(CheckWait(peer, ctx, t)));
    c.waiters.fetch_add(1, std::memory_order_seq_cst);
    v = c.value.load(std::memory_order_seq_cst);
    if (v < target) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(t.deadline - Clock::now()).count();
      int64_t ms = left < 1 ? 1 : (left < kPollSliceMs ? left : kPollSliceMs);
      FutexWait(&c.value, static_cast<uint32_t>(v), ms);
      v = c.value.load(std::memory_order_acquire);
    }
    c.waiters.fetch_sub(1, std::memory_order_seq_cst);
    if (v >= target) return accept(v);
  }
}

}  // namespace ringo::transport
