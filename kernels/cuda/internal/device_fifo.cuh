// Device side of the connector FIFO protocol (transport/fifo/layout.h;
// docs/architecture.md, "The FIFO protocol"): the counters, the waits with
// their deadline and abort checks, and the error record. Waits and posts
// are made by one thread of a block (thread 0) for the whole block; the
// block's barriers carry the ordering to the others.
//
// Memory ordering, per method (PTX memory model; every counter access is a
// system-scope atomic, since the peer may be another GPU, a CPU thread (the
// network proxy) or a NIC; where DeviceFifo::gpu_scope says both ends are
// kernels of this GPU, the same accesses at GPU scope, which a peer on the
// same device honours and which need not reach past the GPU's L2):
// - WaitCounter: relaxed system-scope polls, then one system-scope acquire
//   fence once the value is reached. Guarantees: everything the peer wrote
//   (or read) before its release of that value is visible to (ordered
//   before) this thread's later accesses, and to the rest of the block after
//   the next __syncthreads().
// - PostCounter: one system-scope release store, no fence before it.
//   Guarantees: every access this thread made before it, and every access
//   another thread of the block made before a __syncthreads() that this
//   thread passed before it (barriers order a CTA's threads, and a release
//   is cumulative over what precedes it in causality order), happens before
//   any access that follows the peer's acquire of the value. The callers
//   always post after such a barrier, so slot data written and slot data read
//   by the whole block are covered. (A __threadfence_system() before the
//   release store added nothing: the release already carries it.)
// - LoadOwnCounter: a relaxed load of a counter only this end writes; the
//   previous kernel on the same stream wrote it, and stream order makes that
//   write visible.
// - Watchdog reads the abort flags with volatile (uncached) loads and the
//   clock from %globaltimer (ns); Fail claims the error record with a CAS
//   on a word in device memory (KernelGuard::claim: the host never writes
//   it), fills it with plain stores and writes `code` last with a
//   system-scope release store, so a host that reads code != 0 and then
//   fences (acquire) sees every field.
#ifndef RINGO_KERNELS_CUDA_INTERNAL_DEVICE_FIFO_CUH_
#define RINGO_KERNELS_CUDA_INTERNAL_DEVICE_FIFO_CUH_

#include <cuda/atomic>
#include <cstdint>

#include "kernels/cuda/device_types.h"
#include "kernels/cuda/internal/host_shim.h"
#include "kernels/cuda/internal/kernel_params.h"

namespace ringo::kernels::gpu::internal {

// Polls between two looks at the clock and the abort flags.
inline constexpr int kPollsPerCheck = 1024;

using SystemCounter = ::cuda::atomic_ref<uint64_t, ::cuda::thread_scope_system>;

// A FIFO a network proxy serves: this launch posts nothing more to it (a
// release after the calling thread's last post, so a proxy that reads the
// mark also reads that post). Nothing for other FIFOs.
__device__ __forceinline__ void MarkLaunchEnded(const DeviceFifo& f, uint64_t launch) {
  if (f.launch_ended != nullptr) SystemCounter(*f.launch_ended).store(launch, ::cuda::memory_order_release);
}

__device__ __forceinline__ uint64_t GlobalTimerNs() {
#if defined(__CUDACC__)
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  return HostClockNs();
#endif
}

// What a wait is for, kept for the error record.
struct WaitSite {
  int peer;
  int receiving;     // 1: data from the predecessor; 0: a free slot at the successor
  int64_t step;      // loop * steps + step, as the host executor counts
  uint64_t expected;
};

// A block's shared failure flag plus the launch's deadline and abort flag.
// Trivially copyable; every thread holds one.
class Watchdog {
 public:
  // `guard` lives in the kernel's __grid_constant__ parameter (or shared
  // memory): referenced, not copied.
  __device__ Watchdog(const KernelGuard& guard, int channel, volatile int* block_failed)
      : p_(&guard), channel_(channel), block_failed_(block_failed) {}

  __device__ bool BlockFailed() const { return *block_failed_ != 0; }

