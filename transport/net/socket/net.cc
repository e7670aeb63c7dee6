// The net interface over TCP sockets: its devices (the interfaces
// RINGO_SOCKET_IFNAME selects), listening, connecting and accepting with
// the handshake; the connections themselves are connection.cc's.
#include "transport/net/socket/net.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <random>

#include "transport/net/internal/handshake.h"
#include "transport/net/internal/shared.h"
#include "transport/net/socket/connection.h"

namespace ringo::transport::net {
namespace {

using base::Status;
using base::StatusOr;

using handshake::Transport;
using tcp::HandleExtra;
using tcp::HelloExtra;
using tcp::kMaxRequests;
using tcp::kMaxStreams;

struct ConfigureArgs {
  int64_t buffer_bytes;
};

void ConfigureSocket(int fd, const void* arg) {
  const auto* a = static_cast<const ConfigureArgs*>(arg);
  const int bytes = static_cast<int>(std::min<int64_t>(a->buffer_bytes, INT_MAX));
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
}

std::string ReadSysfs(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

// --------------------------------------------------------------- listener --

class TcpListener : public Listener {
 public:
  TcpListener(Socket socket, uint64_t nonce, ConnectOptions options, SocketNetOptions net)
      : socket_(std::move(socket)), nonce_(nonce), options_(options), net_(std::move(net)) {}

  StatusOr<std::unique_ptr<RecvConnection>> Accept(int peer_rank, Deadline deadline) override {
    std::map<uint64_t, std::vector<Socket>> pending;  // by connection id, by stream
    while (true) {
      HelloExtra h{};
      ASSIGN_OR_RETURN(Socket s, handshake::AcceptHello(socket_, Transport::kSocket, options_, nonce_, peer_rank,
                                                         deadline, &h, sizeof(h), [](const void* extra) {
                                                           const auto* e = static_cast<const HelloExtra*>(extra);
                                                           return e->streams >= 1 && e->streams <= kMaxStreams &&
                                                                  e->stream < e->streams;
                                                         }));
      std::vector<Socket>& streams = pending[h.connection];
      if (streams.size() < h.streams) streams.resize(h.streams);
      if (streams.size() != h.streams || streams[h.stream].valid()) continue;
      tcp::TuneStream(s.fd(), net_.timeout_ms);
      streams[h.stream] = std::move(s);
      bool complete = true;
      for (const Socket& t : streams) complete = complete && t.valid();
      if (!complete) continue;
      for (Socket& t : streams) {
        const char ok = 1;
        RETURN_IF_ERROR(t.SendAll(&ok, 1, deadline).WithContext("accepting rank " + std::to_string(peer_rank)));
      }
      PeerName peer{peer_rank, shared::PeerAddressOf(streams[0].fd())};
      return tcp::MakeRecv(std::move(streams), peer, options_.self_rank);
    }
  }

 private:
  Socket socket_;
  uint64_t nonce_;
  ConnectOptions options_;
  SocketNetOptions net_;
};

// -------------------------------------------------------------------- net --

struct Device {
  std::string name;
  SocketAddress address;  // port 0
};

class SocketNet : public Net {
 public:
  SocketNet(std::vector<Device> devices, SocketNetOptions options)
      : devices_(std::move(devices)), options_(std::move(options)) {}

  const char* name() const override { return "socket"; }
  int DeviceCount() const override { return static_cast<int>(devices_.size()); }

  StatusOr<NetProperties> Properties(int device) const override {
    RETURN_IF_ERROR(CheckDevice(device));
    NetProperties p;
    p.name = devices_[device].name;
    const std::string base = "/sys/class/net/" + p.name;
    char real[PATH_MAX];
    if (realpath((base + "/device").c_str(), real) != nullptr) p.pci_path = real;
    const std::string speed = ReadSysfs(base + "/speed");
    if (!speed.empty() && speed[0] != '-') p.speed_mbps = std::strtoll(speed.c_str(), nullptr, 10);
    p.latency_us = 20;
    p.max_requests = kMaxRequests;
    p.max_message = UINT32_MAX;
    return p;
  }

  StatusOr<std::unique_ptr<Listener>> Listen(int device, const ConnectOptions& options, NetHandle* handle) override {
    RETURN_IF_ERROR(CheckDevice(device));
    SocketAddress bound;
    const ConfigureArgs args{options_.socket_buffer_bytes};
    ASSIGN_OR_RETURN(Socket s, Socket::Listen(devices_[device].address, &bound, &ConfigureSocket, &args));
    const HandleExtra extra{static_cast<uint16_t>(options_.streams)};
    const uint64_t nonce = handshake::WriteHandle(Transport::kSocket, bound, &extra, sizeof(extra), handle);
    return std::unique_ptr<Listener>(new TcpListener(std::move(s), nonce, options, options_));
  }

  StatusOr<std::unique_ptr<SendConnection>> Connect(int device, const NetHandle& handle, const ConnectOptions& options,
                                                    Deadline deadline) override {
    RETURN_IF_ERROR(CheckDevice(device));
    SocketAddress to;
    uint64_t nonce = 0;
    HandleExtra l{};
    RETURN_IF_ERROR(handshake::ReadHandle(Transport::kSocket, handle, options, &to, &nonce, &l, sizeof(l)));
    const std::string who = "rank " + std::to_string(options.self_rank) + " connecting to rank " +
                            std::to_string(options.peer_rank);
    if (l.streams < 1 || l.streams > kMaxStreams) {
      return base::RemoteError(who + ": its handle asks for " + std::to_string(l.streams) + " streams")
          .WithOrigin(options.peer_rank, who + ": a bad handle");
    }
    std::random_device rd;
    const uint64_t connection = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    const ConfigureArgs args{options_.socket_buffer_bytes};
    std::vector<Socket> streams;
    for (int i = 0; i < l.streams; ++i) {
      auto s = Socket::Connect(to, deadline, &ConfigureSocket, &args);
      if (!s.ok()) return s.status().WithContext(who + " at " + to.ToString());
      tcp::TuneStream(s->fd(), options_.timeout_ms);
      const HelloExtra h{static_cast<uint16_t>(i), l.streams, 0, connection};
      RETURN_IF_ERROR(handshake::SendHello(*s, Transport::kSocket, options, nonce, &h, sizeof(h), deadline)
                          .WithContext(who + " at " + to.ToString()));
      streams.push_back(std::move(s).value());
    }
    for (Socket& s : streams) {
      char ok = 0;
      Status st = s.RecvAll(&ok, 1, deadline);
      if (!st.ok() || ok != 1) {
        return base::RemoteError(who + " at " + to.ToString() + ": it did not accept the connection" +
                                 (st.ok() ? "" : " (" + st.message() + ")"));
      }
    }
    PeerName peer{options.peer_rank, to.ToString()};
    return tcp::MakeSend(std::move(streams), peer, options.self_rank);
  }

 private:
  Status CheckDevice(int device) const {
    if (device < 0 || device >= DeviceCount()) {
      return base::InvalidArgument("socket device " + std::to_string(device) + " of " +
                                   std::to_string(DeviceCount()));
    }
    return Status();
  }

  std::vector<Device> devices_;
  SocketNetOptions options_;
};

}  // namespace

SocketNetOptions SocketNetOptionsFromConfig(const base::Config& config) {
  SocketNetOptions o;
  o.ifname_spec = config.socket_ifname;
  o.streams = static_cast<int>(std::clamp<int64_t>(config.net_streams, 1, kMaxStreams));
  o.timeout_ms = config.timeout_ms;
  o.family = config.socket_family == "ipv4" ? AF_INET : config.socket_family == "ipv6" ? AF_INET6 : 0;
  return o;
}

StatusOr<std::unique_ptr<Net>> MakeSocketNet(const SocketNetOptions& options) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return base::SystemError(std::string("getifaddrs: ") + std::strerror(errno));
  std::vector<Device> devices, loopback;
  for (ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || !(ifa->ifa_flags & IFF_UP)) continue;
    const int family = ifa->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (options.family != 0 && family != options.family) continue;
    if (family == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(ifa->ifa_addr)->sin6_addr)) {
      continue;  // needs a scope id
    }
    Device d;
    d.name = ifa->ifa_name;
    d.address.length = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    std::memcpy(&d.address.storage, ifa->ifa_addr, d.address.length);
    const bool is_loopback = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
    if (!shared::NameListSelects(options.ifname_spec, d.name)) continue;
    if (is_loopback && options.ifname_spec.empty()) {
      loopback.push_back(d);
      continue;
    }
    // One device per interface: its IPv4 address, else its first IPv6 one.
    auto same = std::find_if(devices.begin(), devices.end(), [&](const Device& o) { return o.name == d.name; });
    if (same == devices.end()) {
      devices.push_back(d);
    } else if (family == AF_INET && same->address.storage.ss_family != AF_INET) {
      *same = d;
    }
  }
  freeifaddrs(list);
  if (devices.empty() && !loopback.empty()) devices.push_back(loopback[0]);
  if (devices.empty()) {
    return base::InvalidArgument("no network interface for the socket transport matches RINGO_SOCKET_IFNAME='" +
                                 options.ifname_spec + "'" +
                                 (options.family == 0 ? "" : " with an address of RINGO_SOCKET_FAMILY"));
  }
  return std::unique_ptr<Net>(new SocketNet(std::move(devices), options));
}

}  // namespace ringo::transport::net
