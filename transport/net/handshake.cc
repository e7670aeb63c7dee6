#include "transport/net/internal/handshake.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "base/logging.h"

namespace ringo::transport::net::handshake {
namespace {

constexpr uint32_t kHandleMagic = 0x48474e52;  // "RNGH"
constexpr uint32_t kHelloMagic = 0x4c474e52;   // "RNGL"
constexpr uint16_t kWireVersion = 2;
// A connection that says nothing for this long is dropped (a stranger).
constexpr int64_t kHelloTimeoutMs = 2000;

struct HandleHead {
  uint32_t magic;
  uint16_t version;
  uint8_t transport;
  uint8_t reserved;
  uint16_t family;
  uint16_t port;  // network order
  uint32_t reserved2;
  uint64_t nonce;  // the listener's: a sender with another listener's handle is refused
  uint8_t addr[16];
};
static_assert(sizeof(HandleHead) + kHandleExtraBytes <= kNetHandleBytes, "the handle fits");

struct HelloHead {
  uint32_t magic;
  uint16_t version;
  uint8_t transport;
  uint8_t reserved;
  int32_t sender_rank;
  int32_t receiver_rank;
  uint64_t listener_nonce;
  uint64_t tag;
};

const char* Name(Transport t) { return t == Transport::kIb ? "verbs" : "socket"; }

}  // namespace

uint64_t WriteHandle(Transport transport, const SocketAddress& bound, const void* extra, size_t extra_bytes,
                     NetHandle* out) {
  std::random_device rd;
  HandleHead h{};
  h.magic = kHandleMagic;
  h.version = kWireVersion;
  h.transport = static_cast<uint8_t>(transport);
  h.nonce = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ 1;
  shared::PutAddress(bound, &h.family, &h.port, h.addr);
  *out = NetHandle();
  std::memcpy(out->bytes, &h, sizeof(h));
  std::memcpy(out->bytes + sizeof(h), extra, std::min(extra_bytes, kHandleExtraBytes));
  return h.nonce;
}

base::Status ReadHandle(Transport transport, const NetHandle& handle, const ConnectOptions& options,
                        SocketAddress* to, uint64_t* nonce, void* extra, size_t extra_bytes) {
  HandleHead h;
  std::memcpy(&h, handle.bytes, sizeof(h));
  if (h.magic != kHandleMagic || h.version != kWireVersion || h.transport != static_cast<uint8_t>(transport) ||
      (h.family != AF_INET && h.family != AF_INET6)) {
    const std::string who = "rank " + std::to_string(options.self_rank) + " connecting to rank " +
                            std::to_string(options.peer_rank);
    return base::RemoteError(who + ": its handle is not a " + Name(transport) + " transport handle of this version")
        .WithOrigin(options.peer_rank, who + ": a bad handle");
  }
  *to = shared::GetAddress(h.family, h.port, h.addr);
  *nonce = h.nonce;
  std::memcpy(extra, handle.bytes + sizeof(h), std::min(extra_bytes, kHandleExtraBytes));
  return base::OkStatus();
}

base::Status SendHello(Socket& socket, Transport transport, const ConnectOptions& options, uint64_t nonce,
                       const void* extra, size_t extra_bytes, Deadline deadline) {
  HelloHead h{};
  h.magic = kHelloMagic;
  h.version = kWireVersion;
  h.transport = static_cast<uint8_t>(transport);
  h.sender_rank = options.self_rank;
  h.receiver_rank = options.peer_rank;
  h.listener_nonce = nonce;
  h.tag = options.tag;
  RETURN_IF_ERROR(socket.SendAll(&h, sizeof(h), deadline));
  return extra_bytes > 0 ? socket.SendAll(extra, extra_bytes, deadline) : base::OkStatus();
}

base::StatusOr<Socket> AcceptHello(Socket& listener, Transport transport, const ConnectOptions& self, uint64_t nonce,
                                   int peer_rank, Deadline deadline, void* extra, size_t extra_bytes,
                                   const std::function<bool(const void* extra)>& accept_extra) {
  while (true) {
    auto s = listener.Accept(deadline);
    if (!s.ok()) {
      return s.status().WithContext("rank " + std::to_string(self.self_rank) + " waiting for rank " +
                                    std::to_string(peer_rank) + " to connect over " + Name(transport));
    }
    HelloHead h{};
    const Deadline hello_by = std::min(deadline, DeadlineAfterMs(kHelloTimeoutMs));
    if (!s->RecvAll(&h, sizeof(h), hello_by).ok()) continue;  // a stranger that said nothing useful
    const bool ours = h.magic == kHelloMagic && h.version == kWireVersion &&
                      h.transport == static_cast<uint8_t>(transport) && h.listener_nonce == nonce &&
                      h.tag == self.tag && h.receiver_rank == self.self_rank;
    if (ours && extra_bytes > 0 && !s->RecvAll(extra, extra_bytes, hello_by).ok()) continue;
    if (!ours || (accept_extra && !accept_extra(extra))) {
      RINGO_LOG(WARN) << "rank " << self.self_rank << ": dropped a " << Name(transport)
                      << " connection that is not one of this communicator's (bad hello)";
      continue;
    }
    if (h.sender_rank != peer_rank) {
      RINGO_LOG(WARN) << "rank " << self.self_rank << ": rank " << h.sender_rank << " connected where rank "
                      << peer_rank << " was expected; dropped";
      continue;
    }
    return std::move(s).value();
  }
}

bool KnownControl(const ControlHeader& h) {
  if (h.magic != kControlMagic) return false;
  switch (static_cast<Control>(h.type)) {
    case Control::kReady: return h.length == 0;
    case Control::kAbort: return h.length == sizeof(shared::Notice);
    case Control::kClose: return h.length <= sizeof(uint64_t);
  }
  return false;
}

}  // namespace ringo::transport::net::handshake
