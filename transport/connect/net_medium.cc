// Host FIFOs across hosts: each side keeps a FIFO in its own memory, with
// room before every slot for the slot's metadata (net::kProxySlotPrefix),
// and the communicator's proxy moves filled slots over the connection the
// receiver listened for and the sender made.
#include <cstring>
#include <string>
#include <utility>

#include "base/logging.h"
#include "transport/connect/media.h"
#include "transport/net/registry.h"

namespace ringo::transport {
namespace {

using base::Status;
using base::StatusOr;

struct NetOffer {
  uint32_t kind;  // net::NetKind, as the receiver chose it
  uint32_t reserved;
  net::NetHandle handle;
};
static_assert(sizeof(NetOffer) <= kOfferBlobBytes, "an offer blob holds a network handle");

class NetMedium : public FifoMedium {
 public:
  NetMedium(const base::Config& config, std::function<StatusOr<net::Proxy*>()> proxy)
      : config_(config), proxy_(std::move(proxy)) {}

  Medium kind() const override { return Medium::kNet; }

  Status Create(const PairContext& pair, Made* made, OfferBlob* offer) override {
    ASSIGN_OR_RETURN(net::Net * network, PairNet(pair, "from"));
    NetOffer o{};
    net::ConnectOptions opts{pair.spec->rank, pair.peer, pair.spec->tag};
    ASSIGN_OR_RETURN(made->listener, network->Listen(Device(network, pair), opts, &o.handle));
    std::memcpy(offer->bytes, &o, sizeof(o));
    made->memory = AllocateProcessFifo(pair.geometry.slot_bytes, pair.spec->rank, net::kProxySlotPrefix);
    made->header = static_cast<FifoHeader*>(made->memory->base());
    made->header->sender_rank = pair.peer;            // the remote sender, as the executor names it
    made->header->sender_process = ProcessId{};       // not on this host: its death shows on the connection
    return Status();
  }

  Status Accept(const PairContext& pair, Made* made) override {
    auto conn = made->listener->Accept(pair.peer, pair.deadline);
    if (!conn.ok()) return conn.status().WithContext(pair.where);
    made->accepted = std::move(conn).value();
    return Status();
  }

  StatusOr<FifoLink> Open(const PairContext& pair, const OfferBlob& offer) override {
    NetOffer o;
    std::memcpy(&o, offer.bytes, sizeof(o));
    ASSIGN_OR_RETURN(net::Net * network, PairNet(pair, "to"));
    net::ConnectOptions opts{pair.spec->rank, pair.peer, pair.spec->tag};
    auto conn = network->Connect(Device(network, pair), o.handle, opts, pair.deadline);
    if (!conn.ok()) return conn.status().WithContext(pair.where);
    auto mem = AllocateProcessFifo(pair.geometry.slot_bytes, pair.peer, net::kProxySlotPrefix);
    static_cast<FifoHeader*>(mem->base())->receiver_process = ProcessId{};
    ASSIGN_OR_RETURN(net::Proxy * proxy, proxy_());
    RETURN_IF_ERROR(proxy->AddSender(mem, std::move(conn).value(), pair.lane).WithContext(pair.where));
    return Link(pair, true, std::move(mem));
  }

  StatusOr<FifoLink> Settle(const PairContext& pair, Made* made, bool opened, const SenderProbe&) override {
    made->listener.reset();
    if (!opened) return base::Internal("unused");
    if (made->accepted == nullptr) return base::RemoteError(pair.where + ": its network connection never arrived");
    ASSIGN_OR_RETURN(net::Proxy * proxy, proxy_());
    RETURN_IF_ERROR(proxy->AddReceiver(made->memory, std::move(made->accepted), pair.lane).WithContext(pair.where));
    return Link(pair, false, made->memory);
  }

 private:
  // The transport both ends pick for the pair: verbs where both have a port
  // on one fabric, sockets otherwise.
  // `way`: "from" on the receiving end, "to" on the sending one (the log).
  StatusOr<net::Net*> PairNet(const PairContext& pair, const char* way) const {
    const ConnectorSpec& s = *pair.spec;
    net::NetKind kind = net::NetKind::kSocket;
    const bool known = static_cast<int>(s.fabrics.size()) == s.nranks;
    if (known) {
      ASSIGN_OR_RETURN(kind, net::ChooseNet(config_, s.fabrics[s.rank], s.fabrics[pair.peer], s.rank, pair.peer));
    }
    const char* why = kind == net::NetKind::kIb              ? ""
                      : !known || s.fabrics[s.rank] == 0     ? " (no verbs port here)"
                      : s.fabrics[pair.peer] == 0            ? " (no verbs port there)"
                                                             : " (verbs ports on different fabrics)";
    RINGO_LOG(INFO) << "rank " << s.rank << ": the edge " << way << " rank " << pair.peer << " ("
                    << (pair.lane == kP2pLane ? std::string("point-to-point") : "channel " + std::to_string(pair.lane))
                    << ") takes " << net::NetKindName(kind) << why;
    return net::ProcessNet(config_, kind, s.numa);
  }

  // Ring channels spread over the transport's devices (NICs, ports).
  static int Device(net::Net* network, const PairContext& pair) {
    const int lane = pair.lane == kP2pLane ? 0 : pair.lane;
    return lane % network->DeviceCount();
  }

  static FifoLink Link(const PairContext& pair, bool sending, std::shared_ptr<FifoMemory> memory) {
    FifoLink l;
    l.peer = pair.peer;
    l.lane = pair.lane;
    l.sending = sending;
    l.medium = Medium::kNet;
    l.header = static_cast<FifoHeader*>(memory->base());
    l.geometry = pair.geometry;
    l.geometry.slot_prefix = net::kProxySlotPrefix;
    l.memory = std::move(memory);
    return l;
  }

  base::Config config_;
  std::function<StatusOr<net::Proxy*>()> proxy_;
};

}  // namespace

std::unique_ptr<FifoMedium> MakeNetMedium(const base::Config& config,
                                          std::function<base::StatusOr<net::Proxy*>()> proxy) {
  return std::make_unique<NetMedium>(config, std::move(proxy));
}

}  // namespace ringo::transport
