#include "transport/fifo.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "base/check.h"

namespace ringo::transport {
namespace {

constexpr uint32_t kFifoMagic = 0x46474e52;  // "RNGF"
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
    const PeerRef peer{&header_->aborted, header_->receiver_rank, header_->receiver_pid, "sending to", step};
    ASSIGN_OR_RETURN(head_cache_, WaitAtLeast(header_->head, tail_ - kSlots + 1, peer, ctx));
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
    const PeerRef peer{&header_->aborted, header_->sender_rank, header_->sender_pid, "receiving from", step};
    ASSIGN_OR_RETURN(tail_cache_, WaitAtLeast(header_->tail, head_ + 1, peer, ctx));
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
  Wake(header->tail);
  Wake(header->head);
}

std::shared_ptr<FifoMemory> AllocateProcessFifo(size_t slot_bytes, int receiver_rank) {
  auto memory = std::make_shared<ProcessFifoMemory>(FifoBytes(slot_bytes));
  InitFifo(memory->base(), slot_bytes, receiver_rank, getpid());
  return memory;
}

}  // namespace ringo::transport
