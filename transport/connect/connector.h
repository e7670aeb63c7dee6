// The one way pairs of ranks connect: ring edges and point-to-point pairs,
// host and GPU FIFOs alike. A pair is (sender, receiver, lane): a ring's
// channel c is lane c, point-to-point is lane kP2pLane. Its FIFO (the
// layout of fifo/layout.h) lives in the receiver's memory, in a medium both
// ends choose alike from what they know of each other (ChooseMedium): the
// receiver's process memory (ranks that are threads of one process), POSIX
// shared memory (processes of one memory domain), device memory (GPU
// FIFOs: a peer's pointer in one process, CUDA IPC across processes), or a
// local FIFO on each side whose slots the communicator's one proxy moves
// over the network (net/proxy.h).
//
// The handshake goes over the communicator's exchange (which carries
// messages): the receiver makes its FIFO and offers it (its medium and what
// the sender needs to open it), the sender opens it and answers, then the
// receiver settles (unlinks a segment's name, takes the accepted network
// connection). Every receiver offers before it waits for anything, network
// connections are accepted while this rank answers, and every sender
// answers before it waits for answers, so the pairs of one Connect never
// wait on each other, whatever the order in which ranks call it. A failure
// on either side reaches the other side's call as an error naming the rank
// where it happened.
//
// A medium is one implementation of Medium (medium.h): adding a way to hold
// a FIFO is one class and one entry in ChooseMedium.
//
// Thread safety: one thread (the communicator's) calls Connect; Shutdown
// once, at the end. The links it returns are owned by the caller (an
// engine); the proxy shares the FIFOs of network links until it stops.
#ifndef RINGO_TRANSPORT_CONNECT_CONNECTOR_H_
#define RINGO_TRANSPORT_CONNECT_CONNECTOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "base/config.h"
#include "base/status.h"
#include "transport/bootstrap/exchange.h"
#include "transport/connect/peer_info.h"
#include "transport/fifo/layout.h"
#include "transport/net/proxy.h"
#include "transport/fifo/fifo.h"

