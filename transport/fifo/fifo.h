// The host ends of the connector FIFO (fifo/layout.h: kSlots slots of
// slot_bytes, a `tail` the sender advances after filling a slot and a `head`
// the receiver advances after consuming one; the sender may fill slot
// tail % kSlots while tail - head < kSlots). The memory (header + slots)
// lives on the receiver's side: POSIX shared memory across processes, plain
// memory within one.
//
// Ordering: slot contents and slot metadata (size and the collective's
// signature) are written before the slot's `posted` mark and then the tail
// are published (release), and read after either is seen (acquire, see
// counter.h): a receiver polls the slot's metadata line, where every host
// sender (and proxy) marks it, and a blocking wait sleeps on the tail; the
// same for head. Polling the tail as well would pull its line to the
// receiver at every poll, and the sender's next publish would wait to get
// it back. Payloads of at most kInlineBytes travel inside the metadata
// line: a small message is one cache line, where it was three.
// Waits are counter.h's: spin, yield, futex, with a deadline, the local abort
// flag, the peer's flag (and fault notice) and liveness. Each end has its own
// abort flag and fault notice (peer_state.h), written by that end only.
//
// Everything in the header is also written by the peer, which may be buggy
// or hostile: an end validates what it reads (a slot size beyond the slot is
// an error naming the peer, never a read past the slot).
#ifndef RINGO_TRANSPORT_FIFO_FIFO_H_
#define RINGO_TRANSPORT_FIFO_FIFO_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "transport/fifo/layout.h"
#include "transport/fifo/counter.h"
#include "transport/peer_state.h"
#include "transport/signature.h"

namespace ringo::transport {

inline size_t FifoBytes(size_t slot_bytes, size_t slot_prefix = 0) {
  return FifoGeometry{slot_bytes, slot_prefix, 0}.Bytes();
}

// Writes a fresh header for `geometry` at `header` (the receiver's side),
// every other field zero: the one way a FIFO of any kind is formatted (GPU
// FIFOs format a copy in host memory and upload it).
void FormatFifoHeader(FifoHeader* header, const FifoGeometry& geometry, int receiver_rank, const ProcessId& receiver);

// Formats fresh FIFO memory (receiver side) and touches every page.
void InitFifo(void* memory, size_t slot_bytes, int receiver_rank, const ProcessId& receiver, size_t slot_prefix = 0);
// Whether `memory` (FifoBytes(slot_bytes) long, mapped from a peer) holds a
// formatted FIFO of that slot size; says what is wrong otherwise.
base::Status CheckFifo(const void* memory, size_t slot_bytes);

// Releases the memory a FIFO lives in when the last end goes.
class FifoMemory {
 public:
  virtual ~FifoMemory() = default;
  virtual void* base() = 0;
  // Where the Simple slots are when they are kept apart from the header
  // (slot i's prefix at slots_apart() + i * slot_stride, its data
  // slot_prefix further): the device memory of a GPUDirect edge
  // (net/gpudirect.h), or process memory in its place. Null: after the
  // header, as fifo/layout.h lays them out.
  virtual char* slots_apart() { return nullptr; }
  // Whether slots_apart() is device memory (a proxy registers it as such).
  virtual bool slots_on_device() const { return false; }
  // Called by a proxy after the network wrote a slot apart and before it
  // publishes the slot: device memory makes the NIC's writes visible to the
  // kernels here (base::FlushGpuDirectWrites).
  virtual base::Status AfterNetworkWrite() { return base::Status(); }
};

// The sending end. Owned by one thread (Abort: any thread).
class SendEnd {
 public:
  // `memory` must pass CheckFifo.
  SendEnd(std::shared_ptr<FifoMemory> memory, int self_rank, const ProcessId& self);
  // Waits for a free slot; returns its memory: slot_bytes long, or, when
  // `bytes` (what the caller will post) fits kInlineBytes and this FIFO
  // has no slot prefix, the slot's inline area.
  base::StatusOr<void*> Acquire(const WaitContext& ctx, int64_t step, size_t bytes = SIZE_MAX);
  // The free slot's memory (as Acquire's), or null while the receiver holds
  // every slot (never waits; point-to-point engines poll several ends).
  void* TryAcquire(size_t bytes = SIZE_MAX);
  // Publishes the acquired slot holding `bytes` of the collective `sig`
  // (no more than the acquired memory holds).
  void Post(size_t bytes, const CallSignature& sig = CallSignature());
  // Slots posted so far, and whether the receiver has released all of the
  // first `posted` (it has read them).
  uint64_t posted() const { return tail_; }
  bool Released(uint64_t posted);
  // What a free slot waits for (the receiver's head reaching a value), for
  // a waiter that sleeps on several ends at once (SleepUntilAny).
  CounterTarget FreeSlotTarget() { return {&header_->head, tail_ < kSlots ? 0 : tail_ - kSlots + 1}; }
  // The receiver has released the first `posted` slots (the same, blocking).
  CounterTarget ReleasedTarget(uint64_t posted) { return {&header_->head, posted}; }
  base::Status WaitReleased(uint64_t posted, const WaitContext& ctx, int64_t step);
  // Writes this end's fault notice (`why`, which must not be OK), raises its
  // abort flag and wakes both ends.
  void Abort(const base::Status& why, int self_rank, uint64_t seq);
  FifoHeader* header() { return header_; }
  size_t slot_bytes() const { return slot_bytes_; }

