// Point-to-point connections: one FIFO (fifo.h) per ordered pair of ranks
// that exchange messages, made lazily, the first time a send or receive
// names the pair, and kept for the communicator's life. The memory is the
// receiver's, as on the ring: process memory between threads of one
// process, POSIX shared memory between processes of one host, and between
// hosts (or where the collectives layer says so: RINGO_SHM_DISABLE) a local
// FIFO on each side whose slots a proxy thread moves over the network
// (net/proxy.h).
//
// A receiver that can copy straight out of its sender's memory (the same
// process, or process_vm_readv, probed at connection) says so in the FIFO
// header (FifoHeader::receiver_pulls): large messages then go as one
// descriptor slot instead of their bytes.
//
// The handshake goes over the communicator's exchange (exchange.h): the
// receiver makes its FIFO and offers it (a name, or a network handle), the
// sender opens it and acknowledges, then the receiver unlinks the shared
// memory's name. Every receiver offers before it waits for anything and
// every sender answers offers before it waits for acknowledgements, so the
// pairs of one Connect never wait on each other, whatever the order.
//
// Thread safety: one thread (the communicator's) calls Connect and uses the
// ends; Abort may be called from any thread.
#ifndef RINGO_TRANSPORT_CONNECT_PEER_LINKS_H_
#define RINGO_TRANSPORT_CONNECT_PEER_LINKS_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "base/status.h"
#include "transport/bootstrap/exchange.h"
#include "transport/shm/fifo.h"
#include "transport/net/proxy.h"
#include "transport/connect/ring_links.h"

namespace ringo::transport {

struct PeerLinkSpec {
  int rank = 0;
  int nranks = 1;
  // Names this communicator's segments and in-process FIFOs (unique per
  // communicator on a host).
  uint64_t tag = 0;
  size_t slot_bytes = 0;
  int64_t timeout_ms = 300000;
  std::vector<PeerInfo> peers;  // every rank's record (host, process)
  // net[p]: the pair with rank p goes over the network (other hosts, or
  // shared memory disabled); ranks that are threads of this process always
  // share memory.
  std::vector<bool> net;
  // Every rank's verbs fabric (RingLinks::fabrics): a network pair takes
  // the transport net::ChooseNet picks for its two ends, as a ring edge
  // does; empty: sockets.
  std::vector<uint64_t> fabrics;
  int numa = -1;  // this rank's NUMA node, for the verbs port's order
  int proxy_spin_count = 1000;
  int proxy_yield_count = 1000;
};

class PeerLinks {
 public:
  PeerLinks(Exchange* exchange, PeerLinkSpec spec);
  ~PeerLinks();
  PeerLinks(const PeerLinks&) = delete;
  PeerLinks& operator=(const PeerLinks&) = delete;

  // Connects what is missing of: this rank's send ends to `send_to` and
  // receive ends from `recv_from` (self excluded, duplicates allowed). Each
  // peer of a new pair must call Connect with this rank in its opposite list
  // within the timeout (an error naming it otherwise); *abort ends the wait.
  base::Status Connect(const std::vector<int>& send_to, const std::vector<int>& recv_from,
                       const std::atomic<bool>* abort);
  SendEnd* send(int peer) const { return send_[peer].get(); }  // null until connected
  RecvEnd* recv(int peer) const { return recv_[peer].get(); }
  int connected() const;  // ends made so far

  // Writes `why` into every end's notice and raises its abort flag.
  void Abort(const base::Status& why, int self_rank, uint64_t seq);
  // Stops the proxies of network pairs: with `drain`, after what was posted
  // has gone out (as net::Proxy::Shutdown).
  void Shutdown(bool drain, int64_t timeout_ms);

 private:
  struct Incoming;
  base::Status Offer(int peer, Incoming* in);
  // The network transport of the pair with `peer` (both ends agree).
  base::StatusOr<net::Net*> PairNet(int peer) const;
  base::Status Answer(int peer, net::Proxy* proxy, bool* proxy_used);
  base::Status Settle(int peer, Incoming* in, net::Proxy* proxy, bool* proxy_used);

  Exchange* exchange_;
  PeerLinkSpec spec_;
  const std::atomic<bool>* abort_ = nullptr;  // Connect's
  mutable std::mutex mu_;  // ends and proxies change under it (Abort reads them from any thread)
  std::vector<std::unique_ptr<SendEnd>> send_;
  std::vector<std::unique_ptr<RecvEnd>> recv_;
  std::vector<std::unique_ptr<net::Proxy>> proxies_;
};

// The shared-memory segment name of the pair (src -> dst) of communicator `tag`.
std::string ShmPairName(uint64_t tag, int src, int dst);

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_CONNECT_PEER_LINKS_H_
