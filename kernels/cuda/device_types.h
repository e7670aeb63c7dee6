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
#include "kernels/ring_loop.h"
#include "transport/fifo/layout.h"
#include "kernels/schedule.h"

namespace ringo::kernels::gpu {

// Slots per connector: the one count of transport/fifo/layout.h.
inline constexpr int kFifoSlots = transport::kSlots;
// Channels one launch runs (one CUDA block each). The channel table lives in
// device memory (its owner uploads it once, see LaunchRingKernel), so the
// kernel's parameters stay small whatever the count.
inline constexpr int kMaxChannels = 64;
// A GPU ring carries its order inside the kernel parameters (RingArgs), so
// it has at most kernels::kMaxInlineRanks ranks.
using kernels::kMaxInlineRanks;
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

// One end of one connector as a kernel addresses it: pointers into a FIFO
// laid out as transport/fifo/layout.h says (DeviceFifoAt below computes
// them from the header's device address), so a GPU FIFO is the same memory a
// host FIFO or a proxied one is. Both ends of a connector name the same
// memory; each end writes one counter: the sender `tail`, the receiver
// `head`. A kernel starts from the counter values it finds (its own counter,
// written by the previous kernel on the same stream), so connections persist
// across launches and protocol changes.
struct DeviceFifo {
  void* slots = nullptr;     // slot 0's Simple data; slot i at slots + i * slot_stride
  uint64_t slot_bytes = 0;   // a slice of up to slot_bytes - kSlotShiftPad, at a shift of 0..15
  uint64_t slot_stride = 0;  // between two slots' data
  uint64_t* tail = nullptr;  // steps the sender has posted (system-scope atomic)
  uint64_t* head = nullptr;  // steps the receiver has consumed (system-scope atomic)
  // Every slot's metadata: a Simple slot's bytes and shift (slot_shift.h),
  // a point-to-point slot's bytes; may be null (no size check, shift 0).
  transport::SlotMeta* meta = nullptr;
  const uint32_t* aborted = nullptr;  // the peer end's abort word; may be null
  void* ll_slots = nullptr;           // kFifoSlots * ll_slot_bytes of 16-byte LL lines; 16-byte aligned
  uint64_t ll_slot_bytes = 0;
  int peer_rank = -1;  // the rank at the other end, for error reports
  // 1: both ends are kernels of this GPU and the FIFO is its memory, so the
  // counters are ordered at GPU scope (RINGO_GPU_DEVICE_SCOPE); 0: at
  // system scope (a CPU thread, a NIC or another GPU may be at the other end).
  uint32_t gpu_scope = 0;
  // A FIFO a network proxy serves (pinned host memory): where the kernel
  // writes its launch's number (KernelGuard::launch) as it exits, after its
  // last post (FifoHeader::device_ended); null for every other FIFO.
  uint64_t* launch_ended = nullptr;
};

// The handle of one end of the FIFO whose header is at `header` as the
// device addresses it (never read on the host: only offsets are computed).
// `receiving`: this end is the receiver (it polls the sender's abort word).
// `abort_word`, where given, replaces the peer's abort word (rings of one
// process share a flag in mapped host memory per edge instead).
// `slots_apart`, where given, is where slot 0's prefix is instead of after
// the header (FifoLink::slots: a GPUDirect edge's slots in device memory).
DeviceFifo DeviceFifoAt(void* header, const transport::FifoGeometry& geometry, bool receiving, int peer_rank,
                        const uint32_t* abort_word = nullptr, void* slots_apart = nullptr);

// A channel as one rank sees it: the connector from its ring predecessor and
// the connector to its ring successor.
struct DeviceChannel {
  DeviceFifo recv;
  DeviceFifo send;
};

// One collective on one rank: the ring collective (MakeRingArgs: counts in
// the datatype's elements; buffers are device pointers aligned to the
// datatype's size, and 16-byte vectors are used where the pointers of a step
// share their offset modulo 16) and the protocol. ring.slice_bytes is at
// most slot_bytes - kSlotShiftPad (Simple) or ll_slot_bytes / 2 (LL).
struct DeviceCollArgs {
  RingArgs ring;
  Proto proto = Proto::kSimple;
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
// block claims it through a word in device memory (KernelGuard::claim, 0 ->
// 1: an atomic the GPU honours, which one on mapped host memory is not
// promised to be), fills the fields, fences, and writes `code` last (a
// system-scope release), so a host that reads code != 0 then the rest sees
// them all. Later failures leave it alone: the first error sticks until the
// owner zeroes both again.
struct ErrorRecord {
  int32_t code;        // KernelError; written last
  int32_t reserved;
  int32_t rank;        // the rank that gave up
  int32_t peer;        // the rank it waited on
  int32_t channel;
  int32_t receiving;   // 1: waiting for the predecessor's data; 0: for the successor to free a slot
  int64_t step;        // primitive call within the collective (loop * steps + step), as the host executor
  uint64_t expected;   // counter value (Simple), LL flag, or chunk bytes (size mismatch) awaited
  uint64_t observed;   // the value last seen
  uint64_t waited_ns;  // how long the wait lasted
};

// What every kernel's waits check and where they report (internal/device_fifo.cuh's
// Watchdog): the rank's abort flag, its deadline and its error record.
struct KernelGuard {
  const volatile int* abort = nullptr;  // host-mapped; may be null
  ErrorRecord* error = nullptr;         // host-mapped; may be null (then nothing is recorded)
  int* claim = nullptr;                 // device memory, zeroed: who writes `error` (null: nobody)
  uint64_t timeout_ns = 0;              // 0: no deadline
  int rank = 0;                         // for the error record
  uint64_t launch = 0;                  // this launch's number (DeviceFifo::launch_ended)
};

}  // namespace ringo::kernels::gpu

#endif  // RINGO_KERNELS_CUDA_DEVICE_TYPES_H_
