// The p2p transport for ranks that are threads of one process on GPUs that
// reach each other (or share one GPU): for every ring edge and channel, a
// connector FIFO in the receiver's device memory, named by plain pointers on
// both ends (no IPC handles within one process). Peer access is enabled where
// the two GPUs differ. Across processes (CUDA IPC) is not implemented yet.
//
// Memory layout of one connector (the layout of transport/fifo.h's header):
// tail at byte 0, head at 64, sizes[kSlots] at 128, Simple slots from 4096,
// then the LL slots; all zeroed at creation. The connector's abort flag lives
// in pinned host memory mapped for every device, so a host thread can raise
// it with a plain store while a kernel polls it.
//
// Thread safety: a P2pRing is immutable after Create() except for the abort
// flags (RaiseAbort, any thread). Ownership: it owns every allocation and
// frees them on destruction, which the caller must delay until no kernel uses
// them (the communicators share it and synchronise their work first).
#ifndef RINGO_TRANSPORT_P2P_H_
#define RINGO_TRANSPORT_P2P_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "base/cuda.h"
#include "base/status.h"

namespace ringo::transport {

// One connector's memory as both of its ends (and the kernels) address it.
// Mirrors kernels::gpu::DeviceFifo, which the communicator fills from it.
struct P2pFifo {
  void* slots = nullptr;  // kSlots * slot_bytes, 16-byte aligned
  uint64_t slot_bytes = 0;
  uint64_t* tail = nullptr;     // written by the sender
  uint64_t* head = nullptr;     // written by the receiver
  uint64_t* sizes = nullptr;    // kSlots entries
  uint32_t* aborted = nullptr;  // mapped host memory (device address == host address under UVA)
  void* ll_slots = nullptr;     // kSlots * ll_slot_bytes, 16-byte aligned
  uint64_t ll_slot_bytes = 0;
  int device = -1;  // where the memory lives: the receiver's device
};

struct P2pRingSpec {
  int nranks = 1;
  std::vector<int> order;    // ring position -> rank
  std::vector<int> devices;  // rank -> CUDA device ordinal
  int nchannels = 1;
  uint64_t slot_bytes = 0;     // Simple slot; a multiple of 16
  uint64_t ll_slot_bytes = 0;  // LL slot; a multiple of 16
};

// Offsets inside one connector's device allocation.
inline constexpr uint64_t kP2pTailOffset = 0;
inline constexpr uint64_t kP2pHeadOffset = 64;
inline constexpr uint64_t kP2pSizesOffset = 128;
inline constexpr uint64_t kP2pSlotsOffset = 4096;

// Bytes of device memory one connector takes.
uint64_t P2pFifoBytes(uint64_t slot_bytes, uint64_t ll_slot_bytes);

class P2pRing {
 public:
  // Allocates and zeroes every connector (blocking: cudaMalloc, cudaMemset
  // and a device synchronisation per device). Fails with the CUDA error's
  // text, or with InvalidUsage where two GPUs of the ring cannot reach each
  // other or the build has no CUDA toolkit.
  static base::StatusOr<std::unique_ptr<P2pRing>> Create(const P2pRingSpec& spec);
  ~P2pRing();
  P2pRing(const P2pRing&) = delete;
  P2pRing& operator=(const P2pRing&) = delete;

  const P2pRingSpec& spec() const { return spec_; }
  // The connector from ring position `pos` to position pos+1 on `channel`.
  const P2pFifo& Edge(int pos, int channel) const {
    return edges_[pos * spec_.nchannels + channel];
  }
  // Sets the abort flag of both connectors of ring position `pos` (every
  // channel), so the kernels of its two neighbours stop waiting on it.
  void RaiseAbort(int pos);

 private:
  explicit P2pRing(const P2pRingSpec& spec) : spec_(spec) {}
  base::Status Allocate();

  P2pRingSpec spec_;
  std::vector<P2pFifo> edges_;
  std::vector<void*> device_memory_;    // one cudaMalloc per edge
  base::MappedHostMemory abort_flags_;  // one uint32 per edge
};

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_P2P_H_
