// The net interface over TCP sockets. A connection is several TCP streams
// (RINGO_NET_STREAMS); a message of at least kSplitBytes is cut into one
// part per stream, sent side by side, smaller ones go whole on the streams
// in turn. Every part is framed: magic, type, the message's sequence number,
// its offset, length and total, and a check of those fields; the receiver
// checks each frame against what it expects next, so a wrong peer, a peer
// that sends garbage, or one that dies is an error naming it, never a hang
// or a read out of bounds. TCP_NODELAY and large socket buffers on every
// stream. Devices are the interfaces RINGO_SOCKET_IFNAME selects (IPv4 and
// IPv6), or loopback when no other is up.
//
// Wire protocol of a connection (all integers little-endian):
//   handshake, on every stream: the sender's Hello (magic "RNGN", version,
//   the listener's nonce, connection id, stream index and count, ranks,
//   tag), the receiver's one-byte acceptance once every stream of the
//   connection has arrived and checked;
//   then frames (FrameHeader, then `length` payload bytes) from sender to
//   receiver, and at most one kAbort frame either way (a fault notice) before
//   the side that sent it closes.
#ifndef RINGO_TRANSPORT_NET_SOCKET_NET_H_
#define RINGO_TRANSPORT_NET_SOCKET_NET_H_

#include <memory>
#include <string>
#include <vector>

#include "base/config.h"
#include "transport/net/net.h"

namespace ringo::transport::net {

// Messages of at least this many bytes are split across the streams.
inline constexpr size_t kSplitBytes = 64 * 1024;

struct SocketNetOptions {
  std::string ifname_spec;  // RINGO_SOCKET_IFNAME
  int streams = 2;          // RINGO_NET_STREAMS
  int family = 0;           // RINGO_SOCKET_FAMILY: AF_INET, AF_INET6, 0 for either
  int64_t socket_buffer_bytes = 4 << 20;
  int64_t timeout_ms = 300000;  // TCP_USER_TIMEOUT: unacknowledged data fails the stream
};

SocketNetOptions SocketNetOptionsFromConfig(const base::Config& config);

// The interfaces `ifname_spec` selects (loopback when nothing else matches
// an empty spec); an error when none does.
base::StatusOr<std::unique_ptr<Net>> MakeSocketNet(const SocketNetOptions& options);

}  // namespace ringo::transport::net

#endif  // RINGO_TRANSPORT_NET_SOCKET_NET_H_
