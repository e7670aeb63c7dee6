#include "transport/counter.h"

#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <string>

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

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

bool ProcessGone(int pid) { return pid > 0 && kill(pid, 0) == -1 && errno == ESRCH; }

// The reason to stop waiting, if any.
base::Status CheckWait(const PeerRef& peer, const WaitContext& ctx, Deadline deadline) {
  if (ctx.local_abort != nullptr && ctx.local_abort->load(std::memory_order_relaxed)) {
    return base::InvalidUsage("the communicator was aborted");
  }
  auto where = [&] {
    return "rank " + std::to_string(ctx.self_rank) + " " + peer.what + " peer rank " + std::to_string(peer.rank) +
           " (channel " + std::to_string(ctx.channel) + ", step " + std::to_string(peer.step) + ")";
  };
  if (peer.aborted != nullptr && peer.aborted->load(std::memory_order_acquire) != 0) {
    return base::RemoteError(where() + ": the peer's communicator was aborted");
  }
  if (ProcessGone(peer.pid)) {
    return base::RemoteError(where() + ": the peer process (pid " + std::to_string(peer.pid) + ") has exited");
  }
  if (Clock::now() >= deadline) {
    return base::Timeout(where() + ": no progress for " + std::to_string(ctx.timeout_ms) + " ms");
  }
  return base::OkStatus();
}

}  // namespace

void Publish(SharedCounter& c, uint64_t value) {
  c.value.store(value, std::memory_order_seq_cst);
  if (c.waiters.load(std::memory_order_seq_cst) != 0) Wake(c);
}

void Wake(SharedCounter& c) {
  syscall(SYS_futex, FutexWord(&c.value), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

base::StatusOr<uint64_t> WaitAtLeast(SharedCounter& c, uint64_t target, const PeerRef& peer,
                                     const WaitContext& ctx) {
  // A ready counter still goes through the peer's flag: a peer that aborted
  // after publishing is gone, and every survivor must hear it.
  auto accept = [&](uint64_t value) -> base::StatusOr<uint64_t> {
    if (peer.aborted != nullptr && peer.aborted->load(std::memory_order_acquire) != 0) {
      RETURN_IF_ERROR(CheckWait(peer, ctx, DeadlineAfterMs(ctx.timeout_ms)));
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
  const Deadline deadline = DeadlineAfterMs(ctx.timeout_ms);  // no progress for timeout_ms
  for (int i = 0; i < ctx.yield_count; ++i) {
    sched_yield();
    v = c.value.load(std::memory_order_acquire);
    if (v >= target) return accept(v);
    if ((i & 63) == 63) RETURN_IF_ERROR(CheckWait(peer, ctx, deadline));
  }
  while (true) {
    RETURN_IF_ERROR(CheckWait(peer, ctx, deadline));
    c.waiters.fetch_add(1, std::memory_order_seq_cst);
    v = c.value.load(std::memory_order_seq_cst);
    if (v < target) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      int64_t ms = left < 1 ? 1 : (left < kPollSliceMs ? left : kPollSliceMs);
      FutexWait(&c.value, static_cast<uint32_t>(v), ms);
      v = c.value.load(std::memory_order_acquire);
    }
    c.waiters.fetch_sub(1, std::memory_order_seq_cst);
    if (v >= target) return accept(v);
  }
}

}  // namespace ringo::transport
