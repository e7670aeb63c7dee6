// Plain data shared by the host launch API (launch.h) and the CUDA kernels:
// the device view of a connector FIFO, a channel's two ends, a collective's
// arguments and the error record. No CUDA headers, no behaviour: the host
// object that owns the memory (the communicator / transport) fills these and
// the kernels receive them by value.
//
// Memory every pointer here names must be accessible from the device that
// runs the kernel: device memory (cudaMalloc, CUDA IPC, peer memory) or
// host memory mapped for the device (cudaHostAlloc/cudaHostRegister mapped).
#ifndef RINGO_KERNELS_CUDA_DEVICE_TYPES_H_
#define RINGO_KERNELS_CUDA_DEVICE_TYPES_H_

#include <cstdint>

#include "base/device/dtype.h"
#include "kernels/schedule.h"

namespace ringo::kernels::gpu {

// Slots per connector; equals transport::kSlots (transport/fifo.h).
inline constexpr int kFifoSlots = 8;
// Channels one launch runs (one CUDA block each). The channel table lives in
// device memory (its owner uploads it once, see LaunchRingKernel), so the
// kernel's parameters stay small whatever the count.
inline constexpr int kMaxChannels = 64;
// Ring orders up to this many ranks travel inside the kernel parameters;
// larger rings pass DeviceCollArgs::device_order.
inline constexpr int kMaxInlineRanks = 64;
// Threads per block of the ring kernel (both protocols).
inline constexpr int kRingThreads = 512;
// A Simple slot carries at most slot_bytes - kSlotShiftPad bytes of data: the
// data starts at the sender's user-buffer offset modulo 16
// (internal/slot_shift.h), so that unaligned buffers still move in 16-byte
// vectors.
inline constexpr int kSlotShiftPad = 16;
// An LL line: two (4 data bytes, 4 flag bytes) pairs stored with one 16-byte store.
inline constexpr int kLLLineBytes = 16;
inline constexpr int kLLDataBytesPerLine = 8;

enum class Proto : int {
  kSimple = 0,  // data, fence, then the tail counter; for large messages
  kLL = 1,      // data and flag in each 8-byte store; no tail wait; for small messages
};

// One direction of one connector, as one end sees it. Mirrors transport/fifo.h:
// for a FifoHeader h at device address `base`,
//   slots = base + kFifoDataOffset, slot_bytes = h.slot_bytes,
//   tail = &h.tail.value, head = &h.head.value, sizes = h.sizes,
//   aborted = &h.aborted.
// The LL buffer is separate memory on the same side as the slots.
// Both ends of a connector name the same memory; each end writes one counter:
// the sender `tail`, the receiver `head`. A kernel starts from the counter
// values it finds (its own counter, written by the previous kernel on the same
// stream), so connections persist across launches and protocol changes.
struct DeviceFifo {
  void* slots = nullptr;            // kFifoSlots * slot_bytes (Simple)
  uint64_t slot_bytes = 0;  // a slice of up to slot_bytes - kSlotShiftPad, at a shift of 0..15
  uint64_t* tail = nullptr;         // steps the sender has posted (system-scope atomic)
  uint64_t* head = nullptr;         // steps the receiver has consumed (system-scope atomic)
  uint64_t* sizes = nullptr;  // each Simple slot's bytes and shift (slot_shift.h); may be null (no
                              // size check, shift 0)
  const uint32_t* aborted = nullptr;  // the connector's abort flag (either side sets it); may be null
  void* ll_slots = nullptr;         // kFifoSlots * ll_slot_bytes of 16-byte LL lines; 16-byte aligned
  uint64_t ll_slot_bytes = 0;
  int peer_rank = -1;               // the rank at the other end, for error reports
};

// A channel as one rank sees it: the connector from its ring predecessor and
// the connector to its ring successor.
struct DeviceChannel {
  DeviceFifo recv;
  DeviceFifo send;
};

// One collective on one rank. Buffers are device pointers aligned to the
// datatype's size (any further alignment: 16-byte vectors are used where the
// pointers of a step share their offset modulo 16).
struct DeviceCollArgs {
  Coll coll = Coll::kAllReduce;
  base::DataType dtype = base::DataType::kFloat32;
  base::RedOp op = base::RedOp::kSum;
  const void* send = nullptr;
  void* recv = nullptr;
  // As kernels::CollArgs: AllReduce, Broadcast, Reduce: elements;
  // ReduceScatter: elements per rank received; AllGather: elements per rank sent.
  int64_t count = 0;
  int root = 0;    // rank (Broadcast, Reduce)
  int rank = 0;
  int nranks = 1;
  int pos = 0;     // this rank's ring position
  int order[kMaxInlineRanks] = {};   // ring position -> rank, when nranks <= kMaxInlineRanks
  const int* device_order = nullptr; // device array of nranks entries, used when nranks > kMaxInlineRanks
  int64_t slice_bytes =
      0;  // chunk bytes: <= slot_bytes - kSlotShiftPad (Simple), <= ll_slot_bytes / 2 (LL)
  Proto proto = Proto::kSimple;
  // RedOp::kPreMulSum: this rank's scalar, one value of dtype in the low
  // bytes, or (when scalar_ptr is set) read by the kernel from device memory
  // when it starts (NCCL's ncclScalarDevice).
  uint64_t scalar = 0;
  const void* scalar_ptr = nullptr;
};

// Why a kernel gave up.
enum class KernelError : int32_t {
  kNone = 0,
  kTimeout = 1,        // no progress from the peer for timeout_ns
  kAborted = 2,        // the local abort flag was set
  kPeerAborted = 3,    // the connector's abort flag was set
  kSizeMismatch = 4,   // the predecessor posted a chunk of another size (mismatched collectives)
};

// Where a failing kernel says what happened: host memory mapped for the
// device, zeroed by its owner before the first launch. The first failing
// block claims it (claimed 0 -> 1), fills the fields, fences, and writes
// `code` last, so a host that reads code != 0 then the rest sees them all.
// Later failures leave it alone: the first error sticks until the owner
// zeroes it again.
struct ErrorRecord {
  int32_t code;        // KernelError; written last
  int32_t claimed;
  int32_t rank;        // the rank that gave up
  int32_t peer;        // the rank it waited on
  int32_t channel;
  int32_t receiving;   // 1: waiting for the predecessor's data; 0: for the successor to free a slot
  int64_t step;        // primitive call within the collective (loop * steps + step), as the host executor
  uint64_t expected;   // counter value (Simple), LL flag, or chunk bytes (size mismatch) awaited
  uint64_t observed;   // the value last seen
  uint64_t waited_ns;  // how long the wait lasted
};

}  // namespace ringo::kernels::gpu

#endif  // RINGO_KERNELS_CUDA_DEVICE_TYPES_H_
