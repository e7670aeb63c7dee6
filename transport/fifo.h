// The connector FIFO of DESIGN.md: kSlots slots of slot_bytes, a `tail` the
// sender advances after filling a slot and a `head` the receiver advances
// after consuming one. The sender may fill slot tail % kSlots while
// tail - head < kSlots. The memory (header + slots) lives on the receiver's
// side: POSIX shared memory across processes, plain memory within one.
//
// Ordering: slot contents and sizes[] are written before the tail is
// published and read after the tail wait returns (release/acquire, see
// counter.h); the same for head. Waits are counter.h's: spin, yield, futex,
// with a deadline, the local abort flag, the peer's flag and liveness.
#ifndef RINGO_TRANSPORT_FIFO_H_
#define RINGO_TRANSPORT_FIFO_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "transport/counter.h"

namespace ringo::transport {

inline constexpr int kSlots = 8;
inline constexpr size_t kFifoDataOffset = 4096;

using FifoCounter = SharedCounter;

struct FifoHeader {
  uint32_t magic;
  uint32_t version;
  uint64_t slot_bytes;
  int32_t sender_pid;
  int32_t receiver_pid;
  int32_t sender_rank;
  int32_t receiver_rank;
  std::atomic<uint32_t> aborted{0};  // set by either side's ringoCommAbort
  FifoCounter tail;                  // advanced by the sender
  FifoCounter head;                  // advanced by the receiver
  alignas(64) uint64_t sizes[kSlots];
};
static_assert(sizeof(FifoHeader) <= kFifoDataOffset, "header fits before the slots");

inline size_t FifoBytes(size_t slot_bytes) { return kFifoDataOffset + kSlots * slot_bytes; }

// Formats fresh FIFO memory (receiver side) and touches every page.
void InitFifo(void* memory, size_t slot_bytes, int receiver_rank, int receiver_pid);

// Releases the memory a FIFO lives in when the last end goes.
class FifoMemory {
 public:
  virtual ~FifoMemory() = default;
  virtual void* base() = 0;
};

// The sending end. Owned by one thread.
class SendEnd {
 public:
  SendEnd(std::shared_ptr<FifoMemory> memory, int self_rank, int self_pid);
  // Waits for a free slot; returns its memory (slot_bytes long).
  base::StatusOr<void*> Acquire(const WaitContext& ctx, int64_t step);
  // Publishes the acquired slot holding `bytes`.
  void Post(size_t bytes);
  FifoHeader* header() { return header_; }
  size_t slot_bytes() const { return slot_bytes_; }

 private:
  std::shared_ptr<FifoMemory> memory_;
  FifoHeader* header_;
  char* data_;
  size_t slot_bytes_;
  uint64_t tail_ = 0;         // next slot to fill
  uint64_t head_cache_ = 0;   // last head seen
};

// The receiving end. Owned by one thread.
class RecvEnd {
 public:
  RecvEnd(std::shared_ptr<FifoMemory> memory, int self_rank, int self_pid);
  // Waits for a filled slot; returns its memory and size.
  base::StatusOr<const void*> Acquire(const WaitContext& ctx, int64_t step, size_t* bytes);
  // Frees the acquired slot for the sender.
  void Release();
  FifoHeader* header() { return header_; }
  size_t slot_bytes() const { return slot_bytes_; }

 private:
  std::shared_ptr<FifoMemory> memory_;
  FifoHeader* header_;
  char* data_;
  size_t slot_bytes_;
  uint64_t head_ = 0;
  uint64_t tail_cache_ = 0;
};

// Marks the FIFO aborted and wakes every waiter on it (ringoCommAbort).
void AbortFifo(FifoHeader* header);
// Wakes waiters so they re-check the local abort flag.
void WakeFifo(FifoHeader* header);

// FIFO memory in this process (ranks that are threads of one process).
std::shared_ptr<FifoMemory> AllocateProcessFifo(size_t slot_bytes, int receiver_rank);

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_FIFO_H_
