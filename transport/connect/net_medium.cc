// FIFOs across hosts: each side keeps a FIFO in its own memory, with room
// before every slot for the slot's metadata (net::kProxySlotPrefix), and the
// communicator's proxy moves filled slots over the connection the receiver
// listened for and the sender made. A host rank's FIFO is plain process
// memory; a GPU rank's is pinned host memory mapped into its device
// (cudaHostAlloc, portable and mapped), which its kernels address at the
// mapping's device address and the proxy at the host one: one allocator
// (AllocateEdgeFifo) and one layout for both, Simple slots only (no LL
// slots: the proxy moves whole slots announced by the tail).
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "base/check.h"
#include "base/cuda.h"
#include "base/logging.h"
#include "transport/connect/media.h"
#include "transport/net/gpudirect.h"
#include "transport/net/choice.h"

namespace ringo::transport {
namespace {

using base::Status;
using base::StatusOr;

// Pinned host memory mapped into a GPU, formatted as a FIFO; with GPUDirect,
// its Simple slots apart in the GPU's memory, which the NIC reads and
// writes (the header stays in pinned memory: the proxy reads and writes
// the counters and the metadata).
class PinnedFifoMemory : public FifoMemory {
 public:
  PinnedFifoMemory(base::MappedHostMemory memory, int device, void* slots, bool flush)
      : memory_(std::move(memory)), device_(device), slots_(slots), flush_(flush) {}
  ~PinnedFifoMemory() override {
    if (slots_ == nullptr) return;
    if (auto scope = base::ScopedDevice::Enter(device_); scope.ok()) (void)base::DeviceFree(slots_);
  }
  void* base() override { return memory_.host(); }
  void* device_base() const { return memory_.device(); }
  char* slots_apart() override { return static_cast<char*>(slots_); }
  bool slots_on_device() const override { return slots_ != nullptr; }
  // Where the device does not order the NIC's writes for its kernels, a flush.
  Status AfterNetworkWrite() override { return flush_ ? base::FlushGpuDirectWrites(device_) : Status(); }

 private:
  base::MappedHostMemory memory_;
  int device_;
  void* slots_;  // device memory; null: the slots follow the header
  bool flush_;   // slots_ needs a flush after the NIC wrote it
};

// A host FIFO with its slots apart (the layout of a GPUDirect edge, in
// process memory: EdgeSlotsApart's host case).
class ApartProcessFifoMemory : public FifoMemory {
 public:
  ApartProcessFifoMemory(const FifoGeometry& geometry, int receiver_rank)
      : header_(std::aligned_alloc(4096, kFifoDataOffset)),
        slots_(std::aligned_alloc(4096, RoundUp(kSlots * geometry.stride(), 4096))) {
    RINGO_CHECK(header_ != nullptr && slots_ != nullptr, "out of memory allocating a FIFO");
    std::memset(header_, 0, kFifoDataOffset);
    std::memset(slots_, 0, kSlots * geometry.stride());
    FormatFifoHeader(static_cast<FifoHeader*>(header_), geometry, receiver_rank, SelfProcessId());
  }
  ~ApartProcessFifoMemory() override {
    std::free(header_);
    std::free(slots_);
  }
  void* base() override { return header_; }
  char* slots_apart() override { return static_cast<char*>(slots_); }