  // Called every kPollsPerCheck polls of one wait; *start is 0 before the
  // first call. False: stop waiting (another thread of the block failed, or
  // this one just recorded an abort or a timeout).
  __device__ bool KeepWaiting(uint64_t* start, const uint32_t* peer_abort, const WaitSite& site,
                              uint64_t observed) const {
    if (BlockFailed()) return false;
    const uint64_t now = GlobalTimerNs();
    if (*start == 0) *start = now;
    KernelError code = KernelError::kNone;
    if (p_->abort != nullptr && *p_->abort != 0) {
      code = KernelError::kAborted;
    } else if (peer_abort != nullptr && *static_cast<const volatile uint32_t*>(peer_abort) != 0) {
      code = KernelError::kPeerAborted;
    } else if (p_->timeout_ns != 0 && now - *start > p_->timeout_ns) {
      code = KernelError::kTimeout;
    }
    if (code == KernelError::kNone) return true;
    Fail(code, site, observed, now - *start);
    return false;
  }

  // Marks the block failed and records the error if no one has yet.
  __device__ void Fail(KernelError code, const WaitSite& site, uint64_t observed, uint64_t waited_ns) const {
    *block_failed_ = 1;
    ErrorRecord* e = p_->error;
    // The claim is in device memory: an atomic among this GPU's blocks and
    // kernels (the host never writes it).
    if (e == nullptr || p_->claim == nullptr || atomicCAS(p_->claim, 0, 1) != 0) return;
    e->rank = p_->rank;
    e->peer = site.peer;
    e->channel = channel_;
    e->receiving = site.receiving;
    e->step = site.step;
    e->expected = site.expected;
    e->observed = observed;
    e->waited_ns = waited_ns;
    ::cuda::atomic_ref<int32_t, ::cuda::thread_scope_system>(e->code)
        .store(static_cast<int32_t>(code), ::cuda::memory_order_release);
  }

 private:
  const KernelGuard* p_;
  int channel_;
  volatile int* block_failed_;
};

template <::cuda::thread_scope kScope>
__device__ __forceinline__ bool WaitCounterAt(uint64_t* counter, uint64_t target, const uint32_t* peer_abort,
                                              const Watchdog& watchdog, const WaitSite& site, uint64_t* seen) {
  ::cuda::atomic_ref<uint64_t, kScope> ref(*counter);
  uint64_t start = 0;
  int polls = 0;
  for (;;) {
    const uint64_t v = ref.load(::cuda::memory_order_relaxed);
    if (v >= target) {
      ::cuda::atomic_thread_fence(::cuda::memory_order_acquire, kScope);
      *seen = v;
      return true;
    }
    if (++polls == kPollsPerCheck) {
      polls = 0;
      if (!watchdog.KeepWaiting(&start, peer_abort, site, v)) return false;
    }
  }
}

// Spins until *counter >= target and stores the value seen in *seen. False,
// with the block marked failed, when the wait gave up. Acquire on success,
// at GPU scope where `gpu_scope` (DeviceFifo::gpu_scope), else system scope.
__device__ __forceinline__ bool WaitCounter(uint64_t* counter, uint64_t target, const uint32_t* peer_abort,
                                            const Watchdog& watchdog, const WaitSite& site, uint64_t* seen,
                                            uint32_t gpu_scope) {
  if (gpu_scope != 0) {
    return WaitCounterAt<::cuda::thread_scope_device>(counter, target, peer_abort, watchdog, site, seen);
  }
  return WaitCounterAt<::cuda::thread_scope_system>(counter, target, peer_abort, watchdog, site, seen);
}

// Publishes `value` with a release (see the ordering above): GPU scope where
// `gpu_scope`, else system scope.
__device__ __forceinline__ void PostCounter(uint64_t* counter, uint64_t value, uint32_t gpu_scope) {
  if (gpu_scope != 0) {
    ::cuda::atomic_ref<uint64_t, ::cuda::thread_scope_device>(*counter).store(value, ::cuda::memory_order_release);
  } else {
    SystemCounter(*counter).store(value, ::cuda::memory_order_release);
  }
}

// A counter only its owner writes: the value the previous kernel left.
__device__ __forceinline__ uint64_t LoadOwnCounter(uint64_t* counter) {
  return counter == nullptr ? 0 : SystemCounter(*counter).load(::cuda::memory_order_relaxed);
}

}  // namespace ringo::kernels::gpu::internal

#endif  // RINGO_KERNELS_CUDA_INTERNAL_DEVICE_FIFO_CUH_
