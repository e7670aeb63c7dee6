// The p2p transport between GPU ranks that reach each other (or share one
// GPU): for every ring edge and channel, a connector FIFO in the receiver's
// device memory that the sender's kernels write directly. This file holds the
// connector layout, the interface the communicator sees (P2pEnds: one rank's
// two ends of every channel) and P2pRing, the whole ring for ranks that are
// threads of one process (plain pointers; peer access is enabled where the two
// GPUs differ). Ranks that are separate processes use P2pIpcRing
// (transport/p2p_ipc.h: CUDA IPC handles exchanged through the bootstrap).
//
// Memory layout of one connector: transport/fifo_layout.h's, like every
// FIFO's (the header, the Simple slots, then the LL slots), formatted at
// creation. P2pRing's abort flags live in pinned host memory mapped for every
// device instead of the header's words, so a host thread can raise them with
// a plain store while a kernel polls them.
//
// Thread safety: a P2pRing is immutable after Create() except for the abort
// flags (RaiseAbort, any thread). Ownership: it owns every allocation and
// frees them on destruction, which the caller must delay until no kernel uses
// them (the communicators share it and synchronise their work first).
#ifndef RINGO_TRANSPORT_CUDA_P2P_H_
#define RINGO_TRANSPORT_CUDA_P2P_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "base/cuda.h"
#include "base/status.h"
#include "transport/fifo_layout.h"

namespace ringo::transport {

// One connector as this process addresses it: a FIFO laid out as
// transport/fifo_layout.h says, in the receiver's device memory (the
// header's address is a device address, never dereferenced on the host).
struct P2pFifo {
  FifoHeader* header = nullptr;
  FifoGeometry geometry;
  // The word both ends' kernels poll instead of the header's own abort
  // words; null: the header's. P2pRing: one flag per edge in mapped host
  // memory (device address == host address under UVA), so a host thread
  // raises it with a plain store while a kernel polls it.
  uint32_t* abort_word = nullptr;
  int device = -1;  // where the memory lives: the receiver's device (-1: not visible in this process)
};

struct P2pRingSpec {
  int nranks = 1;
  std::vector<int> order;    // ring position -> rank
  std::vector<int> devices;  // rank -> CUDA device ordinal
  int nchannels = 1;
  uint64_t slot_bytes = 0;     // Simple slot; a multiple of 16
  uint64_t ll_slot_bytes = 0;  // LL slot; a multiple of 16
};

// The connector whose header is at `base` (device memory of `device`).
P2pFifo P2pFifoAt(void* base, uint64_t slot_bytes, uint64_t ll_slot_bytes, int device);

// Lets device `from` load and store device `to`'s memory (no-op when they are
// the same); InvalidUsage naming both when the GPUs have no peer-to-peer path.
// Blocking; changes no current device.
base::Status EnablePeerAccess(int from, int to);

// Bytes of device memory one connector takes.
uint64_t P2pFifoBytes(uint64_t slot_bytes, uint64_t ll_slot_bytes);
// Formats the connector at `base` (device memory, current device): its header
// as fifo_layout.h's, everything else zero. Blocking.
base::Status FormatP2pFifo(void* base, uint64_t slot_bytes, uint64_t ll_slot_bytes, void* stream);

// One rank's view of a p2p ring: the connector it receives on and the one it
// sends on, per channel, and the way to tell both neighbours to stop. What the
// GPU communicator holds, whichever way the ring was built.
//
// Thread safety: Recv/Send are immutable; RaiseAbort may be called from any
// thread and does not wait. Destruction: only once this rank's kernels have
// finished (the owner synchronises first).
class P2pEnds {
 public:
  virtual ~P2pEnds() = default;
  // The connector from the ring predecessor on `channel` (this rank's memory).
  virtual const P2pFifo& Recv(int channel) const = 0;
  // The connector to the ring successor on `channel` (the successor's memory).
  virtual const P2pFifo& Send(int channel) const = 0;
  // Sets the abort word of both connectors on every channel, so the kernels
  // of this rank's two neighbours stop waiting on it.
  virtual void RaiseAbort() = 0;
};

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

  // Ring position `pos`'s view of `ring` (which it keeps alive).
  static std::unique_ptr<P2pEnds> EndsOf(std::shared_ptr<P2pRing> ring, int pos);

 private:
  explicit P2pRing(const P2pRingSpec& spec) : spec_(spec) {}
  base::Status Allocate();

  P2pRingSpec spec_;
  std::vector<P2pFifo> edges_;
  std::vector<void*> device_memory_;    // one cudaMalloc per edge
  base::MappedHostMemory abort_flags_;  // one uint32 per edge
};

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_CUDA_P2P_H_
