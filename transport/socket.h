// TCP sockets with deadlines: every connect, accept, send and receive takes an
// absolute deadline and returns a Timeout Status instead of blocking past it.
// A Socket is owned by one thread at a time.
#ifndef RINGO_TRANSPORT_SOCKET_H_
#define RINGO_TRANSPORT_SOCKET_H_

#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace ringo::transport {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

inline Deadline DeadlineAfterMs(int64_t ms) { return Clock::now() + std::chrono::milliseconds(ms); }

// An IPv4 or IPv6 address with port.
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  std::string ToString() const;  // "1.2.3.4:5678" or "[::1]:5678"
  uint16_t port() const;
};

// Parses "host:port", "[v6]:port"; the host may be a name.
base::StatusOr<SocketAddress> ParseAddress(const std::string& text);

// The address to listen on: the first interface matching `ifname_spec`
// (RINGO_SOCKET_IFNAME syntax: prefixes, ^ excludes, = exact), or by default
// the first non-loopback interface that is up, else loopback. Port 0.
base::StatusOr<SocketAddress> ChooseListenAddress(const std::string& ifname_spec);

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket();
  Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Close();

  // Called on a new socket's descriptor before it binds or connects (socket
  // buffer sizes must be set then to take effect).
  using Configure = void (*)(int fd, const void* arg);

  // Listens on `address` (port 0 picks one); the bound address is in *bound.
  static base::StatusOr<Socket> Listen(const SocketAddress& address, SocketAddress* bound,
                                       Configure configure = nullptr, const void* arg = nullptr);
  // Connects, retrying refused connections until the deadline (the listener
  // may not be up yet).
  static base::StatusOr<Socket> Connect(const SocketAddress& address, Deadline deadline,
                                        Configure configure = nullptr, const void* arg = nullptr);
  // Accepts one connection.
  base::StatusOr<Socket> Accept(Deadline deadline);

  // Sends or receives exactly `bytes`; a closed peer is a RemoteError.
  base::Status SendAll(const void* data, size_t bytes, Deadline deadline);
  base::Status RecvAll(void* data, size_t bytes, Deadline deadline);
  // Receives what is available without blocking: bytes read, 0 if none yet,
  // RemoteError on EOF.
  base::StatusOr<size_t> RecvSome(void* data, size_t bytes);

 private:
  base::Status WaitFor(short events, Deadline deadline, const char* what);
  int fd_ = -1;
};

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_SOCKET_H_
