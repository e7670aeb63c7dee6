// The p2p transport for ranks that are separate processes of one host (CUDA
// IPC): each rank allocates the connectors it RECEIVES on (one allocation for
// every channel, the layout of transport/p2p.h), exports it with
// cudaIpcGetMemHandle, the handles go round in one bootstrap all-gather, and
// each rank opens its ring successor's handle (cudaIpcOpenMemHandle with
// cudaIpcMemLazyEnablePeerAccess) to address the connectors it SENDS on. Two
// ranks on the same GPU in different processes are fine (CUDA refuses a handle
// only in the process that exported it); a successor that is this very process
// (ranks that are threads calling ringoCommInitRank) is addressed by its plain
// device pointer instead.
//
// Abort: a process's mapped host memory cannot be shared by pointer, so each
// connector carries an abort word in its device memory (kP2pAbortOffset).
// RaiseAbort writes 1 into both connectors of the rank, every channel, with
// cudaMemcpyAsync on a private non-blocking stream (so it never waits behind
// the user's kernels); the neighbours' kernels poll it with their deadline
// (RINGO_TIMEOUT_MS) checks. A peer that dies without aborting is caught by
// that deadline.
//
// Release: CUDA leaves undefined what happens when the exporter frees memory
// that an importer still has open. At destruction each rank writes the
// release word (kP2pReleaseOffset) of its successor's allocation, then closes
// its handle, and frees its own allocation only once its predecessor has done
// the same, its process is gone, or the timeout passes (then the memory is
// left allocated, with a warning, rather than freed under a live mapping).
// So destroying a cross-process GPU communicator waits for its ring
// predecessor to destroy (or abort) its own. A predecessor that is a thread
// of this process is not waited for (one thread may destroy both, one after
// the other): the two share the allocation through a process-wide count of
// its users, and whichever lets go last frees it.
//
// All of this depends on the GPU, the driver and the IPC support of the
// machine; it compiles everywhere but has not been run on a GPU yet.
//
// Thread safety: Recv/Send are immutable after Connect; RaiseAbort may be
// called from any thread (CUDA runtime calls, no waiting). The destructor
// must run once this rank's kernels have finished.
#ifndef RINGO_TRANSPORT_CUDA_P2P_IPC_H_
#define RINGO_TRANSPORT_CUDA_P2P_IPC_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "base/cuda.h"
#include "base/status.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/cuda/p2p.h"

namespace ringo::transport {

namespace internal {
struct IpcRecord;
}

struct P2pIpcSpec {
  int rank = 0;
  int nranks = 1;
  std::vector<int> order;  // ring position -> rank, the same on every rank
  int device = 0;          // this rank's CUDA device ordinal (in this process)
  int nchannels = 1;
  uint64_t slot_bytes = 0;     // Simple slot; a multiple of 16
  uint64_t ll_slot_bytes = 0;  // LL slot; a multiple of 16
  int64_t timeout_ms = 0;      // bounds the release wait at destruction
};

// Bytes between two channels' connectors in one allocation (P2pFifoBytes
// rounded up to 4 KiB, so each connector's counters start a page).
uint64_t P2pIpcStride(uint64_t slot_bytes, uint64_t ll_slot_bytes);

class P2pIpcRing : public P2pEnds {
 public:
  // Collective over every rank of `bootstrap`: allocates, exchanges and opens
  // as described above. Blocking. Every rank learns of a failure of any rank
  // (RemoteError naming it) instead of waiting for its timeout.
  static base::StatusOr<std::unique_ptr<P2pIpcRing>> Connect(Exchange& bootstrap,
                                                             const P2pIpcSpec& spec);
  // Blocking: the release handshake (see above), then frees.
  ~P2pIpcRing() override;
  P2pIpcRing(const P2pIpcRing&) = delete;
  P2pIpcRing& operator=(const P2pIpcRing&) = delete;

  const P2pFifo& Recv(int channel) const override { return recv_[channel]; }
  const P2pFifo& Send(int channel) const override { return send_[channel]; }
  void RaiseAbort() override;

 private:
  explicit P2pIpcRing(const P2pIpcSpec& spec) : spec_(spec) {}
  base::Status AllocateOwn();
  // Fills `mine` with this rank's handle, bus id and geometry (ok = 1).
  base::Status Export(internal::IpcRecord* mine);
  base::Status OpenSuccessor(const internal::IpcRecord& next, const internal::IpcRecord& mine);
  void ReleaseAndFree();

  P2pIpcSpec spec_;
  std::vector<P2pFifo> recv_;  // in own_
  std::vector<P2pFifo> send_;  // in peer_
  void* own_ = nullptr;        // cudaMalloc'd on spec_.device: the connectors this rank receives on
  void* peer_ = nullptr;       // the successor's allocation as this process addresses it
  bool peer_opened_ = false;   // peer_ came from cudaIpcOpenMemHandle (close it)
  bool peer_retained_ =
      false;  // peer_ is this process's successor's allocation, retained (release it)
  void* stream_ = nullptr;     // cudaStream_t, non-blocking: abort and release writes
  base::MappedHostMemory words_;  // uint32 [0] = 1 (source of writes), [1] read-back target
  int pred_pid_ = -1;             // the ring predecessor's process
  bool pred_same_process_ = false;
  // Whether the predecessor opened own_: 1 yes, 0 no, -1 unknown (the
  // exchange broke; own_ is then left allocated rather than waited for).
  int pred_opened_ = 0;
};

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_CUDA_P2P_IPC_H_
