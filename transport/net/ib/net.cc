#include "transport/net/ib/net.h"

#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include "base/logging.h"
#include "transport/net/ib/connection.h"
#include "transport/net/internal/handshake.h"
#include "transport/net/internal/shared.h"

namespace ringo::transport::net {
namespace {

using base::Status;
using base::StatusOr;
using ib::Endpoint;
using ib::Handshake;
using ib::Port;

using handshake::Control;
using handshake::Transport;

constexpr uint32_t kReplyMagic = 0x52424752;  // "RGBR"

// The verbs transport's fields of a handle (handshake.h's head first).
struct HandleExtra {
  uint64_t fabric;
  uint8_t qps;
  uint8_t reserved[7];
};

// ...and of the hello on the control connection: where the sender's
// clear-to-send ring is, and its queue pairs.
struct HelloExtra {
  uint64_t cts_addr;
  uint32_t cts_rkey;
  uint32_t reserved;
  Endpoint endpoint;
};

struct Reply {
  uint32_t magic;
  uint32_t ok;
  Endpoint endpoint;
};

std::string ReadLine(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

bool Ipv4Mapped(const ibv_gid& g) {
  for (int i = 0; i < 10; ++i) {
    if (g.raw[i] != 0) return false;
  }
  return g.raw[10] == 0xff && g.raw[11] == 0xff;
}

// Link speed from the port's width and speed codes (IBTA), in Mbit/s.
int64_t SpeedMbps(const ibv_port_attr& a) {
  int lanes = 1;
  switch (a.active_width) {
    case 2: lanes = 4; break;
    case 4: lanes = 8; break;
    case 8: lanes = 12; break;
    case 16: lanes = 2; break;
    default: lanes = 1;
  }
  int64_t lane = 2500;
  switch (a.active_speed) {
    case 2: lane = 5000; break;
    case 4: case 8: lane = 10000; break;
    case 16: lane = 14000; break;
    case 32: lane = 25000; break;
    case 64: lane = 50000; break;
    case 128: lane = 100000; break;
    default: lane = 2500;
  }
  return lane * lanes;
}

// The GID a RoCE port is addressed by: RINGO_IB_GID_INDEX, else the first
// RoCE v2 IPv4-mapped entry (sysfs names each entry's type), else the first
// IPv4-mapped one, else index 0.
int ChooseGid(const ib::Port& p, const VerbsApi* v, int wanted, ibv_gid* gid) {
  if (wanted >= 0) {
    if (v->query_gid(p.context, static_cast<uint8_t>(p.port_num), wanted, gid) != 0) return -1;
    return wanted;
  }
  int mapped = -1;
  ibv_gid mapped_gid{};
  const std::string types = "/sys/class/infiniband/" + p.hca + "/ports/" + std::to_string(p.port_num) +
                            "/gid_attrs/types/";
  for (int i = 0; i < p.attr.gid_tbl_len && i < 256; ++i) {
    ibv_gid g{};
    if (v->query_gid(p.context, static_cast<uint8_t>(p.port_num), i, &g) != 0 || !Ipv4Mapped(g)) continue;
    const std::string type = ReadLine(types + std::to_string(i));
    if (type == "RoCE v2") {
      *gid = g;
      return i;
    }
    if (mapped < 0) {
      mapped = i;
      mapped_gid = g;
    }
  }
  if (mapped >= 0) {
    *gid = mapped_gid;
    return mapped;
  }
  return v->query_gid(p.context, static_cast<uint8_t>(p.port_num), 0, gid) == 0 ? 0 : -1;
}

// ------------------------------------------------------------- listener --

class IbListener : public Listener {
 public:
  IbListener(const VerbsApi* v, const Port* port, Socket socket, uint64_t nonce, ConnectOptions options,
             IbNetOptions net)
      : v_(v), port_(port), socket_(std::move(socket)), nonce_(nonce), options_(options), net_(std::move(net)) {}

  StatusOr<std::unique_ptr<RecvConnection>> Accept(int peer_rank, Deadline deadline) override {
    const std::string who = "rank " + std::to_string(options_.self_rank) + " waiting for rank " +
                            std::to_string(peer_rank) + " to connect over verbs";
    while (true) {
      HelloExtra h{};
      const uint32_t qps = static_cast<uint32_t>(net_.qps);
      ASSIGN_OR_RETURN(Socket accepted,
                       handshake::AcceptHello(socket_, Transport::kIb, options_, nonce_, peer_rank, deadline, &h,
                                              sizeof(h), [qps](const void* extra) {
                                                return static_cast<const HelloExtra*>(extra)->endpoint.nqps == qps;
                                              }));
      Socket* s = &accepted;
      auto queues = ib::Queues::Create(v_, port_, net_.qps);
      if (!queues.ok()) return queues.status().WithContext(who);
      Status st = (*queues)->ConnectTo(h.endpoint, net_);
      Reply reply{kReplyMagic, st.ok() ? 1u : 0u, (*queues)->Local()};
      RETURN_IF_ERROR(s->SendAll(&reply, sizeof(reply), deadline).WithContext(who));
      RETURN_IF_ERROR(st.WithContext(who));
      // The sender's queue pairs are ready to receive once it says so.
      handshake::ControlHeader ready{};
      RETURN_IF_ERROR(s->RecvAll(&ready, sizeof(ready), deadline).WithContext(who));
      if (!handshake::KnownControl(ready) || ready.type != static_cast<uint16_t>(Control::kReady)) {
        return base::RemoteError(who + ": it did not finish the verbs handshake").WithOrigin(peer_rank, who);
      }
      Handshake hs;
      hs.queues = std::move(queues).value();
      hs.peer = PeerName{peer_rank, shared::PeerAddressOf(s->fd())};
      hs.control = std::move(accepted);
      hs.self_rank = options_.self_rank;
      hs.cts_addr = h.cts_addr;
      hs.cts_rkey = h.cts_rkey;
      return ib::MakeRecv(std::move(hs));
    }
  }

 private:
  const VerbsApi* v_;
  const Port* port_;
  Socket socket_;
  uint64_t nonce_;
  ConnectOptions options_;
  IbNetOptions net_;
};

// ------------------------------------------------------------------ net --

class IbNet : public Net {
 public:
  IbNet(const VerbsApi* v, std::vector<std::unique_ptr<Port>> ports, SocketAddress control, IbNetOptions options)
      : v_(v), ports_(std::move(ports)), control_(control), options_(std::move(options)) {}

  const char* name() const override { return "ib"; }
  int DeviceCount() const override { return static_cast<int>(ports_.size()); }

  StatusOr<NetProperties> Properties(int device) const override {
    RETURN_IF_ERROR(CheckDevice(device));
    const Port& p = *ports_[device];
    NetProperties n;
    n.name = p.name;
    n.pci_path = p.pci_path;
    n.speed_mbps = p.speed_mbps;
    n.latency_us = 2;
    n.max_requests = ib::kMaxRequests;
    n.gpu_direct = false;
    n.dmabuf = false;  // GPU memory is not registered yet (ibv_reg_dmabuf_mr is its route)
    n.max_message = static_cast<size_t>(ib::MaxMessage(options_.qps));
    n.fabric = p.fabric;
    return n;
  }

  StatusOr<std::unique_ptr<Listener>> Listen(int device, const ConnectOptions& options, NetHandle* handle) override {
    RETURN_IF_ERROR(CheckDevice(device));
    SocketAddress bound;
    ASSIGN_OR_RETURN(Socket s, Socket::Listen(control_, &bound));
    HandleExtra extra{};
    extra.fabric = ports_[device]->fabric;
    extra.qps = static_cast<uint8_t>(options_.qps);
    const uint64_t nonce = handshake::WriteHandle(Transport::kIb, bound, &extra, sizeof(extra), handle);
    return std::unique_ptr<Listener>(
        new IbListener(v_, ports_[device].get(), std::move(s), nonce, options, options_));
  }

  StatusOr<std::unique_ptr<SendConnection>> Connect(int device, const NetHandle& handle, const ConnectOptions& options,
                                                    Deadline deadline) override {
    RETURN_IF_ERROR(CheckDevice(device));
    const Port* port = ports_[device].get();
    SocketAddress to;
    uint64_t nonce = 0;
    HandleExtra l{};
    RETURN_IF_ERROR(handshake::ReadHandle(Transport::kIb, handle, options, &to, &nonce, &l, sizeof(l)));
    const std::string who = "rank " + std::to_string(options.self_rank) + " connecting to rank " +
                            std::to_string(options.peer_rank) + " over verbs";
    if (l.qps != options_.qps) {
      return base::RemoteError(who + ": its handle asks for " + std::to_string(l.qps) + " queue pairs, this rank " +
                               std::to_string(options_.qps) + " (RINGO_IB_QPS_PER_CONNECTION)")
          .WithOrigin(options.peer_rank, who + ": a bad handle");
    }
    if (l.fabric != port->fabric) {
      return base::InvalidUsage(who + ": its port is on another fabric than " + port->name);
    }
    ASSIGN_OR_RETURN(auto queues, ib::Queues::Create(v_, port, options_.qps));
    // The clear-to-send ring the receiver writes into.
    void* ring = nullptr;
    const size_t ring_bytes = sizeof(ib::Cts) * ib::kMaxRequests;
    if (posix_memalign(&ring, 64, ring_bytes) != 0) return base::SystemError(who + ": no memory");
    std::memset(ring, 0, ring_bytes);
    ibv_mr* mr = v_->reg_mr(port->pd, ring, ring_bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (mr == nullptr) {
      std::free(ring);
      return base::SystemError(who + ": ibv_reg_mr: " + std::strerror(errno));
    }
    auto release = [&] {
      v_->dereg_mr(mr);
      std::free(ring);
    };
    auto s = Socket::Connect(to, deadline);
    if (!s.ok()) {
      release();
      return s.status().WithContext(who + " at " + to.ToString());
    }
    HelloExtra h{};
    h.cts_addr = reinterpret_cast<uintptr_t>(ring);
    h.cts_rkey = mr->rkey;
    h.endpoint = queues->Local();
    Reply reply{};
    Status st = handshake::SendHello(*s, Transport::kIb, options, nonce, &h, sizeof(h), deadline);
    if (st.ok()) st = s->RecvAll(&reply, sizeof(reply), deadline);
    if (st.ok() && (reply.magic != kReplyMagic || reply.ok != 1)) {
      st = base::RemoteError("it did not accept the connection").WithOrigin(options.peer_rank, who + ": refused");
    }
    if (st.ok()) st = queues->ConnectTo(reply.endpoint, options_);
    if (st.ok()) st = ib::PostCtsReceives(queues.get(), ib::kMaxRequests);
    const handshake::ControlHeader ready{handshake::kControlMagic, static_cast<uint16_t>(Control::kReady), 0};
    if (st.ok()) st = s->SendAll(&ready, sizeof(ready), deadline);
    if (!st.ok()) {
      queues.reset();
      release();
      return st.WithContext(who + " at " + to.ToString());
    }
    Handshake hs;
    hs.queues = std::move(queues);
    hs.control = std::move(s).value();
    hs.peer = PeerName{options.peer_rank, to.ToString()};
    hs.self_rank = options.self_rank;
    return ib::MakeSend(std::move(hs), ring, mr);
  }

 private:
  Status CheckDevice(int device) const {
    if (device < 0 || device >= DeviceCount()) {
      return base::InvalidArgument("verbs device " + std::to_string(device) + " of " + std::to_string(DeviceCount()));
    }
    return Status();
  }

  const VerbsApi* v_;
  std::vector<std::unique_ptr<Port>> ports_;
  SocketAddress control_;  // where control connections listen (port 0)
  IbNetOptions options_;
};

}  // namespace

bool HcaSelected(const std::string& spec, const std::string& hca, int port) {
  return shared::NameListSelects(spec, hca, port);
}

IbNetOptions IbNetOptionsFromConfig(const base::Config& config, int numa) {
  IbNetOptions o;
  o.hca_spec = config.ib_hca;
  o.gid_index = static_cast<int>(config.ib_gid_index);
  o.timeout = static_cast<int>(config.ib_timeout);
  o.retry_cnt = static_cast<int>(config.ib_retry_cnt);
  o.qps = static_cast<int>(std::clamp<int64_t>(config.ib_qps_per_connection, 1, ib::kMaxQps));
  o.timeout_ms = config.timeout_ms;
  o.ifname_spec = config.socket_ifname;
  o.numa = numa;
  return o;
}

StatusOr<std::unique_ptr<Net>> MakeIbNet(const IbNetOptions& options) {
  std::string why;
  const VerbsApi* v = Verbs(&why);
  if (v == nullptr) return base::InvalidUsage("verbs: " + why);
  if (options.qps < 1 || options.qps > ib::kMaxQps) {
    return base::InvalidArgument("verbs: " + std::to_string(options.qps) + " queue pairs per connection");
  }
  int n = 0;
  ibv_device** list = v->get_device_list(&n);
  if (list == nullptr || n == 0) {
    if (list != nullptr) v->free_device_list(list);
    return base::InvalidUsage("verbs: no RDMA device (" + std::string(list == nullptr ? std::strerror(errno) : "none") +
                              ")");
  }
  std::vector<std::unique_ptr<Port>> ports;
  std::string seen;
  for (int d = 0; d < n; ++d) {
    const std::string hca = v->get_device_name(list[d]);
    seen += (seen.empty() ? "" : ", ") + hca;
    ibv_context* ctx = v->open_device(list[d]);
    ibv_device_attr dattr{};
    if (ctx == nullptr) continue;
    if (v->query_device(ctx, &dattr) != 0) {
      v->close_device(ctx);
      continue;
    }
    ibv_pd* pd = nullptr;
    for (int p = 1; p <= dattr.phys_port_cnt; ++p) {
      if (!HcaSelected(options.hca_spec, hca, p)) continue;
      auto port = std::make_unique<Port>();
      port->hca = hca;
      port->port_num = p;
      port->name = hca + ":" + std::to_string(p);
      port->context = ctx;
      if (v->query_port(ctx, static_cast<uint8_t>(p), &port->attr) != 0 || port->attr.state != IBV_PORT_ACTIVE) {
        continue;
      }
      port->roce = port->attr.link_layer == IBV_LINK_LAYER_ETHERNET;
      port->gid_index = port->roce ? ChooseGid(*port, v, options.gid_index, &port->gid) : 0;
      if (!port->roce && v->query_gid(ctx, static_cast<uint8_t>(p), 0, &port->gid) != 0) port->gid_index = -1;
      if (port->gid_index < 0 || (!port->roce && port->attr.lid == 0)) continue;
      if (pd == nullptr) pd = v->alloc_pd(ctx);
      if (pd == nullptr) break;
      port->pd = pd;
      // One fabric: the link layer and, for InfiniBand, the subnet prefix.
      uint64_t prefix = 0;
      if (!port->roce) std::memcpy(&prefix, port->gid.raw, sizeof(prefix));
      port->fabric = Mix(Mix(0x52474e4f, port->roce ? 2 : 1), prefix) | 1;
      const std::string sys = "/sys/class/infiniband/" + hca + "/device";
      char real[PATH_MAX];
      if (realpath(sys.c_str(), real) != nullptr) port->pci_path = real;
      const std::string numa = ReadLine(sys + "/numa_node");
      port->numa = numa.empty() ? -1 : std::atoi(numa.c_str());
      port->speed_mbps = SpeedMbps(port->attr);
      ports.push_back(std::move(port));
    }
    if (pd == nullptr) v->close_device(ctx);  // no port of it is used
  }
  v->free_device_list(list);
  if (ports.empty()) {
    return base::InvalidUsage("verbs: no active port" +
                              std::string(options.hca_spec.empty() ? "" : " that RINGO_IB_HCA='" + options.hca_spec +
                                                                               "' selects") +
                              " (devices: " + seen + ")");
  }
  // The ports nearest this rank first.
  std::stable_sort(ports.begin(), ports.end(), [&](const auto& a, const auto& b) {
    return (a->numa == options.numa && options.numa >= 0) > (b->numa == options.numa && options.numa >= 0);
  });
  ASSIGN_OR_RETURN(SocketAddress control, ChooseListenAddress(options.ifname_spec));
  return std::unique_ptr<Net>(new IbNet(v, std::move(ports), control, options));
}

}  // namespace ringo::transport::net
