// Point-to-point connections between GPU ranks: one connector (p2p.h's
// layout, the same as a ring edge's) per ordered pair that exchanges
// messages, in the receiver's device memory, made the first time a send or
// receive names the pair and kept. As peer_links.h for host memory: the
// receiver allocates and offers its connector over the communicator's
// exchange (the IPC record of p2p_ipc_wire.h: a CUDA IPC handle, and the
// plain device pointer for a peer in the same process), the sender opens it
// (cudaIpcOpenMemHandle across processes, peer access within one) and
// answers. Every receiver offers before it waits, every sender answers
// before it waits for answers, so the pairs of one Connect never wait on
// each other.
//
// Release: a connector is freed when its receiver's communicator goes, and
// an opened one closed when the sender's goes; as with NCCL, every rank
// must destroy its communicator only once its peers have no kernel using
// it (the collectives' ring additionally waits for its predecessor, see
// p2p_ipc.h; these connectors do not).
//
// Thread safety: one thread (the communicator's) calls Connect and reads
// the ends.
#ifndef RINGO_TRANSPORT_CUDA_P2P_PEERS_H_
#define RINGO_TRANSPORT_CUDA_P2P_PEERS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "transport/bootstrap/exchange.h"
#include "transport/cuda/p2p.h"

namespace ringo::transport {

struct GpuPeerSpec {
  int rank = 0;
  int nranks = 1;
  int device = 0;           // this rank's CUDA device
  uint64_t slot_bytes = 0;  // a multiple of 16
  int64_t timeout_ms = 300000;
};

class GpuPeerLinks {
 public:
  GpuPeerLinks(Exchange* exchange, const GpuPeerSpec& spec);
  ~GpuPeerLinks();
  GpuPeerLinks(const GpuPeerLinks&) = delete;
  GpuPeerLinks& operator=(const GpuPeerLinks&) = delete;

  // As PeerLinks::Connect (self excluded, duplicates allowed). Blocking.
  base::Status Connect(const std::vector<int>& send_to, const std::vector<int>& recv_from);
  // The connector to `peer` / from `peer`; null until connected.
  const P2pFifo* send(int peer) const { return send_[peer].get(); }
  const P2pFifo* recv(int peer) const { return recv_[peer].get(); }

 private:
  struct Own;
  base::Status Offer(int peer, Own* own);
  base::Status Answer(int peer);
  base::Status Settle(int peer, Own* own);

  Exchange* exchange_;
  GpuPeerSpec spec_;
  std::vector<std::unique_ptr<P2pFifo>> send_;
  std::vector<std::unique_ptr<P2pFifo>> recv_;
  std::vector<void*> owned_;   // cudaMalloc'd connectors this rank receives on
  std::vector<void*> opened_;  // peers' connectors opened with cudaIpcOpenMemHandle
};

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_CUDA_P2P_PEERS_H_
