// The handshake and control messages every network transport shares, so
// that the socket and verbs transports keep only their data paths:
//
// - the handle a listener publishes: a common head (magic, version, which
//   transport, the address and port listened on, the listener's nonce),
//   then the transport's own fields;
// - the hello a sender opens every connection with: who sends, to whom,
//   the listener's nonce and the communicator's tag, then the transport's
//   own fields; the listener drops a stranger (another nonce, tag or
//   receiver, garbage, silence) with a warning and waits on, and drops a
//   sender other than the one it expects;
// - control messages: an abort, carrying the fault notice of the rank where
//   the fault began (peer_state.h), and a close in good order.
//
// Private to transport/net.
#ifndef RINGO_TRANSPORT_NET_INTERNAL_HANDSHAKE_H_
#define RINGO_TRANSPORT_NET_INTERNAL_HANDSHAKE_H_

#include <cstddef>
#include <cstdint>
#include <functional>

#include "base/status.h"
#include "transport/net/internal/shared.h"
#include "transport/net/net.h"
#include "transport/socket.h"

namespace ringo::transport::net::handshake {

enum class Transport : uint8_t { kSocket = 1, kIb = 2 };

// Bytes of a handle after its head, for the transport's own fields.
inline constexpr size_t kHandleExtraBytes = 24;

// Writes `out`: the head (for the address `bound`, a fresh nonce) and
// `extra`. Returns the nonce, which the listener checks in every hello.
uint64_t WriteHandle(Transport transport, const SocketAddress& bound, const void* extra, size_t extra_bytes,
                     NetHandle* out);

// Reads a handle `options.peer_rank` published: its address, its nonce and
// the transport's fields; a RemoteError naming that rank when it is not a
// handle of `transport` and this version.
base::Status ReadHandle(Transport transport, const NetHandle& handle, const ConnectOptions& options, SocketAddress* to,
                        uint64_t* nonce, void* extra, size_t extra_bytes);

// Sends the hello on a fresh connection to the listener of `nonce`, then
// `extra` (the transport's fields).
base::Status SendHello(Socket& socket, Transport transport, const ConnectOptions& options, uint64_t nonce,
                       const void* extra, size_t extra_bytes, Deadline deadline);

// Accepts connections on `listener` until one says hello as `peer_rank`
// for this listener's `nonce` and this rank (`self`: rank and tag), with
// transport fields `extra` (extra_bytes) that `accept_extra` accepts; drops
// every other with a warning. Returns that connection. An error only for
// the listener itself (the deadline passed, the socket failed).
base::StatusOr<Socket> AcceptHello(Socket& listener, Transport transport, const ConnectOptions& self, uint64_t nonce,
                                   int peer_rank, Deadline deadline, void* extra, size_t extra_bytes,
                                   const std::function<bool(const void* extra)>& accept_extra);

// ---- control messages ----

enum class Control : uint16_t { kReady = 1, kAbort = 2, kClose = 3 };

// A control message's header; its body follows (an abort: the notice).
struct ControlHeader {
  uint32_t magic;
  uint16_t type;    // Control
  uint16_t length;  // of the body
};
inline constexpr uint32_t kControlMagic = 0x43424752;  // "RGBC"

// The body of an abort: `why` (not OK) as this rank's notice for
// collective `seq`.
inline shared::Notice AbortBody(const base::Status& why, int self_rank, uint64_t seq) {
  return shared::ToNotice(why, self_rank, seq);
}
// What a receiver of an abort reports: `where`, the origin rank and its
// message (naming `peer_rank` where the notice names no rank).
inline base::Status AbortStatus(const shared::Notice& body, const std::string& where, int peer_rank) {
  return shared::FromNotice(body, where, peer_rank);
}
// Whether a header announces a control message this version knows, with a
// body of the size its type has (an abort: a notice; a close: up to 8 bytes).
bool KnownControl(const ControlHeader& h);

}  // namespace ringo::transport::net::handshake

#endif  // RINGO_TRANSPORT_NET_INTERNAL_HANDSHAKE_H_
