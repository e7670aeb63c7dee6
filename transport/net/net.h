// The network interface: what a transport between hosts provides, in the
// shape NCCL's net plugins have and nothing more. Two implementations: TCP
// sockets (socket/net.h) and InfiniBand verbs (ib/net.h); an in-memory fake for tests.
//
// A connection is one-way: the receiver listens and hands its opaque
// NetHandle to the sender (through the bootstrap); the sender connects, the
// receiver accepts. Memory is registered separately from data movement (a
// no-op for sockets, a memory region for verbs). Isend/Irecv are
// non-blocking and return a request that Test() progresses and completes;
// messages complete in order per connection, and a receive completes with
// the size the sender sent (at most the size posted). Every error is a
// Status naming the peer (its rank, given at connect/accept) and, for a peer
// that announced why it stopped, that peer's fault notice (origin rank,
// code, message) as the Status's origin.
//
// Thread safety: a Net is thread-safe; a connection and its requests are
// used by one thread (the proxy that owns it); Abort() may be called from
// any thread.
#ifndef RINGO_TRANSPORT_NET_NET_H_
#define RINGO_TRANSPORT_NET_NET_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "transport/peer_state.h"
#include "transport/socket.h"

namespace ringo::transport::net {

inline constexpr size_t kNetHandleBytes = 64;

// What a receiver publishes for its sender to connect to.
struct NetHandle {
  uint8_t bytes[kNetHandleBytes] = {};
};

struct NetProperties {
  std::string name;          // "eth0", "mlx5_0:1"
  std::string pci_path;      // sysfs path of the device, "" if virtual
  int64_t speed_mbps = 0;    // link speed, 0 if unknown
  int latency_us = 0;        // a guess at one-way latency
  int max_requests = 8;      // requests in flight per connection
  bool gpu_direct = false;   // can read/write registered GPU memory
  bool dmabuf = false;       // registers GPU memory through dma-buf
  size_t max_message = 0;    // largest message, 0: no limit
  uint64_t fabric = 0;       // devices with equal nonzero values reach each other; 0: any
};

enum class MemoryKind { kHost = 0, kCuda = 1 };

// A registration of memory for data movement (transport specific); null
// for transports that need none.
class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
};

// One isend or irecv. Owned by its connection; valid until Test() reports it
// done (or the connection closes).
class Request {
 public:
  virtual ~Request() = default;
};

// Who is on the other end, for messages.
struct PeerName {
  int rank = -1;
  std::string where;  // "10.0.0.2:41234"
};

class Connection {
 public:
  virtual ~Connection() = default;
  // Registers [data, data + bytes) for Isend/Irecv on this connection.
  virtual base::StatusOr<std::unique_ptr<MemoryRegion>> Register(void* data, size_t bytes, MemoryKind kind) = 0;
  // Progresses `request`; *done once it completed (*bytes: its size).
  // After done the request is released. An error ends the connection.
  virtual base::Status Test(Request* request, bool* done, size_t* bytes) = 0;
  // Progresses what needs no request: reads what the peer sent beside the
  // messages (its abort or close, flow-control notices), so that none of it
  // keeps PollFds readable while no request is in flight. An error ends the
  // connection, as Test's do. The proxy calls it before it sleeps.
  virtual base::Status Poll() { return base::Status(); }
  // File descriptors that become readable or writable when this connection
  // can make progress (the proxy sleeps in poll() on them); `events` as poll's.
  virtual void PollFds(std::vector<int>* fds, std::vector<short>* events) const = 0;
  // Tells the peer why this side stops (a fault notice: the peer's Test
  // fails with it as its origin), then closes. Best effort; any thread.
  virtual void Abort(const base::Status& why, int self_rank, uint64_t seq) = 0;
  // Closes in good order, after every message sent: the peer receives them
  // all, then its Test fails with a status whose origin_seq() is
  // kAfterEveryCollective. Best effort.
  virtual void Close() = 0;
  virtual const PeerName& peer() const = 0;
};

class SendConnection : public Connection {
 public:
  // Starts sending `bytes` from `data` (inside `region`, or any memory for
  // transports that register nothing). Null when `max_requests` are in
  // flight: try again after a Test completes one.
  virtual base::StatusOr<Request*> Isend(const void* data, size_t bytes, MemoryRegion* region) = 0;
};

class RecvConnection : public Connection {
 public:
  // Starts receiving the next message (at most `bytes`) into `data`. Null
  // when `max_requests` are in flight.
  virtual base::StatusOr<Request*> Irecv(void* data, size_t bytes, MemoryRegion* region) = 0;
};

class Listener {
 public:
  virtual ~Listener() = default;
  // Accepts the connection of the sender that was given this listener's
  // handle, `peer_rank` (checked: another sender is refused).
  virtual base::StatusOr<std::unique_ptr<RecvConnection>> Accept(int peer_rank, Deadline deadline) = 0;
};

// Who connects, for the handshake's checks and messages.
struct ConnectOptions {
  int self_rank = -1;
  int peer_rank = -1;
  uint64_t tag = 0;  // the communicator's: a connection of another one is refused
};

class Net {
 public:
  virtual ~Net() = default;
  virtual const char* name() const = 0;  // "socket", "ib", "fake"
  virtual int DeviceCount() const = 0;
  virtual base::StatusOr<NetProperties> Properties(int device) const = 0;
  // Listens on `device` for one connection; writes the handle to publish.
  virtual base::StatusOr<std::unique_ptr<Listener>> Listen(int device, const ConnectOptions& options,
                                                           NetHandle* handle) = 0;
  virtual base::StatusOr<std::unique_ptr<SendConnection>> Connect(int device, const NetHandle& handle,
                                                                  const ConnectOptions& options,
                                                                  Deadline deadline) = 0;
};

}  // namespace ringo::transport::net

#endif  // RINGO_TRANSPORT_NET_NET_H_