namespace ringo::transport {

// The lane of point-to-point pairs (ring channels are lanes 0, 1, ...).
inline constexpr int kP2pLane = 1000;

// Where a pair's FIFO lives.
enum class Medium : uint32_t {
  kProcess = 1,   // the receiver's process memory; the sender is a thread of the same process
  kShm = 2,       // POSIX shared memory of the receiver's, opened by name
  kNet = 3,       // a local FIFO on each side, moved by the proxy
  kCudaPeer = 4,  // device memory of the receiver, addressed by its pointer in the same process
  kCudaIpc = 5,   // device memory of the receiver, opened by the sender through CUDA IPC
};
const char* MediumName(Medium m);

// One end of a connected pair, as this rank holds it.
struct FifoLink {
  int peer = -1;
  int lane = 0;
  bool sending = false;  // this rank is the pair's sender
  Medium medium = Medium::kProcess;
  // Keeps the FIFO (and its mapping, its device allocation) alive.
  std::shared_ptr<FifoMemory> memory;
  // The FIFO as this process addresses it: a host address, or for GPU FIFOs
  // a device address (never dereferenced on the host).
  FifoHeader* header = nullptr;
  FifoGeometry geometry;
  // Where Simple slot 0's prefix is when the slots are kept apart from the
  // header (slot i's data at slots + i * stride + slot_prefix): the device
  // memory of a GPUDirect edge between hosts (net/gpudirect.h), addressed as
  // the header is. Null: the slots follow the header (fifo/layout.h).
  void* slots = nullptr;
  int device = -1;  // GPU FIFOs: the device the memory is on, as this process numbers it (-1: not visible)
};

// Host ends over a link (host FIFOs only).
std::unique_ptr<SendEnd> MakeSendEnd(const FifoLink& link, int self_rank);
std::unique_ptr<RecvEnd> MakeRecvEnd(const FifoLink& link, int self_rank);

struct ConnectorSpec {
  int rank = 0;
  int nranks = 1;
  // Names this communicator's segments and in-process FIFOs (unique per
  // communicator on a host); sent in every network hello.
  uint64_t tag = 0;
  std::vector<PeerInfo> peers;  // every rank's record
  // Every rank's memory domain (MemoryDomains): ranks of another domain are
  // reached over the network. Empty: every rank of a host shares memory.
  std::vector<int> domains;
  // net[p]: the pair with rank p goes over the network whatever the domains
  // say (the transport policy: RINGO_SHM_DISABLE); empty: none forced.
  std::vector<bool> net;
  // Every rank's verbs fabric (net::VerbsFabric; 0: none): a network pair
  // takes the transport net::ChooseNet picks for its two ends. Empty: sockets.
  std::vector<uint64_t> fabrics;
  // Every rank's GPUDirect offer (1: it offers it, net::JudgeGpuDirect's
  // `used`): a GPU edge over verbs between two ranks that offer it keeps its
  // slots in device memory (net::EdgeSlotsApart). Empty: nobody offers it.
  std::vector<uint8_t> gpudirect;
  // Tests: host FIFOs between ranks that both offer GPUDirect keep their
  // slots apart too, in process memory standing in for the device's (the
  // GPUDirect wire and layout without a GPU; net::EdgeSlotsApart).
  bool gpudirect_host_stand_in = false;
  int numa = -1;  // this rank's NUMA node, for the verbs port's order
  int device = -1;  // this rank's CUDA device, for GPU FIFOs
  int64_t timeout_ms = 300000;
  int proxy_spin_count = 1000;
  int proxy_yield_count = 1000;
};

// One pair to connect, as this rank sees it.
struct PairKey {
  int peer = -1;
  int lane = 0;
  bool operator<(const PairKey& o) const { return peer != o.peer ? peer < o.peer : lane < o.lane; }
  bool operator==(const PairKey& o) const { return peer == o.peer && lane == o.lane; }
};

class Connector {
 public:
  // `exchange` must carry messages and outlive the connector; `config` is
  // the communicator's snapshot (the network's settings).
  Connector(Exchange* exchange, ConnectorSpec spec, const base::Config& config);
  ~Connector();
  Connector(const Connector&) = delete;
  Connector& operator=(const Connector&) = delete;

  // The medium of the pair with `peer` for host FIFOs (`gpu` false) or GPU
  // FIFOs, the same on both ends.
  Medium ChooseMedium(int peer, bool gpu) const;

  // Connects this rank's ends of `sends` (this rank sends to key.peer) and
  // `recvs` (it receives from key.peer), every FIFO of `geometry` (its
  // prefix is the medium's), host FIFOs or (gpu) device FIFOs. Each peer of
  // a pair must call Connect with this rank in its opposite list within the
  // timeout (an error naming it otherwise); *abort (may be null) ends the
  // wait. Returns the links in the order asked, sends then receives.
  base::StatusOr<std::vector<FifoLink>> Connect(const std::vector<PairKey>& sends, const std::vector<PairKey>& recvs,
                                                const FifoGeometry& geometry, bool gpu,
                                                const std::atomic<bool>* abort);

  const ConnectorSpec& spec() const { return spec_; }
  const base::Config& config() const { return config_; }
  // Network links made so far (for the log and ringo-topo).
  int net_links() const { return net_links_; }

  // Stops the proxy: with `drain`, after what the engines posted has gone
  // out (net::Proxy::Shutdown). Called once, after the engines stopped
  // using their links; the destructor stops it without draining otherwise.
  void Shutdown(bool drain, int64_t timeout_ms);

 private:
  struct Pending;
  class Media;
  class Round;  // one Connect call's steps
  friend class NetMedium;
  // The proxy, started at the first network link.
  base::StatusOr<net::Proxy*> Proxy();

  Exchange* exchange_;
  ConnectorSpec spec_;
  base::Config config_;
  std::unique_ptr<Media> media_;
  std::mutex proxy_mu_;
  std::unique_ptr<net::Proxy> proxy_;  // GUARDED_BY(proxy_mu_)
  int net_links_ = 0;
};

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_CONNECT_CONNECTOR_H_
