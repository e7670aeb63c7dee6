// The ring primitives (schedule.h's Prim) over one channel, one class per
// protocol with the same methods, so the ring loop (kernels/ring_loop.h,
// which the host executor runs too) is written once:
//
//   Copy(src, dst, n)                      dst = src (nranks == 1)
//   Send(src, n, step)                     out slot = src
//   CopySend(src, dst, n, step)            out slot = src; dst = src (dst null: in place)
//   RecvReduceSend(src, n, step)           out slot = in slot (+) src
//   RecvReduceCopySend(src, dst, n, step)  dst = out slot = in slot (+) src (final)
//   RecvReduceCopy(src, dst, n, step)      dst = in slot (+) src (final)
//   RecvCopySend(dst, n, step)             dst = out slot = in slot
//   Recv(dst, n, step)                     dst = in slot
//
// Every method is called by all kRingThreads threads of the block with the
// same arguments, and consumes one step of each connector it uses even when
// n is 0 (as the host executor does). After a failure (recorded by the
// watchdog) every method returns at once and failed() is true for every
// thread. Step counters start from the connector counters this end owns.
#ifndef RINGO_KERNELS_CUDA_INTERNAL_PRIMITIVES_CUH_
#define RINGO_KERNELS_CUDA_INTERNAL_PRIMITIVES_CUH_

#include <cstdint>

#include "kernels/cuda/device_types.h"
#include "kernels/cuda/internal/device_fifo.cuh"
#include "kernels/cuda/internal/kernel_params.h"
#include "kernels/cuda/internal/reduce_copy.h"
#include "kernels/cuda/internal/slot_shift.h"
#include "kernels/reduce_op.h"

