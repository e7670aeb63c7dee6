// Connecting a ring: for every channel, the receiving end of the edge from the
// previous rank and the sending end of the edge to the next (collectives/
// sees only SendEnd/RecvEnd). Shared memory between processes of one host,
// process memory between threads of one process, and between hosts a local
// FIFO on each side whose slots a proxy thread moves over the network
// (net/proxy.h).
#ifndef RINGO_TRANSPORT_CONNECT_RING_LINKS_H_
#define RINGO_TRANSPORT_CONNECT_RING_LINKS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/shm/fifo.h"
#include "transport/net/proxy.h"

namespace ringo::transport {

// What a rank tells the others at init. Fixed-size, sent raw over the bootstrap.
struct PeerInfo {
  uint64_t host_hash;     // boot id, host name and network namespace (or RINGO_HOSTID)
  uint64_t machine_hash;  // boot id: ranks that share CPUs, whatever their hosts
  int32_t pid;
  int32_t rank;
  int32_t device;       // CUDA device, -1 for host memory
  int32_t numa;         // NUMA node this rank runs on, -1 unknown
  int32_t device_wish;  // collectives::DeviceWish: host, GPU, or GPU if every rank can
  // Settings every rank must share; rank 0's are used.
  int32_t nchannels;
  int32_t algorithm;
  int32_t proto;        // collectives::ProtoChoice (GPU communicators)
  int32_t cores;        // this rank's CPUs (std::thread::hardware_concurrency)
  int32_t check;        // RINGO_CHECK
  int32_t deterministic;  // RINGO_DETERMINISTIC
  int64_t slot_bytes;
  uint64_t start_ticks;  // with pid: the process (peer_state.h)
};

// Whether every rank's record is one a Ringo rank of this version could
// send (ranks in order, settings in range); says which rank's field is
// wrong otherwise. Everything from a peer is checked before it is used.
base::Status ValidatePeerInfos(const std::vector<PeerInfo>& peers);

// This rank's record. Its host is named by RINGO_HOSTID (`host_id`) when
// set, else by the boot id, the host name and the network namespace.
PeerInfo LocalPeerInfo(int rank, int device, const std::string& host_id = "");

struct ChannelLinks {
  std::unique_ptr<RecvEnd> recv;  // from the previous rank on the ring
  std::unique_ptr<SendEnd> send;  // to the next rank on the ring
};

// A rank's ends of every channel, and the proxy that serves those that
// cross hosts (null when none does).
struct RingLinks {
  std::vector<ChannelLinks> channels;
  std::unique_ptr<net::Proxy> proxy;
  // Every rank's verbs fabric (net::VerbsFabric; 0: none), as exchanged
  // for the ring's network edges; empty where no edge crosses hosts.
  std::vector<uint64_t> fabrics;
};

struct RingSpec {
  int nranks = 0;
  std::vector<int> order;  // ring position -> rank
  int nchannels = 1;
  size_t slot_bytes = 0;
  // net_edges[p]: the edge from position p to p + 1 crosses hosts (the
  // network); empty: none does.
  std::vector<bool> net_edges;
  int64_t timeout_ms = 300000;  // connection setup
  // How the proxy polls before it sleeps (net/proxy.h).
  int proxy_spin_count = 1000;
  int proxy_yield_count = 1000;
};

// Connects rank `rank`'s edges through `bootstrap` (collective over ranks).
base::StatusOr<RingLinks> ConnectRing(Exchange& bootstrap, uint64_t tag, int rank, const RingSpec& spec,
                                      const std::vector<PeerInfo>& peers);

// Connects every rank of a ring whose ranks are threads of this process;
// result[rank][channel].
std::vector<std::vector<ChannelLinks>> ConnectRingInProcess(const RingSpec& spec);

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_CONNECT_RING_LINKS_H_
