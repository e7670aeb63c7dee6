#include "transport/fifo.h"

#include <linux/futex.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <new>

#include "base/check.h"

namespace ringo::transport {
namespace {

constexpr uint32_t kFifoMagic = 0x46474e52;  // "RNGF"
constexpr int64_t kPollSliceMs = 50;         // how often a sleeper re-checks peer and abort

uint32_t* FutexWord(std::atomic<uint64_t>* counter) {
  // The low half of the 64-bit counter (x86-64 and arm64 are little-endian).
  return reinterpret_cast<uint32_t*>(counter);
}

void FutexWait(std::atomic<uint64_t>* counter, uint32_t expected, int64_t ms) {
  timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>((ms % 1000) * 1000000)};
  syscall(SYS_futex, FutexWord(counter), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint64_t>* counter) {
  syscall(SYS_futex, FutexWord(counter), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

bool ProcessGone(int pid) { return pid > 0 && kill(pid, 0) == -1 && errno == ESRCH; }

// Publishes a counter value and wakes a sleeping peer.
void Publish(FifoCounter& c, uint64_t value) {
  c.value.store(value, std::memory_order_seq_cst);
  if (c.waiters.load(std::memory_order_seq_cst) != 0) FutexWakeAll(&c.value);
}

// The reason to stop waiting, if any.
base::Status CheckWait(const FifoHeader& h, const WaitContext& ctx, Deadline deadline, int peer_rank,
                       int peer_pid, const char* what, int64_t step) {
  if (ctx.local_abort != nullptr && ctx.local_abort->load(std::memory_order_relaxed)) {
    return base::InvalidUsage("the communicator was aborted");
  }
  auto where = [&] {
    return "rank " + std::to_string(ctx.self_rank) + " " + what + " peer rank " + std::to_string(peer_rank) +
           " (channel " + std::to_string(ctx.channel) + ", step " + std::to_string(step) + ")";
  };
  if (h.aborted.load(std::memory_order_acquire) != 0) {
    return base::RemoteError(where() + ": the peer's communicator was aborted");
  }
  if (ProcessGone(peer_pid)) {
    return base::RemoteError(where() + ": the peer process (pid " + std::to_string(peer_pid) + ") has exited");
  }
  if (Clock::now() >= deadline) {
    return base::Timeout(where() + ": no progress for " + std::to_string(ctx.timeout_ms) + " ms");
  }
  return base::OkStatus();
}

// Waits until ready(counter value) holds; returns the last value read.
template <typename Ready>
base::StatusOr<uint64_t> WaitCounter(FifoCounter& c, const FifoHeader& h, const WaitContext& ctx, int peer_rank,
                                     int peer_pid, const char* what, int64_t step, Ready ready) {
  uint64_t v = c.value.load(std::memory_order_acquire);
  if (ready(v)) return v;
  for (int i = 0; i < ctx.spin_count; ++i) {
    CpuRelax();
    v = c.value.load(std::memory_order_acquire);
    if (ready(v)) return v;
  }
  const Deadline deadline = DeadlineAfterMs(ctx.timeout_ms);  // no progress for timeout_ms
  while (true) {
    RETURN_IF_ERROR(CheckWait(h, ctx, deadline, peer_rank, peer_pid, what, step));
    c.waiters.fetch_add(1, std::memory_order_seq_cst);
    v = c.value.load(std::memory_order_seq_cst);
    if (!ready(v)) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      int64_t ms = left < 1 ? 1 : (left < kPollSliceMs ? left : kPollSliceMs);
      FutexWait(&c.value, static_cast<uint32_t>(v), ms);
      v = c.value.load(std::memory_order_acquire);
    }
    c.waiters.fetch_sub(1, std::memory_order_seq_cst);
    if (ready(v)) return v;
  }
}

class ProcessFifoMemory : public FifoMemory {
 public:
  explicit ProcessFifoMemory(size_t bytes) : base_(std::aligned_alloc(4096, bytes)) {
    RINGO_CHECK(base_ != nullptr, "out of memory allocating a FIFO");
  }
  ~ProcessFifoMemory() override { std::free(base_); }
  void* base() override { return base_; }

 private:
  void* base_;
};

}  // namespace

void InitFifo(void* memory, size_t slot_bytes, int receiver_rank, int receiver_pid) {
  std::memset(memory, 0, FifoBytes(slot_bytes));  // touches every page now, not in the first collective
  auto* h = new (memory) FifoHeader();
  h->magic = kFifoMagic;
  h->version = 1;
  h->slot_bytes = slot_bytes;
  h->sender_pid = 0;
  h->sender_rank = -1;
  h->receiver_pid = receiver_pid;
  h->receiver_rank = receiver_rank;
}

SendEnd::SendEnd(std::shared_ptr<FifoMemory> memory, int self_rank, int self_pid)
    : memory_(std::move(memory)) {
  header_ = static_cast<FifoHeader*>(memory_->base());
  RINGO_CHECK(header_->magic == kFifoMagic, "FIFO memory is not formatted");
  data_ = static_cast<char*>(memory_->base()) + kFifoDataOffset;
  slot_bytes_ = header_->slot_bytes;
  header_->sender_rank = self_rank;
  header_->sender_pid = self_pid;
  tail_ = header_->tail.value.load(std::memory_order_acquire);
  head_cache_ = header_->head.value.load(std::memory_order_acquire);
}

base::StatusOr<void*> SendEnd::Acquire(const WaitContext& ctx, int64_t step) {
  if (tail_ - head_cache_ >= kSlots) {
    const uint64_t tail = tail_;
    ASSIGN_OR_RETURN(head_cache_, WaitCounter(header_->head, *header_, ctx, header_->receiver_rank,
                                              header_->receiver_pid, "sending to", step,
                                              [tail](uint64_t head) { return tail - head < kSlots; }));
  }
  return static_cast<void*>(data_ + (tail_ % kSlots) * slot_bytes_);
}

void SendEnd::Post(size_t bytes) {
  header_->sizes[tail_ % kSlots] = bytes;
  ++tail_;
  Publish(header_->tail, tail_);
}

RecvEnd::RecvEnd(std::shared_ptr<FifoMemory> memory, int self_rank, int self_pid)
    : memory_(std::move(memory)) {
  header_ = static_cast<FifoHeader*>(memory_->base());
  RINGO_CHECK(header_->magic == kFifoMagic, "FIFO memory is not formatted");
  data_ = static_cast<char*>(memory_->base()) + kFifoDataOffset;
  slot_bytes_ = header_->slot_bytes;
  header_->receiver_rank = self_rank;
  header_->receiver_pid = self_pid;
  head_ = header_->head.value.load(std::memory_order_acquire);
  tail_cache_ = header_->tail.value.load(std::memory_order_acquire);
}

base::StatusOr<const void*> RecvEnd::Acquire(const WaitContext& ctx, int64_t step, size_t* bytes) {
  if (tail_cache_ <= head_) {
    const uint64_t head = head_;
    ASSIGN_OR_RETURN(tail_cache_, WaitCounter(header_->tail, *header_, ctx, header_->sender_rank,
                                              header_->sender_pid, "receiving from", step,
                                              [head](uint64_t tail) { return tail > head; }));
  }
  *bytes = header_->sizes[head_ % kSlots];
  return static_cast<const void*>(data_ + (head_ % kSlots) * slot_bytes_);
}

void RecvEnd::Release() {
  ++head_;
  Publish(header_->head, head_);
}

void AbortFifo(FifoHeader* header) {
  header->aborted.store(1, std::memory_order_seq_cst);
  WakeFifo(header);
}

void WakeFifo(FifoHeader* header) {
  FutexWakeAll(&header->tail.value);
  FutexWakeAll(&header->head.value);
}

std::shared_ptr<FifoMemory> AllocateProcessFifo(size_t slot_bytes, int receiver_rank) {
  auto memory = std::make_shared<ProcessFifoMemory>(FifoBytes(slot_bytes));
  InitFifo(memory->base(), slot_bytes, receiver_rank, getpid());
  return memory;
}

}  // namespace ringo::transport
