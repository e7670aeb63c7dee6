// The socket transport's connections (connection.cc): a connection is
// several TCP streams with framed messages on them (net.h describes the
// wire protocol). What the transport's net (net.cc: devices, listening,
// connecting, the handshake) needs of them. Private to transport/net.
#ifndef RINGO_TRANSPORT_NET_SOCKET_CONNECTION_H_
#define RINGO_TRANSPORT_NET_SOCKET_CONNECTION_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "transport/net/net.h"
#include "transport/socket.h"

namespace ringo::transport::net::tcp {

inline constexpr int kMaxStreams = 64;
inline constexpr int kMaxRequests = 16;

// The socket transport's fields of a handle (handshake.h's head first).
struct HandleExtra {
  uint16_t streams;  // TCP streams per connection
};

// ...and of a hello: one per stream.
struct HelloExtra {
  uint16_t stream;
  uint16_t streams;
  uint32_t reserved;
  uint64_t connection;  // the same on every stream of one connection
};

// TCP_NODELAY, and TCP_USER_TIMEOUT so that data unacknowledged for
// timeout_ms fails the stream, on a stream of a connection.
void TuneStream(int fd, int64_t timeout_ms);

// The two ends of a connection over its streams, which have made the
// handshake (stream i at index i).
std::unique_ptr<SendConnection> MakeSend(std::vector<Socket> streams, PeerName peer, int self_rank);
std::unique_ptr<RecvConnection> MakeRecv(std::vector<Socket> streams, PeerName peer, int self_rank);

}  // namespace ringo::transport::net::tcp

#endif  // RINGO_TRANSPORT_NET_SOCKET_CONNECTION_H_
