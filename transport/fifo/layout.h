// The connector FIFO's memory: the one layout every FIFO of Ringo has, on a
// ring edge or a point-to-point pair, whoever reads and writes it: host
// FIFOs in process memory or POSIX shared memory (fifo.h's ends), GPU
// FIFOs in device memory or pinned host memory (the kernels' DeviceFifo
// handle points into it, kernels/cuda/device_types.h), and the local ends a
// network proxy serves (net/proxy.h).
//
//   [0, kFifoDataOffset)   FifoHeader: identity, geometry, the two counters,
//                          every slot's metadata, the abort words, the
//                          fault notices
//   Simple slots           kSlots slots of slot_bytes, each after a
//                          slot_prefix (0, or kProxySlotPrefix where a proxy
//                          sends a slot's metadata with its data); a
//                          GPUDirect edge keeps them apart, in device
//                          memory, with the same stride (FifoMemory::
//                          slots_apart, FifoLink::slots)
//   LL slots               kSlots slots of ll_slot_bytes (16-byte lines),
//                          GPU FIFOs only (ll_slot_bytes 0 elsewhere)
//
// The sender fills slot tail % kSlots while tail - head < kSlots, writes its
// metadata, and publishes tail + 1 (release); the receiver waits for tail
// (acquire), reads, and publishes head + 1. Counters only grow. The memory
// ordering of each side is documented where it is implemented:
// counter.h and fifo.h here for the host, kernels/cuda/internal/
// device_fifo.cuh for the device.
//
// Plain data: the structs are laid out alike on every side (static_asserts
// below); atomics are lock-free and address-free.
#ifndef RINGO_TRANSPORT_FIFO_LAYOUT_H_
#define RINGO_TRANSPORT_FIFO_LAYOUT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "transport/peer_state.h"
#include "transport/signature.h"

namespace ringo::transport {

// Slots per FIFO: the depth of every ring edge and point-to-point pair.
inline constexpr int kSlots = 8;
// Where the slots start; the header fits before.
inline constexpr size_t kFifoDataOffset = 4096;

// A 64-bit value that only grows, plus the count of host threads asleep on
// it (counter.h); the device reads and writes `value` alone.
struct alignas(64) SharedCounter {
  std::atomic<uint64_t> value{0};
  std::atomic<uint32_t> waiters{0};
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "lock-free counters in shared memory");
static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t), "a counter's value is a plain 64-bit word");

// Payloads of at most this many bytes travel in the slot's metadata line
// (host FIFOs without a prefix, SendEnd's choice): one cache line carries
// the size, the signature, the posted mark and the data.
inline constexpr size_t kInlineBytes = 24;
// Set in SlotMeta::bytes when the payload is inline.
inline constexpr uint64_t kInlineSlot = uint64_t{1} << 63;

// What a posted slot holds besides its data: its size and the signature of
// the collective it belongs to (seq 0: not checked), on a cache line of its
// own. Host senders also write `posted` (the tail value this slot was
// posted as) last, with release order, so that a host receiver finds a new
// slot by polling this line alone instead of the tail and then this line;
// small payloads ride in `inline_data` (bytes | kInlineSlot). GPU Simple
// slots store their size with the shift the data starts at (kernels/cuda/
// internal/slot_shift.h) and leave the rest alone; the tail stays the one
// counter every side publishes and sleeps on.
// A GPU Simple slot's size word carries, in bits kSlotShiftBit and up, the
// offset its data starts at within the slot (0..15; kernels/cuda/internal/
// slot_shift.h); host slots leave them 0. The bytes a slot's data spans
// from the slot's start, which is what a proxy moves:
inline constexpr int kSlotShiftBit = 56;
inline constexpr uint64_t SlotSpan(uint64_t size_word) {
  return (size_word & ((uint64_t{1} << kSlotShiftBit) - 1)) + ((size_word >> kSlotShiftBit) & 15u);
}

struct alignas(64) SlotMeta {
  uint64_t bytes;
  CallSignature sig;
  uint64_t posted;  // accessed with __atomic builtins (the struct is copied as plain data)
  unsigned char inline_data[kInlineBytes];
};
static_assert(sizeof(SlotMeta) == 64, "slot metadata is one cache line");

struct FifoHeader {
  uint32_t magic;
  uint32_t version;
  uint64_t slot_bytes;     // a Simple slot's data
  uint64_t slot_prefix;    // bytes before each Simple slot's data
  uint64_t slot_stride;    // slot_prefix + slot_bytes
  uint64_t ll_slot_bytes;  // an LL slot; 0: none
  int32_t sender_rank;
  int32_t receiver_rank;
  ProcessId sender_process;
  ProcessId receiver_process;
  // Each end's abort word, set by that end only (a kernel polls its peer's;
  // a host wait checks it and then reads that end's notice below).
  std::atomic<uint32_t> sender_aborted{0};
  std::atomic<uint32_t> receiver_aborted{0};
  // A FIFO in device memory opened by another process through CUDA IPC:
  // set by the sender once it closed its mapping (cuda/gpu_fifo.h).
  std::atomic<uint32_t> sender_released{0};
  SharedCounter tail;  // advanced by the sender
  SharedCounter head;  // advanced by the receiver
  alignas(64) SlotMeta meta[kSlots];
  // Host FIFOs served by a network proxy in this process (net/proxy.h): set
  // while the proxy sleeps, so that a post or a release wakes it through the
  // eventfd. Never set in shared memory.
  alignas(64) std::atomic<uint32_t> proxy_sleeping{0};
  int32_t proxy_wake_fd = -1;
  // Such FIFOs a kernel feeds: the number of the last launch that uses this
  // FIFO, written by the engine once it is enqueued (MarkDeviceLaunch), and
  // of the last such launch whose kernel has ended, written by the kernel
  // as it exits, after its last post (a system-scope release). A kernel
  // cannot write the eventfd, so the proxy does not sleep while launched >
  // ended: it keeps polling the counters the kernel advances.
  std::atomic<uint64_t> device_launched{0};
  uint64_t device_ended = 0;  // written by the device only
  // Point-to-point pairs (collectives/engines/host_p2p.h): whether the
  // receiver can copy straight out of the sender's buffers (0: not known
  // yet, 1: yes, being in its process or reading it with process_vm_readv,
  // 2: no), set by the receiver once (connect/host_media.cc).
  std::atomic<uint32_t> receiver_pulls{0};
  alignas(64) FaultNotice sender_notice;
  FaultNotice receiver_notice;
};
static_assert(sizeof(FifoHeader) <= kFifoDataOffset, "the header fits before the slots");
static_assert(offsetof(FifoHeader, tail) % 64 == 0 && offsetof(FifoHeader, head) % 64 == 0,
              "each counter on a cache line of its own");

// A FIFO's sizes, from which every offset follows.
struct FifoGeometry {
  uint64_t slot_bytes = 0;
  uint64_t slot_prefix = 0;
  uint64_t ll_slot_bytes = 0;

  uint64_t stride() const { return slot_bytes + slot_prefix; }
  // Slot i's data (Simple).
  uint64_t SlotOffset(int i) const { return kFifoDataOffset + static_cast<uint64_t>(i) * stride() + slot_prefix; }
  // The LL slots, after the Simple ones, 16-byte aligned.
  uint64_t LLOffset() const { return (kFifoDataOffset + kSlots * stride() + 15) / 16 * 16; }
  uint64_t Bytes() const { return LLOffset() + kSlots * ll_slot_bytes; }
};

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_FIFO_LAYOUT_H_