 private:
  std::shared_ptr<FifoMemory> memory_;
  FifoHeader* header_;
  char* data_;  // slot 0's data
  size_t slot_bytes_;
  size_t stride_;
  bool can_inline_;            // no slot prefix: no proxy reads this FIFO
  bool acquired_inline_ = false;
  uint64_t tail_ = 0;         // next slot to fill
  uint64_t head_cache_ = 0;   // last head seen

  void* Slot(size_t bytes);
};

// The receiving end. Owned by one thread (Abort: any thread).
class RecvEnd {
 public:
  RecvEnd(std::shared_ptr<FifoMemory> memory, int self_rank, const ProcessId& self);
  // Waits for a filled slot; returns its memory (the slot's, or its inline
  // area), its size and (when `sig` is not null) its signature. A size
  // beyond the slot is an error naming the sender.
  base::StatusOr<const void*> Acquire(const WaitContext& ctx, int64_t step, size_t* bytes,
                                      CallSignature* sig = nullptr);
  // As Acquire, but null at once when no slot is filled.
  base::StatusOr<const void*> TryAcquire(size_t* bytes, CallSignature* sig);
  // What a filled slot waits for (the sender's tail), as SendEnd's.
  CounterTarget FilledSlotTarget() { return {&header_->tail, head_ + 1}; }
  // Frees the acquired slot for the sender.
  void Release();
  void Abort(const base::Status& why, int self_rank, uint64_t seq);
  FifoHeader* header() { return header_; }
  size_t slot_bytes() const { return slot_bytes_; }

 private:
  std::shared_ptr<FifoMemory> memory_;
  FifoHeader* header_;
  char* data_;  // slot 0's data
  size_t slot_bytes_;
  size_t stride_;
  uint64_t head_ = 0;
  uint64_t tail_cache_ = 0;

  // Whether slot head_ is filled: its posted mark, else the tail.
  bool Filled();
  base::StatusOr<const void*> Take(size_t* bytes, CallSignature* sig, const PeerRef* peer, const WaitContext* ctx);
};

// Wakes waiters so they re-check the local abort flag.
void WakeFifo(FifoHeader* header);
// Wakes the proxy serving `header` if it sleeps (a host post or release
// does this itself; a GPU engine calls it after enqueuing work on a FIFO a
// kernel feeds).
void WakeProxy(FifoHeader* header);
// Once launch number `launch` of a kernel that feeds `header`'s FIFO through
// the proxy is enqueued: marks it launched (FifoHeader::device_launched) and
// wakes the proxy. Launch numbers only grow. (A kernel that ended before the
// mark has written its number already: then nothing is running.)
void MarkDeviceLaunch(FifoHeader* header, uint64_t launch);
// Whether a kernel launched on `header`'s FIFO has not ended yet (the proxy
// stays awake while one may post).
bool DeviceLaunchRunning(const FifoHeader* header);

// FIFO memory in this process (ranks that are threads of one process, and
// the local end of a network edge, with `slot_prefix` bytes before each slot).
std::shared_ptr<FifoMemory> AllocateProcessFifo(size_t slot_bytes, int receiver_rank, size_t slot_prefix = 0);

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_FIFO_FIFO_H_
