// The verbs transport's parts shared by its net (net.cc: ports,
// handshake) and its connections (connection.cc: queue pairs, the data
// path). Private to transport/net.
#ifndef RINGO_TRANSPORT_NET_IB_CONNECTION_H_
#define RINGO_TRANSPORT_NET_IB_CONNECTION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "transport/net/ib/net.h"
#include "transport/net/internal/handshake.h"
#include "transport/net/ib/verbs.h"
#include "transport/net/net.h"
#include "transport/socket.h"

namespace ringo::transport::net::ib {

// Messages in flight per connection (the clear-to-send ring): every slot
// of a FIFO twice over (an edge with slots apart sends each as two).
inline constexpr int kMaxRequests = 16;
inline constexpr int kMaxQps = 16;
inline constexpr uint32_t kPartBits = 28;             // an immediate: slot (4 bits), part size (28)
inline constexpr uint32_t kTooBig = (1u << kPartBits) - 1;  // part size meaning "your receive is too small"
inline constexpr uint32_t kPartMax = kTooBig - 1;           // the largest part of a message
static_assert(kMaxRequests <= (1 << (32 - kPartBits)), "a request's slot fits its immediate");

// The largest message over `nqps` queue pairs.
uint64_t MaxMessage(int nqps);

// An active port, and its device's context and protection domain (shared by
// the device's ports, owned by the net).
struct Port {
  std::string name;  // "mlx5_0:1"
  std::string hca;   // "mlx5_0"
  int port_num = 1;
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
  ibv_port_attr attr{};
  int gid_index = 0;
  ibv_gid gid{};
  bool roce = false;    // Ethernet link layer: addressed by GID
  uint64_t fabric = 0;  // ports with equal values reach each other
  int numa = -1;
  std::string pci_path;
  int64_t speed_mbps = 0;
};

// What one end of a connection tells the other about its queue pairs.
struct Endpoint {
  uint16_t lid;
  uint8_t mtu;  // ibv_mtu
  uint8_t roce;
  uint32_t nqps;
  uint8_t gid[16];
  uint32_t qpn[kMaxQps];
  uint32_t psn[kMaxQps];
};

// A clear-to-send entry: the receive buffer of message seq (written last).
struct Cts {
  uint64_t addr;
  uint32_t rkey;
  uint32_t capacity;
  uint64_t seq_plus_1;  // 0: not yet offered
  uint64_t reserved;
};
static_assert(sizeof(Cts) == 32, "entries are half a cache line");

// Fault notices and the close travel on the control connection, as
// handshake.h's control messages.
using handshake::Control;
using handshake::ControlHeader;
using handshake::kControlMagic;

// A connection's completion queue, its event channel and its queue pairs.
class Queues {
 public:
  static base::StatusOr<std::unique_ptr<Queues>> Create(const VerbsApi* v, const Port* port, int nqps);
  ~Queues();
  Endpoint Local() const;
  // INIT -> RTR -> RTS against the peer's endpoint.
  base::Status ConnectTo(const Endpoint& remote, const IbNetOptions& options);

  const VerbsApi* v = nullptr;
  const Port* port = nullptr;
  ibv_comp_channel* channel = nullptr;
  ibv_cq* cq = nullptr;
  std::vector<ibv_qp*> qps;
  std::vector<uint32_t> psns;
};

struct Handshake {
  std::unique_ptr<Queues> queues;
  Socket control;
  PeerName peer;
  int self_rank = -1;
  // The sender's clear-to-send ring (the sender's own memory, or the
  // receiver's view of the sender's).
  uint64_t cts_addr = 0;
  uint32_t cts_rkey = 0;
};

// The sender's receives for the offers' immediates on queue pair 0 (the
// sender keeps kMaxRequests of them posted from before it says it is ready).
base::Status PostCtsReceives(Queues* q, int n);

std::unique_ptr<SendConnection> MakeSend(Handshake h, void* cts_ring, ibv_mr* cts_mr);
base::StatusOr<std::unique_ptr<RecvConnection>> MakeRecv(Handshake h);

}  // namespace ringo::transport::net::ib

#endif  // RINGO_TRANSPORT_NET_IB_CONNECTION_H_
