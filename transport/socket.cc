#include "transport/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "base/check.h"

namespace ringo::transport {
namespace {

using base::Status;
using base::StatusOr;

int MsUntil(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > 1000 ? 1000 : static_cast<int>(left);
}

Status SetNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  RINGO_ERRNO(flags);
  RINGO_ERRNO(fcntl(fd, F_SETFL, flags | O_NONBLOCK));
  return base::OkStatus();
}

// One entry of RINGO_SOCKET_IFNAME: "=eth0" exact, "eth" prefix.
bool MatchesSpec(const std::string& name, const std::string& spec) {
  if (spec.empty()) return true;
  std::string list = spec;
  bool exclude = false;
  if (list[0] == '^') {
    exclude = true;
    list = list.substr(1);
  }
  bool exact = false;
  if (!list.empty() && list[0] == '=') {
    exact = true;
    list = list.substr(1);
  }
  bool matched = false;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) {
      matched = matched || (exact ? name == item : name.compare(0, item.size(), item) == 0);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return exclude ? !matched : matched;
}

}  // namespace

std::string SocketAddress::ToString() const {
  char host[INET6_ADDRSTRLEN] = {0};
  if (storage.ss_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&storage);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (storage.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  return "<no address>";
}

uint16_t SocketAddress::port() const {
  if (storage.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (storage.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

StatusOr<SocketAddress> ParseAddress(const std::string& text) {
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return base::InvalidArgument("address '" + text + "' is not [host]:port");
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return base::InvalidArgument("address '" + text + "' is not host:port");
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  char* end = nullptr;
  long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p < 0 || p > 65535) {
    return base::InvalidArgument("address '" + text + "' has a bad port");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* info = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &info);
  if (rc != 0 || info == nullptr) {
    return base::InvalidArgument("cannot resolve '" + host + "': " + gai_strerror(rc));
  }
  SocketAddress out;
  std::memcpy(&out.storage, info->ai_addr, info->ai_addrlen);
  out.length = info->ai_addrlen;
  freeaddrinfo(info);
  return out;
}

StatusOr<SocketAddress> ChooseListenAddress(const std::string& spec) {
  ifaddrs* list = nullptr;
  RINGO_ERRNO(getifaddrs(&list));
  SocketAddress chosen, loopback;
  bool have_chosen = false, have_loopback = false;
  for (ifaddrs* ifa = list; ifa != nullptr && !have_chosen; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || !(ifa->ifa_flags & IFF_UP)) continue;
    int family = ifa->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (family == AF_INET6) {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(ifa->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr)) continue;  // needs a scope id
    }
    std::string name = ifa->ifa_name;
    SocketAddress addr;
    addr.length = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    std::memcpy(&addr.storage, ifa->ifa_addr, addr.length);
    bool is_loopback = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
    if (!spec.empty()) {
      if (MatchesSpec(name, spec)) {
        chosen = addr;
        have_chosen = true;
      }
    } else if (!is_loopback && family == AF_INET) {
      chosen = addr;
      have_chosen = true;
    } else if (is_loopback && family == AF_INET && !have_loopback) {
      loopback = addr;
      have_loopback = true;
    }
  }
  freeifaddrs(list);
  if (!have_chosen && spec.empty() && have_loopback) {
    chosen = loopback;
    have_chosen = true;
  }
  if (!have_chosen) {
    return base::InvalidArgument("no network interface matches RINGO_SOCKET_IFNAME='" + spec + "'");
  }
  if (chosen.storage.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&chosen.storage)->sin_port = 0;
  else reinterpret_cast<sockaddr_in6*>(&chosen.storage)->sin6_port = 0;
  return chosen;
}

Socket::~Socket() { Close(); }

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void Socket::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

StatusOr<Socket> Socket::Listen(const SocketAddress& address, SocketAddress* bound, Configure configure,
                                const void* arg) {
  Socket s(::socket(address.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  RINGO_ERRNO(s.fd());
  if (configure != nullptr) configure(s.fd(), arg);
  int one = 1;
  RINGO_ERRNO(setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)));
  if (::bind(s.fd(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) != 0) {
    return base::SystemError("cannot listen on " + address.ToString() + ": " + std::strerror(errno));
  }
  RINGO_ERRNO(::listen(s.fd(), 1024));
  RETURN_IF_ERROR(SetNonBlocking(s.fd()));
  bound->length = sizeof(bound->storage);
  RINGO_ERRNO(getsockname(s.fd(), reinterpret_cast<sockaddr*>(&bound->storage), &bound->length));
  return s;
}

StatusOr<Socket> Socket::Connect(const SocketAddress& address, Deadline deadline, Configure configure,
                                 const void* arg) {
  auto backoff = std::chrono::milliseconds(1);
  while (true) {
    Socket s(::socket(address.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    RINGO_ERRNO(s.fd());
    if (configure != nullptr) configure(s.fd(), arg);
    RETURN_IF_ERROR(SetNonBlocking(s.fd()));
    int rc = ::connect(s.fd(), reinterpret_cast<const sockaddr*>(&address.storage), address.length);
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      Status st = s.WaitFor(POLLOUT, deadline, "connect");
      if (!st.ok()) return st.WithContext("connecting to " + address.ToString());
      socklen_t len = sizeof(err);
      RINGO_ERRNO(getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len));
    }
    if (err == 0) {
      int one = 1;
      setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return s;
    }
    if (err != ECONNREFUSED && err != ECONNRESET && err != ETIMEDOUT && err != EAGAIN) {
      return base::SystemError("cannot connect to " + address.ToString() + ": " + std::strerror(err));
    }
    if (Clock::now() + backoff >= deadline) {
      return base::Timeout("cannot connect to " + address.ToString() + " before the deadline: " +
                           std::strerror(err));
    }
    std::this_thread::sleep_for(backoff);
    if (backoff < std::chrono::milliseconds(100)) backoff *= 2;
  }
}

StatusOr<Socket> Socket::Accept(Deadline deadline) {
  while (true) {
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return Socket(fd);
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return base::SystemError(std::string("accept failed: ") + std::strerror(errno));
    }
    RETURN_IF_ERROR(WaitFor(POLLIN, deadline, "accept"));
  }
}

Status Socket::WaitFor(short events, Deadline deadline, const char* what) {
  while (true) {
    pollfd p{fd_, events, 0};
    int rc = ::poll(&p, 1, MsUntil(deadline));
    if (rc > 0) return base::OkStatus();
    if (rc < 0 && errno != EINTR) return base::SystemError(std::string("poll failed: ") + std::strerror(errno));
    if (rc == 0 && Clock::now() >= deadline) return base::Timeout(std::string(what) + " timed out");
  }
}

Status Socket::SendAll(const void* data, size_t bytes, Deadline deadline) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::send(fd_, p, bytes, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      RETURN_IF_ERROR(WaitFor(POLLOUT, deadline, "send"));
      continue;
    }
    return base::RemoteError(std::string("send failed: ") + std::strerror(errno));
  }
  return base::OkStatus();
}

Status Socket::RecvAll(void* data, size_t bytes, Deadline deadline) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    ssize_t n = ::recv(fd_, p, bytes, 0);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return base::RemoteError("connection closed by peer");
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      RETURN_IF_ERROR(WaitFor(POLLIN, deadline, "receive"));
      continue;
    }
    return base::RemoteError(std::string("receive failed: ") + std::strerror(errno));
  }
  return base::OkStatus();
}

StatusOr<size_t> Socket::RecvSome(void* data, size_t bytes) {
  ssize_t n = ::recv(fd_, data, bytes, 0);
  if (n > 0) return static_cast<size_t>(n);
  if (n == 0) return base::RemoteError("connection closed by peer");
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return size_t{0};
  return base::RemoteError(std::string("receive failed: ") + std::strerror(errno));
}

}  // namespace ringo::transport
