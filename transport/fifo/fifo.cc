#include "transport/fifo/fifo.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "base/check.h"

namespace ringo::transport {
namespace {

constexpr uint32_t kFifoMagic = 0x46474e52;  // "RNGF"
constexpr uint32_t kFifoVersion = 6;

// After a publish (seq_cst): a proxy that declared itself asleep (seq_cst)
// before checking the counter either saw the publish or is woken here.
}  // namespace

void WakeProxy(FifoHeader* h) {
  if (h->proxy_sleeping.load(std::memory_order_seq_cst) == 0) return;
  const uint64_t one = 1;
  if (h->proxy_wake_fd >= 0) (void)!::write(h->proxy_wake_fd, &one, sizeof(one));
}

void MarkDeviceLaunch(FifoHeader* h, uint64_t launch) {
  h->device_launched.store(launch, std::memory_order_seq_cst);
  WakeProxy(h);
}

bool DeviceLaunchRunning(const FifoHeader* h) {
  const uint64_t ended = __atomic_load_n(&h->device_ended, __ATOMIC_ACQUIRE);
  return h->device_launched.load(std::memory_order_seq_cst) > ended;  // seq_cst: against the sleep's declaration
}

namespace {
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

// Slot 0's prefix: after the header, or where the memory keeps the slots apart.
char* SlotsOf(FifoMemory& memory) {
  char* apart = memory.slots_apart();
  return apart != nullptr ? apart : static_cast<char*>(memory.base()) + kFifoDataOffset;
}

}  // namespace

void FormatFifoHeader(FifoHeader* header, const FifoGeometry& geometry, int receiver_rank, const ProcessId& receiver) {
  auto* h = new (header) FifoHeader();
  h->magic = kFifoMagic;
  h->version = kFifoVersion;
  h->slot_bytes = geometry.slot_bytes;
  h->slot_prefix = geometry.slot_prefix;
  h->slot_stride = geometry.stride();
  h->ll_slot_bytes = geometry.ll_slot_bytes;
  h->sender_rank = -1;
  h->receiver_rank = receiver_rank;
  h->receiver_process = receiver;
}

void InitFifo(void* memory, size_t slot_bytes, int receiver_rank, const ProcessId& receiver, size_t slot_prefix) {
  std::memset(memory, 0, FifoBytes(slot_bytes, slot_prefix));  // touches every page now, not in the first collective
  FormatFifoHeader(static_cast<FifoHeader*>(memory), FifoGeometry{slot_bytes, slot_prefix, 0}, receiver_rank,
                   receiver);
}

base::Status CheckFifo(const void* memory, size_t slot_bytes) {
  const auto* h = static_cast<const FifoHeader*>(memory);
  if (h->magic != kFifoMagic) return base::RemoteError("the peer's FIFO memory is not a Ringo FIFO (bad magic)");
  if (h->version != kFifoVersion) {
    return base::RemoteError("the peer's FIFO has layout version " + std::to_string(h->version) + ", this library " +
                             std::to_string(kFifoVersion));
  }
  if (h->slot_bytes != slot_bytes || h->slot_prefix != 0 || h->slot_stride != slot_bytes || h->ll_slot_bytes != 0) {
    return base::RemoteError("the peer's FIFO has " + std::to_string(h->slot_bytes) + "-byte slots (stride " +
                             std::to_string(h->slot_stride) + "), expected " + std::to_string(slot_bytes));
  }
  return base::OkStatus();
}

SendEnd::SendEnd(std::shared_ptr<FifoMemory> memory, int self_rank, const ProcessId& self)
    : memory_(std::move(memory)) {
  header_ = static_cast<FifoHeader*>(memory_->base());
  RINGO_CHECK(header_->magic == kFifoMagic, "FIFO memory is not formatted (CheckFifo first)");
  data_ = SlotsOf(*memory_) + header_->slot_prefix;
  slot_bytes_ = header_->slot_bytes;
  stride_ = header_->slot_stride;
  can_inline_ = header_->slot_prefix == 0;
  header_->sender_rank = self_rank;
  header_->sender_process = self;
  tail_ = header_->tail.value.load(std::memory_order_acquire);
  head_cache_ = header_->head.value.load(std::memory_order_acquire);
}

void* SendEnd::Slot(size_t bytes) {
  acquired_inline_ = can_inline_ && bytes <= kInlineBytes;
  if (acquired_inline_) return header_->meta[tail_ % kSlots].inline_data;
  return data_ + (tail_ % kSlots) * stride_;
}

base::StatusOr<void*> SendEnd::Acquire(const WaitContext& ctx, int64_t step, size_t bytes) {
  if (tail_ - head_cache_ >= kSlots) {
    const PeerRef peer{&header_->receiver_aborted, header_->receiver_rank, header_->receiver_process, "sending to",
                       step, &header_->receiver_notice};
    ASSIGN_OR_RETURN(head_cache_, WaitAtLeast(header_->head, tail_ - kSlots + 1, peer, ctx));
  }
  return Slot(bytes);
}

void* SendEnd::TryAcquire(size_t bytes) {
  if (tail_ - head_cache_ >= kSlots) {
    head_cache_ = header_->head.value.load(std::memory_order_acquire);
    if (tail_ - head_cache_ >= kSlots) return nullptr;
  }
  return Slot(bytes);
}

bool SendEnd::Released(uint64_t posted) {
  if (head_cache_ >= posted) return true;
  head_cache_ = header_->head.value.load(std::memory_order_acquire);
  return head_cache_ >= posted;
}

base::Status SendEnd::WaitReleased(uint64_t posted, const WaitContext& ctx, int64_t step) {
  if (head_cache_ >= posted) return base::OkStatus();
  const PeerRef peer{&header_->receiver_aborted, header_->receiver_rank, header_->receiver_process, "sending to",
                     step, &header_->receiver_notice};
  ASSIGN_OR_RETURN(head_cache_, WaitAtLeast(header_->head, posted, peer, ctx));
  return base::OkStatus();
}

void SendEnd::Post(size_t bytes, const CallSignature& sig) {
  SlotMeta& m = header_->meta[tail_ % kSlots];
  RINGO_CHECK(!acquired_inline_ || bytes <= kInlineBytes, "an inline slot posted with more than it holds");
  m.bytes = acquired_inline_ ? (bytes | kInlineSlot) : bytes;
  m.sig = sig;
  acquired_inline_ = false;
  ++tail_;
  __atomic_store_n(&m.posted, tail_, __ATOMIC_RELEASE);  // a polling receiver takes the slot from here
  Publish(header_->tail, tail_);
  WakeProxy(header_);
}

void SendEnd::Abort(const base::Status& why, int self_rank, uint64_t seq) {
  WriteFaultNotice(header_->sender_notice, why, self_rank, seq);
  header_->sender_aborted.store(1, std::memory_order_seq_cst);
  WakeFifo(header_);
}

RecvEnd::RecvEnd(std::shared_ptr<FifoMemory> memory, int self_rank, const ProcessId& self)
    : memory_(std::move(memory)) {
  header_ = static_cast<FifoHeader*>(memory_->base());
  RINGO_CHECK(header_->magic == kFifoMagic, "FIFO memory is not formatted (CheckFifo first)");
  data_ = SlotsOf(*memory_) + header_->slot_prefix;
  slot_bytes_ = header_->slot_bytes;
  stride_ = header_->slot_stride;
  header_->receiver_rank = self_rank;
  header_->receiver_process = self;
  head_ = header_->head.value.load(std::memory_order_acquire);
  tail_cache_ = header_->tail.value.load(std::memory_order_acquire);
}

bool RecvEnd::Filled() {
  // The slot's posted mark alone: every host sender and proxy writes it,
  // and polling the tail too would pull the tail's line here at every
  // poll, so that each publish of it waits for that line to come back.
  // Blocking waits sleep on the tail (Acquire).
  if (tail_cache_ > head_) return true;
  return __atomic_load_n(&header_->meta[head_ % kSlots].posted, __ATOMIC_ACQUIRE) == head_ + 1;
}

base::StatusOr<const void*> RecvEnd::Take(size_t* bytes, CallSignature* sig, const PeerRef* peer,
                                          const WaitContext* ctx) {
  const SlotMeta& m = header_->meta[head_ % kSlots];
  const uint64_t raw = m.bytes;
  const bool in_line = (raw & kInlineSlot) != 0;
  *bytes = raw & ~kInlineSlot;
  if (sig != nullptr) *sig = m.sig;
  const size_t room = in_line ? kInlineBytes : slot_bytes_;
  if (*bytes > room) {
    const std::string where = peer != nullptr ? DescribeWait(*peer, *ctx)
                                              : "rank " + std::to_string(header_->receiver_rank) +
                                                    " receiving from peer rank " + std::to_string(header_->sender_rank);
    return base::RemoteError(where + ": the peer posted " + std::to_string(*bytes) + " bytes into a " +
                             std::to_string(room) + "-byte " + (in_line ? "inline " : "") + "slot")
        .WithOrigin(header_->sender_rank, where + ": an oversized slot");
  }
  if (in_line) return static_cast<const void*>(m.inline_data);
  return static_cast<const void*>(data_ + (head_ % kSlots) * stride_);
}

base::StatusOr<const void*> RecvEnd::Acquire(const WaitContext& ctx, int64_t step, size_t* bytes,
                                             CallSignature* sig) {
  const PeerRef peer{&header_->sender_aborted, header_->sender_rank, header_->sender_process, "receiving from",
                     step, &header_->sender_notice};
  // A filled slot still goes through the peer's abort flag (WaitAtLeast's
  // check): a sender that failed after posting is heard at this step.
  if (!Filled() || header_->sender_aborted.load(std::memory_order_acquire) != 0) {
    ASSIGN_OR_RETURN(tail_cache_, WaitAtLeast(header_->tail, head_ + 1, peer, ctx));
  }
  return Take(bytes, sig, &peer, &ctx);
}

base::StatusOr<const void*> RecvEnd::TryAcquire(size_t* bytes, CallSignature* sig) {
  if (!Filled()) return static_cast<const void*>(nullptr);
  return Take(bytes, sig, nullptr, nullptr);
}

void RecvEnd::Release() {
  ++head_;
  Publish(header_->head, head_);
  WakeProxy(header_);
}

void RecvEnd::Abort(const base::Status& why, int self_rank, uint64_t seq) {
  WriteFaultNotice(header_->receiver_notice, why, self_rank, seq);
  header_->receiver_aborted.store(1, std::memory_order_seq_cst);
  WakeFifo(header_);
}

void WakeFifo(FifoHeader* header) {
  Wake(header->tail);
  Wake(header->head);
}

std::shared_ptr<FifoMemory> AllocateProcessFifo(size_t slot_bytes, int receiver_rank, size_t slot_prefix) {
  auto memory = std::make_shared<ProcessFifoMemory>(FifoBytes(slot_bytes, slot_prefix));
  InitFifo(memory->base(), slot_bytes, receiver_rank, SelfProcessId(), slot_prefix);
  return memory;
}

}  // namespace ringo::transport