namespace ringo::kernels::gpu::internal {

// A network proxy moves a slot's SlotSpan (transport/fifo/layout.h): the
// size word's layout is one.
static_assert(kSlotShiftBit == transport::kSlotShiftBit, "the shift bits of a slot's size word");

struct ProtoSimple {};
struct ProtoLL {};

// Per-block state in shared memory.
struct BlockState {
  uint64_t recv_step;
  uint64_t send_step;
  int failed;
  uint32_t recv_shift;  // Simple: where the slot being received starts (slot_shift.h)
};

// A premul-sum's scalar: from device memory when the caller gave a pointer
// (read when the kernel starts, after the work before it on the stream),
// else the bits it passed.
template <typename T>
__device__ __forceinline__ uint64_t ScalarBits(const CollArgs& call) {
  if (call.scalar_ptr == nullptr) return call.scalar;
  const unsigned char* s = static_cast<const unsigned char*>(call.scalar_ptr);
  uint64_t v = 0;
  for (unsigned i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(s[i]) << (8 * i);
  return v;
}

// What both protocols share: the connectors, the step counters, the functor.
template <typename T, base::RedOp kOp>
class PrimsBase {
 public:
  __device__ bool failed() const { return failed_; }

  __device__ void Copy(const T* src, T* dst, int64_t n) {
    if (dst != nullptr) ReduceCopy<T, kOp, Mode::kCopy>(f_, threadIdx.x, kRingThreads, src, nullptr, dst, nullptr, n);
  }

 protected:
  // Reads this end's counters (thread 0) and shares them with the block.
  __device__ PrimsBase(const RingKernelParams& p, const DeviceChannel& ch, BlockState* state,
                       int channel)
      : recv_(ch.recv),
        send_(ch.send),
        state_(state),
        watchdog_(p.guard, channel, &state->failed),
        f_(ReduceFunc<T, kOp>::Make(OpParams(p.ring.nranks, ScalarBits<T>(p.ring.call)))) {
    if (threadIdx.x == 0) {
      state->recv_step = LoadOwnCounter(recv_.head);
      state->send_step = LoadOwnCounter(send_.tail);
      state->failed = 0;
      state->recv_shift = 0;
    }
    __syncthreads();
    recv_step_ = state->recv_step;
    send_step_ = state->send_step;
  }

  // Thread 0: waits until the successor has freed slot send_step_ (tail - head < kFifoSlots).
  __device__ bool WaitSendSlot(int64_t step) {
    if (send_step_ < static_cast<uint64_t>(kFifoSlots)) return true;
    const uint64_t target = send_step_ + 1 - kFifoSlots;
    if (head_seen_ >= target) return true;
    return WaitCounter(send_.head, target, send_.aborted, watchdog_, WaitSite{send_.peer_rank, 0, step, target},
                       &head_seen_, send_.gpu_scope);
  }

  // All threads, after a barrier: whether a thread of the block failed.
  __device__ bool CheckFailed() {
    failed_ = watchdog_.BlockFailed();
    return failed_;
  }

  // In the block's shared copy of its channel (ring.cuh's LoadChannel):
  // referenced, not copied to registers.
  const DeviceFifo& recv_;
  const DeviceFifo& send_;
  BlockState* state_;
  Watchdog watchdog_;
  ReduceFunc<T, kOp> f_;
  uint64_t recv_step_ = 0;  // steps consumed from the predecessor (head)
  uint64_t send_step_ = 0;  // steps posted to the successor (tail)
  uint64_t head_seen_ = 0;  // thread 0: the successor's head last seen
  uint64_t tail_seen_ = 0;  // thread 0: the predecessor's tail last seen
  bool failed_ = false;
};

template <typename T, base::RedOp kOp, typename Proto>
class Primitives;

// The primitives as one table, in terms of a protocol's Run<kRecv, kSend, kMode>(src, dst, n, step).
#define RINGO_RING_PRIMITIVES                                                                         \
  __device__ void Send(const T* src, int64_t n, int64_t step) {                                      \
    this->template Run<false, true, kSendMode<T, kOp>>(src, nullptr, n, step);                        \
  }                                                                                                   \
  __device__ void CopySend(const T* src, T* dst, int64_t n, int64_t step) {                          \
    this->template Run<false, true, Mode::kCopy>(src, dst, n, step);                                  \
  }                                                                                                   \
  __device__ void RecvReduceSend(const T* src, int64_t n, int64_t step) {                            \
    this->template Run<true, true, Mode::kReduce>(src, nullptr, n, step);                             \
  }                                                                                                   \
  __device__ void RecvReduceCopySend(const T* src, T* dst, int64_t n, int64_t step) {                \
    this->template Run<true, true, Mode::kReduceFinal>(src, dst, n, step);                            \
  }                                                                                                   \
  __device__ void RecvReduceCopy(const T* src, T* dst, int64_t n, int64_t step) {                    \
    this->template Run<true, false, Mode::kReduceFinal>(src, dst, n, step);                           \
  }                                                                                                   \
  __device__ void RecvCopySend(T* dst, int64_t n, int64_t step) {                                    \
    this->template Run<true, true, Mode::kCopy>(nullptr, dst, n, step);                               \
  }                                                                                                   \
  __device__ void Recv(T* dst, int64_t n, int64_t step) { this->template Run<true, false, Mode::kCopy>(nullptr, dst, n, step); }

// Simple: a slot is written by the whole block, then (barrier) thread 0
// writes meta[slot].bytes (the chunk's bytes and the shift it starts at,
// slot_shift.h) and release-stores tail + 1 at system scope. The receiver's
// thread 0 waits for tail (acquire), checks meta[slot].bytes and takes the shift,
// then (barrier) the block reads the slot with L1-bypassing loads; after a
// second barrier thread 0 release-stores head + 1, which lets the sender
// reuse it. The data of a step starts at its shift in the slot, so that
// buffers which are not 16-byte aligned still move in 16-byte vectors when
// every rank's buffers share their offset modulo 16.
template <typename T, base::RedOp kOp>
class Primitives<T, kOp, ProtoSimple> : public PrimsBase<T, kOp> {
 public:
  __device__ Primitives(const RingKernelParams& p, const DeviceChannel& ch, BlockState* state, int channel)
      : PrimsBase<T, kOp>(p, ch, state, channel) {}

  RINGO_RING_PRIMITIVES

  __device__ void Finish() {}

  // src: this rank's input (null when the primitive does not read it); dst:
  // this rank's output (null when not written).
  template <bool kRecv, bool kSend, Mode kMode>
  __device__ void Run(const T* src, T* dst, int64_t n, int64_t step) {
    if (this->failed_) return;
    const uint64_t bytes = static_cast<uint64_t>(n) * sizeof(T);
    if (threadIdx.x == 0) {
      bool ok = true;
      if constexpr (kRecv) ok = WaitRecvSlot(bytes, step);
      if constexpr (kSend) ok = ok && this->WaitSendSlot(step);
    }
    __syncthreads();
    if (this->CheckFailed()) return;

    const uint32_t out_shift = this->send_.meta != nullptr ? SendShift(src, dst) : 0;
    const T* in = kRecv ? SlotAt(this->recv_, this->recv_step_, this->state_->recv_shift) : nullptr;
    T* out = kSend ? SlotAt(this->send_, this->send_step_, out_shift) : nullptr;
    const T* a = kRecv ? in : src;
    const T* b = kRecv ? src : nullptr;
    T* d0 = kSend ? out : dst;
    T* d1 = kSend ? dst : nullptr;
    if (d0 != nullptr) ReduceCopy<T, kOp, kMode>(this->f_, threadIdx.x, kRingThreads, a, b, d0, d1, n);
    __syncthreads();

    if (threadIdx.x == 0) {
      if constexpr (kSend) {
        if (this->send_.meta != nullptr) {
          this->send_.meta[this->send_step_ % kFifoSlots].bytes = EncodeSlotSize(bytes, out_shift);
        }
        PostCounter(this->send_.tail, this->send_step_ + 1, this->send_.gpu_scope);
      }
      if constexpr (kRecv) PostCounter(this->recv_.head, this->recv_step_ + 1, this->recv_.gpu_scope);
    }
    this->recv_step_ += kRecv ? 1 : 0;
    this->send_step_ += kSend ? 1 : 0;
  }

 private:
  // The slot of `step`, `shift` bytes in (a multiple of sizeof(T): buffers
  // are aligned to their element size).
  __device__ static T* SlotAt(const DeviceFifo& fifo, uint64_t step, uint32_t shift) {
    return reinterpret_cast<T*>(static_cast<char*>(fifo.slots) +
                                (step % kFifoSlots) * fifo.slot_stride + shift);
  }

  // Thread 0: waits until the predecessor has posted slot recv_step_, checks
  // that it holds `bytes` and shares its shift with the block (state_).
  __device__ bool WaitRecvSlot(uint64_t bytes, int64_t step) {
    const DeviceFifo& r = this->recv_;
    const uint64_t target = this->recv_step_ + 1;
    const WaitSite site{r.peer_rank, 1, step, target};
    if (this->tail_seen_ < target &&
        !WaitCounter(r.tail, target, r.aborted, this->watchdog_, site, &this->tail_seen_, r.gpu_scope)) {
      return false;
    }
    uint32_t shift = 0;
    if (r.meta != nullptr) {
      const uint64_t word =
          *static_cast<volatile uint64_t*>(&r.meta[this->recv_step_ % kFifoSlots].bytes);
      if (SlotSizeBytes(word) != bytes) {
        this->watchdog_.Fail(KernelError::kSizeMismatch, WaitSite{r.peer_rank, 1, step, bytes},
                             SlotSizeBytes(word), 0);
        return false;
      }
      shift = SlotSizeShift(word);
    }
    this->state_->recv_shift = shift;
    return true;
  }
};

// LL: each 16-byte line carries two (4 data bytes, 4 flag bytes) pairs,
// flag = low 32 bits of (step + 1), written with one st.volatile.v4: the
// receiver polls each line with ld.volatile.v4 until both flags match, so
// data and its validity arrive in the same 8-byte atomic unit and no tail
// counter is needed (no fence either). Flow control still uses head: the
// sender's thread 0 waits for a free slot (acquire) before the block writes;
// the receiver's thread 0 release-stores head + 1 after the block has read
// the whole slot (barrier). At the end the sender stores its tail counter, so
// the counters stay equal to the steps taken whatever the protocol.
template <typename T, base::RedOp kOp>
class Primitives<T, kOp, ProtoLL> : public PrimsBase<T, kOp> {
 public:
  __device__ Primitives(const RingKernelParams& p, const DeviceChannel& ch, BlockState* state, int channel)
      : PrimsBase<T, kOp>(p, ch, state, channel) {}

  RINGO_RING_PRIMITIVES

  __device__ void Finish() {
    if (threadIdx.x == 0 && !this->failed_ && this->send_.tail != nullptr) {
      PostCounter(this->send_.tail, this->send_step_, this->send_.gpu_scope);
    }
  }

  template <bool kRecv, bool kSend, Mode kMode>
  __device__ void Run(const T* src, T* dst, int64_t n, int64_t step) {
    if (this->failed_) return;
    if constexpr (kSend) {
      if (threadIdx.x == 0) this->WaitSendSlot(step);
      __syncthreads();
      if (this->CheckFailed()) return;
    }
    constexpr int kE = kLLDataBytesPerLine / static_cast<int>(sizeof(T));
    constexpr bool kTwo = kModeReads2<kMode>;
    const uint32_t recv_flag = static_cast<uint32_t>(this->recv_step_ + 1);
    const uint32_t send_flag = static_cast<uint32_t>(this->send_step_ + 1);
    const uint4* in = kRecv ? LinesAt(this->recv_, this->recv_step_) : nullptr;
    uint4* out = kSend ? LinesAt(this->send_, this->send_step_) : nullptr;
    const int64_t lines = (n * static_cast<int64_t>(sizeof(T)) + kLLDataBytesPerLine - 1) / kLLDataBytesPerLine;
    for (int64_t l = threadIdx.x; l < lines; l += kRingThreads) {
      const int64_t first = l * kE;
      const int cnt = n - first < kE ? static_cast<int>(n - first) : kE;
      Line a;
      Line b;
      if constexpr (kRecv) {
        if (!ReadLine(in + l, recv_flag, step, &a.u)) break;
      } else {
        a.Load(src + first, cnt);
      }
      if constexpr (kTwo) b.Load(src + first, cnt);
      Line o;
#pragma unroll
      for (int j = 0; j < kE; ++j) o.e[j] = Elem<T, kOp, kMode>(this->f_, a.e[j], kTwo ? b.e[j] : T{});
      if constexpr (kSend) WriteLine(out + l, o.u, send_flag);
      if (dst != nullptr) o.Store(dst + first, cnt);
    }
    __syncthreads();
    if (this->CheckFailed()) return;
    if constexpr (kRecv) {
      if (threadIdx.x == 0) PostCounter(this->recv_.head, this->recv_step_ + 1, this->recv_.gpu_scope);
    }
    this->recv_step_ += kRecv ? 1 : 0;
    this->send_step_ += kSend ? 1 : 0;
  }

 private:
  // 8 data bytes as elements; partial lines are zero-padded.
  union Line {
    uint64_t u;
    T e[kLLDataBytesPerLine / sizeof(T)];
    __device__ void Load(const T* p, int cnt) {
      u = 0;
#pragma unroll
      for (int j = 0; j < kLLDataBytesPerLine / static_cast<int>(sizeof(T)); ++j) {
        if (j < cnt) e[j] = LoadCg(p + j);
      }
    }
    __device__ void Store(T* p, int cnt) const {
#pragma unroll
      for (int j = 0; j < kLLDataBytesPerLine / static_cast<int>(sizeof(T)); ++j) {
        if (j < cnt) p[j] = e[j];
      }
    }
  };

  __device__ static uint4* LinesAt(const DeviceFifo& fifo, uint64_t step) {
    return reinterpret_cast<uint4*>(static_cast<char*>(fifo.ll_slots) + (step % kFifoSlots) * fifo.ll_slot_bytes);
  }

  __device__ static void WriteLine(uint4* line, uint64_t data, uint32_t flag) {
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(line),
                 "r"(static_cast<uint32_t>(data)), "r"(flag), "r"(static_cast<uint32_t>(data >> 32)), "r"(flag)
                 : "memory");
  }

  // Polls a line until both flags equal `flag`. False when the wait gave up.
  __device__ bool ReadLine(const uint4* line, uint32_t flag, int64_t step, uint64_t* data) {
    uint64_t start = 0;
    int polls = 0;
    for (;;) {
      uint32_t d0, f0, d1, f1;
      asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(d0), "=r"(f0), "=r"(d1), "=r"(f1)
                   : "l"(line)
                   : "memory");
      if (f0 == flag && f1 == flag) {
        *data = static_cast<uint64_t>(d0) | (static_cast<uint64_t>(d1) << 32);
        return true;
      }
      if (++polls == kPollsPerCheck) {
        polls = 0;
        const WaitSite site{this->recv_.peer_rank, 1, step, flag};
        if (!this->watchdog_.KeepWaiting(&start, this->recv_.aborted, site, f0 != flag ? f0 : f1)) return false;
      }
    }
  }
};

#undef RINGO_RING_PRIMITIVES

}  // namespace ringo::kernels::gpu::internal

#endif  // RINGO_KERNELS_CUDA_INTERNAL_PRIMITIVES_CUH_