 private:
  static size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }
  void* header_;
  void* slots_;
};

// The local FIFO of a network edge and the addresses its executor uses.
struct EdgeFifo {
  std::shared_ptr<FifoMemory> memory;
  FifoHeader* header = nullptr;  // as the executor addresses it: host, or (GPU) device
  void* slots = nullptr;         // the slots apart (device memory for GPUs), null: after the header
};

// Device slots: whole 2 MiB pages, so that a dma-buf export of them stays
// inside the allocation.
constexpr size_t kDevicePage = size_t{2} << 20;

// `device` -1: plain process memory; else pinned host memory mapped into
// that CUDA device. The same layout either way; `apart`: the Simple slots
// apart from the header (in the device's memory for a GPU).
StatusOr<EdgeFifo> AllocateEdgeFifo(uint64_t slot_bytes, int receiver_rank, int device, bool apart) {
  EdgeFifo f;
  const FifoGeometry geometry{slot_bytes, net::kProxySlotPrefix, 0};
  if (device < 0) {
    if (apart) {
      auto memory = std::make_shared<ApartProcessFifoMemory>(geometry, receiver_rank);
      f.slots = memory->slots_apart();
      f.memory = std::move(memory);
    } else {
      f.memory = AllocateProcessFifo(slot_bytes, receiver_rank, net::kProxySlotPrefix);
    }
    f.header = static_cast<FifoHeader*>(f.memory->base());
    return f;
  }
  ASSIGN_OR_RETURN(base::ScopedDevice scope, base::ScopedDevice::Enter(device));
  ASSIGN_OR_RETURN(base::MappedHostMemory pinned,
                   base::MappedHostMemory::Allocate(apart ? kFifoDataOffset : geometry.Bytes()));
  void* slots = nullptr;
  bool flush = false;
  if (apart) {
    ASSIGN_OR_RETURN(const base::GpuDirectAttrs attrs, base::DeviceGpuDirect(device));
    flush = !attrs.writes_ordered;
    const size_t bytes = (kSlots * geometry.stride() + kDevicePage - 1) / kDevicePage * kDevicePage;
    ASSIGN_OR_RETURN(slots, base::DeviceMalloc(bytes));
  }
  auto memory = std::make_shared<PinnedFifoMemory>(std::move(pinned), device, slots, flush);
  FormatFifoHeader(static_cast<FifoHeader*>(memory->base()), geometry, receiver_rank, SelfProcessId());
  f.header = static_cast<FifoHeader*>(memory->device_base());
  f.slots = slots;
  f.memory = std::move(memory);
  return f;
}

// The device a pair's local FIFO is mapped into: -1 for host FIFOs.
StatusOr<int> EdgeDevice(const PairContext& pair) {
  if (!pair.gpu) return -1;
  if (pair.spec->device < 0) return base::Internal(pair.where + ": a GPU FIFO, but this rank has no CUDA device");
  return pair.spec->device;
}

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
    net::NetKind kind;
    int net_device = 0;
    ASSIGN_OR_RETURN(net::Net * network, PairNet(pair, "from", &kind, &net_device));
    NetOffer o{};
    net::ConnectOptions opts{pair.spec->rank, pair.peer, pair.spec->tag};
    ASSIGN_OR_RETURN(made->listener, network->Listen(net_device, opts, &o.handle));
    std::memcpy(offer->bytes, &o, sizeof(o));
    ASSIGN_OR_RETURN(made->device, EdgeDevice(pair));
    ASSIGN_OR_RETURN(EdgeFifo fifo, AllocateEdgeFifo(pair.geometry.slot_bytes, pair.spec->rank, made->device,
                                                     SlotsApart(pair, kind)));
    made->memory = fifo.memory;
    made->header = fifo.header;
    made->slots = fifo.slots;
    auto* host = static_cast<FifoHeader*>(made->memory->base());
    host->sender_rank = pair.peer;            // the remote sender, as the executor names it
    host->sender_process = ProcessId{};       // not on this host: its death shows on the connection
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
    net::NetKind kind;
    int net_device = 0;
    ASSIGN_OR_RETURN(net::Net * network, PairNet(pair, "to", &kind, &net_device));
    net::ConnectOptions opts{pair.spec->rank, pair.peer, pair.spec->tag};
    auto conn = network->Connect(net_device, o.handle, opts, pair.deadline);
    if (!conn.ok()) return conn.status().WithContext(pair.where);
    ASSIGN_OR_RETURN(const int device, EdgeDevice(pair));
    ASSIGN_OR_RETURN(EdgeFifo fifo,
                     AllocateEdgeFifo(pair.geometry.slot_bytes, pair.peer, device, SlotsApart(pair, kind)));
    static_cast<FifoHeader*>(fifo.memory->base())->receiver_process = ProcessId{};
    ASSIGN_OR_RETURN(net::Proxy * proxy, proxy_());
    RETURN_IF_ERROR(
        proxy->AddSender(fifo.memory, std::move(conn).value(), pair.lane, pair.gpu).WithContext(pair.where));
    return Link(pair, true, fifo, device);
  }

  StatusOr<FifoLink> Settle(const PairContext& pair, Made* made, bool opened, const SenderProbe&) override {
    made->listener.reset();
    if (!opened) return base::Internal("unused");
    if (made->accepted == nullptr) return base::RemoteError(pair.where + ": its network connection never arrived");
    ASSIGN_OR_RETURN(net::Proxy * proxy, proxy_());
    RETURN_IF_ERROR(
        proxy->AddReceiver(made->memory, std::move(made->accepted), pair.lane, pair.gpu).WithContext(pair.where));
    return Link(pair, false, EdgeFifo{made->memory, made->header, made->slots}, made->device);
  }

 private:
  // The transport both ends pick for the pair: verbs where both have a port
  // on one fabric, sockets otherwise.
  // `way`: "from" on the receiving end, "to" on the sending one (the log).
  StatusOr<net::Net*> PairNet(const PairContext& pair, const char* way, net::NetKind* chosen, int* device) const {
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
    *chosen = kind;
    ASSIGN_OR_RETURN(net::Net * network, net::ProcessNet(config_, kind, s.numa));
    *device = Device(network, pair);
    auto props = network->Properties(*device);
    RINGO_LOG(INFO) << "rank " << s.rank << ": the edge " << way << " rank " << pair.peer << " ("
                    << (pair.lane == kP2pLane ? std::string("point-to-point") : "channel " + std::to_string(pair.lane))
                    << ") takes " << net::NetKindName(kind) << why
                    << (props.ok() ? ", device " + props->name : std::string())
                    << (!pair.gpu                  ? ""
                        : SlotsApart(pair, kind) ? ", slots in GPU memory (GPUDirect RDMA)"
                                                 : ", slots in pinned host memory");
    return network;
  }

  // Whether the pair's slots are kept apart from its header: GPUDirect,
  // where both ends offer it (net/gpudirect.h).
  static bool SlotsApart(const PairContext& pair, net::NetKind kind) {
    const ConnectorSpec& s = *pair.spec;
    if (static_cast<int>(s.gpudirect.size()) != s.nranks) return false;
    return net::EdgeSlotsApart(pair.gpu, kind, s.gpudirect[s.rank] != 0, s.gpudirect[pair.peer] != 0,
                               s.gpudirect_host_stand_in);
  }

  // Ring channels spread over the transport's devices (NICs, ports), those
  // near this rank's NUMA node first.
  static int Device(net::Net* network, const PairContext& pair) {
    const int lane = pair.lane == kP2pLane ? 0 : pair.lane;
    const std::vector<int> order = net::DevicesNearFirst(*network, pair.spec->numa);
    return order[static_cast<size_t>(lane) % order.size()];
  }

  static FifoLink Link(const PairContext& pair, bool sending, EdgeFifo fifo, int device) {
    FifoLink l;
    l.peer = pair.peer;
    l.lane = pair.lane;
    l.sending = sending;
    l.medium = Medium::kNet;
    l.header = fifo.header;
    l.geometry = pair.geometry;
    l.geometry.slot_prefix = net::kProxySlotPrefix;
    l.geometry.ll_slot_bytes = 0;  // Simple slots only: the proxy moves what the tail announces
    l.slots = fifo.slots;
    l.memory = std::move(fifo.memory);
    l.device = device;
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
