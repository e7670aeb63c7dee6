// Making communicators: InitRank (a unique id's bootstrap, then the
// control mesh kept for lazy connections and splits), InitAll (ranks that
// are threads of this process), Split (children of a communicator over its
// exchange, no new unique id), and the setup they share.
#include <algorithm>
#include <numeric>
#include <random>
#include <thread>

#include "base/logging.h"
#include "collectives/communicator.h"
#include "collectives/device_choice.h"
#include "collectives/internal/gpu_comm.h"
#include "collectives/internal/gpu_p2p.h"
#include "collectives/internal/gpu_placement.h"
#include "collectives/p2p_engine.h"
#include "collectives/ring_choice.h"
#include "transport/bootstrap/mesh.h"
#include "transport/cuda/p2p.h"
#include "transport/cuda/p2p_ipc.h"

namespace ringo::collectives {

using base::Status;
using base::StatusOr;

namespace {

int Cores() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

std::vector<int> AllRanks(int nranks) {
  std::vector<int> all(nranks);
  std::iota(all.begin(), all.end(), 0);
  return all;
}

uint64_t RandomTag() {
  std::random_device rd;
  const uint64_t t = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return t == 0 ? 1 : t;
}

// Every rank of a set made in this process: one host, one process.
std::vector<transport::PeerInfo> LocalPeerInfos(int nranks, const std::vector<int>& cuda_devices) {
  const base::Config& config = base::GetConfig();
  std::vector<transport::PeerInfo> infos;
  for (int r = 0; r < nranks; ++r) {
    infos.push_back(transport::LocalPeerInfo(r, cuda_devices.empty() ? -1 : cuda_devices[r], config.host_id));
  }
  return infos;
}

}  // namespace

StatusOr<std::unique_ptr<Communicator>> Communicator::InitRank(const transport::UniqueId& id, int nranks, int rank,
                                                               const CommOptions& options) {
  const base::Config& config = base::GetConfig();
  RETURN_IF_ERROR(config.parse_status);
  std::unique_ptr<Communicator> comm(new Communicator(rank, nranks, config, options));
  if (id.root_started_by_rank0 && rank == 0) {
    RETURN_IF_ERROR(transport::StartRootForRank0(id, comm->timeout_ms_));
  }
  ASSIGN_OR_RETURN(auto bootstrap, transport::Bootstrap::Connect(id, rank, nranks, comm->timeout_ms_));
  // The control mesh outlives the bootstrap's root: lazy point-to-point
  // connections and ringoCommSplit go over it.
  ASSIGN_OR_RETURN(std::shared_ptr<transport::Mesh> mesh,
                   transport::Mesh::Create(*bootstrap, id.nonce, config.socket_ifname));
  comm->exchange_ = std::make_unique<transport::FabricExchange>(mesh, 0, AllRanks(nranks), comm->timeout_ms_);
  comm->tag_ = id.nonce;
  RETURN_IF_ERROR(comm->Setup(*bootstrap, options));
  return comm;
}

StatusOr<std::unique_ptr<Communicator>> Communicator::Split(int color, int key, const CommOptions* options) {
  struct Wish {
    int32_t color;
    int32_t key;
  };
  std::vector<Wish> wishes(nranks_);
  uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> run_lock(run_mu_);
    if (finalized_) return base::InvalidUsage("the communicator was finalized");
    RETURN_IF_ERROR(AsyncError().WithContext("the communicator failed earlier"));
    if (abort_.load()) return base::InvalidUsage("the communicator was aborted");
    if (exchange_ == nullptr || !exchange_->CarriesMessages()) {
      return base::InvalidUsage("this communicator cannot be split (it has no control exchange)");
    }
    const Wish mine{color, key};
    RETURN_IF_ERROR(exchange_->AllGather(&mine, sizeof(mine), wishes.data()).WithContext("ringoCommSplit"));
    seq = ++splits_;
  }
  if (color < 0) return std::unique_ptr<Communicator>();  // RINGO_SPLIT_NOCOLOR: no child here
  // The child's ranks: this color's, by key, then by rank in the parent.
  std::vector<int> members;
  for (int r = 0; r < nranks_; ++r) {
    if (wishes[r].color == color) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return wishes[a].key < wishes[b].key; });
  const int child_rank = static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  const uint64_t context = transport::ChildContext(context_, seq, color);
  ASSIGN_OR_RETURN(std::unique_ptr<transport::Exchange> sub, exchange_->Subgroup(context, members));
  CommOptions child_options;
  if (options != nullptr) {
    child_options = *options;
  } else {
    child_options.timeout_ms = timeout_ms_;
    child_options.device_wish = kInheritDevice;
  }
  if (child_options.device_wish == kInheritDevice) {
    // A child lives where its parent does.
    child_options.device_wish = static_cast<int32_t>(gpu_ ? DeviceWish::kCuda : DeviceWish::kHost);
    child_options.cuda_device = device();
  }
  std::unique_ptr<Communicator> child(
      new Communicator(child_rank, static_cast<int>(members.size()), config_, child_options));
  child->exchange_ = std::move(sub);
  child->context_ = context;
  child->tag_ = transport::ChildContext(tag_, seq, color);
  RETURN_IF_ERROR(child->Setup(*child->exchange_, child_options).WithContext("ringoCommSplit"));
  return child;
}

Status Communicator::Setup(transport::Exchange& exchange, const CommOptions& options) {
  const base::Config& config = config_;
  // Round 1: who is where, and rank 0's settings for the shared geometry.
  transport::PeerInfo mine = transport::LocalPeerInfo(rank_, -1, config.host_id);
  mine.numa = LocalNumaNode(config);
  mine.nchannels = static_cast<int32_t>(config.nchannels);
  mine.slot_bytes = config.slot_bytes;
  mine.algorithm = static_cast<int32_t>(ParseAlgorithm(config.algo));
  mine.proto = static_cast<int32_t>(ParseProto(config.proto));
  mine.check = config.check ? 1 : 0;
  mine.deterministic = config.deterministic ? 1 : 0;
  mine.device_wish = options.device_wish;
  if (options.device_wish != static_cast<int32_t>(DeviceWish::kHost)) mine.device = options.cuda_device;
  std::vector<transport::PeerInfo> peers(nranks_);
  RETURN_IF_ERROR(exchange.AllGather(&mine, sizeof(mine), peers.data()));
  RETURN_IF_ERROR(transport::ValidatePeerInfos(peers));
  // Host or GPU memory: every rank decides alike from the same wishes.
  std::vector<DeviceWish> wishes;
  std::vector<uint64_t> host_hashes;
  for (const auto& p : peers) {
    wishes.push_back(static_cast<DeviceWish>(p.device_wish));
    host_hashes.push_back(p.host_hash);
  }
  ASSIGN_OR_RETURN(const DeviceAgreement memory, AgreeOnDevice(wishes, host_hashes));
  peer_infos_ = peers;
  if (!memory.note.empty() && options.device_wish != static_cast<int32_t>(DeviceWish::kHost)) {
    RINGO_LOG(WARN) << "rank " << rank_ << ": " << memory.note;
  }
  int local_ranks = 0;
  int machine_ranks = 0;
  for (const auto& p : peers) {
    local_ranks += p.host_hash == mine.host_hash ? 1 : 0;
    machine_ranks += p.machine_hash == mine.machine_hash ? 1 : 0;
  }
  const bool net = local_ranks < nranks_;
  base::Config shared = config;  // rank 0's channel and slot settings apply to all
  shared.nchannels = peers[0].nchannels;
  shared.slot_bytes = peers[0].slot_bytes;
  shared.algo = peers[0].algorithm == static_cast<int32_t>(Algorithm::kRing)      ? "ring"
                : peers[0].algorithm == static_cast<int32_t>(Algorithm::kOneShot) ? "oneshot"
                : peers[0].algorithm == static_cast<int32_t>(Algorithm::kDirect)  ? "direct"
                                                                                  : "";
  shared.proto = peers[0].proto == static_cast<int32_t>(ProtoChoice::kSimple) ? "simple"
                 : peers[0].proto == static_cast<int32_t>(ProtoChoice::kLL)   ? "ll"
                                                                              : "";
  shared.check = peers[0].check != 0;
  shared.deterministic = peers[0].deterministic != 0;
  geometry_ = ChooseGeometry(shared, nranks_, local_ranks, Cores(), machine_ranks, net);
  const CommGeometry local = ChooseGeometry(config, nranks_, local_ranks, Cores(), machine_ranks, net);  // waits are local
  geometry_.spin_count = local.spin_count;
  if (!geometry_.fixed_channels && nranks_ > 1) {
    // Every rank must run the same channels: the fewest any rank's cores allow.
    int agreed = 1 << 20;
    for (const auto& p : peers) {
      int on_machine = 0;
      for (const auto& q : peers) on_machine += q.machine_hash == p.machine_hash ? 1 : 0;
      agreed = std::min(agreed, ChannelsForCores(p.cores, on_machine));
    }
    geometry_.nchannels = agreed;
  }
  geometry_.yield_count = local.yield_count;

  // The ring: order and transports from the topology, the same on every rank.
  std::vector<topology::RankInfo> places(nranks_);
  std::vector<uint64_t> hosts;
  for (int r = 0; r < nranks_; ++r) {
    auto it = std::find(hosts.begin(), hosts.end(), peers[r].host_hash);
    places[r].host = static_cast<int>(it - hosts.begin());
    if (it == hosts.end()) hosts.push_back(peers[r].host_hash);
    places[r].numa = peers[r].numa;
  }
  ASSIGN_OR_RETURN(RingChoice ring, ChooseRing(shared, places));
  if (rank_ == 0) RINGO_LOG(INFO) << "ring: " << ring.Describe();
  ASSIGN_OR_RETURN(const topology::TransportPolicy policy, TransportPolicyFor(shared));
  std::vector<bool> p2p_net(nranks_);
  for (int r = 0; r < nranks_; ++r) {
    p2p_net[r] = topology::ChooseTransport(places[rank_], places[r], topology::PathType::kSys, policy) ==
                 topology::TransportKind::kNet;
  }
  if (memory.cuda) {
    RETURN_IF_ERROR(ConnectGpu(exchange, shared, ring.order, options.cuda_device));
    return Status();
  }
  transport::RingSpec spec;
  spec.nranks = nranks_;
  spec.order = ring.order;
  spec.nchannels = geometry_.nchannels;
  spec.slot_bytes = static_cast<size_t>(geometry_.slot_bytes);
  spec.timeout_ms = timeout_ms_;
  for (const topology::RingEdge& e : ring.edges) spec.net_edges.push_back(e.transport == topology::TransportKind::kNet);
  spec.proxy_spin_count = geometry_.spin_count;
  spec.proxy_yield_count = geometry_.yield_count;
  transport::RingLinks links;
  if (nranks_ > 1) {
    ASSIGN_OR_RETURN(links, transport::ConnectRing(exchange, tag_, rank_, spec, peers));
  }
  proxy_ = std::move(links.proxy);
  std::unique_ptr<transport::Board> board;
  if (geometry_.board_bytes > 0) {
    ASSIGN_OR_RETURN(board, transport::ConnectBoard(exchange, tag_, rank_, nranks_,
                                                    static_cast<size_t>(geometry_.board_bytes)));
  }
  one_process_ = std::all_of(peers.begin(), peers.end(), [&](const transport::PeerInfo& p) {
    return p.host_hash == mine.host_hash && p.pid == mine.pid;
  });
  Start(std::move(links.channels), std::move(board), spec.order, local_ranks);
  StartP2p(p2p_net, links.fabrics);
  return Status();
}


void Communicator::StartGpuP2p(int device) {
  if (exchange_ == nullptr) return;
  transport::GpuPeerSpec spec;
  spec.rank = rank_;
  spec.nranks = nranks_;
  spec.device = device;
  spec.slot_bytes = static_cast<uint64_t>((P2pSlotBytes(config_) + 15) / 16 * 16);
  spec.timeout_ms = timeout_ms_;
  gpu_p2p_ = std::make_unique<internal::GpuP2p>(exchange_.get(), spec);
}

void Communicator::StartP2p(const std::vector<bool>& net, const std::vector<uint64_t>& fabrics) {
  if (exchange_ == nullptr) return;
  transport::PeerLinkSpec spec;
  spec.rank = rank_;
  spec.nranks = nranks_;
  spec.tag = tag_;
  spec.slot_bytes = static_cast<size_t>(P2pSlotBytes(config_));
  spec.timeout_ms = timeout_ms_;
  spec.peers = peer_infos_;
  spec.net = net;
  spec.fabrics = fabrics;
  if (rank_ < static_cast<int>(peer_infos_.size())) spec.numa = peer_infos_[rank_].numa;
  spec.proxy_spin_count = geometry_.spin_count;
  spec.proxy_yield_count = geometry_.yield_count;
  p2p_ = std::make_unique<P2pEngine>(rank_, nranks_,
                                     std::make_unique<transport::PeerLinks>(exchange_.get(), std::move(spec)));
}

StatusOr<std::vector<std::unique_ptr<Communicator>>> Communicator::InitAll(int nranks, const CommOptions& options,
                                                                           const std::vector<int>& cuda_devices) {
  if (!cuda_devices.empty()) return InitAllCuda(nranks, options, cuda_devices);
  const base::Config& config = base::GetConfig();
  RETURN_IF_ERROR(config.parse_status);
  // Threads of this process: one host, this thread's NUMA node.
  std::vector<topology::RankInfo> places(nranks);
  for (auto& p : places) p.numa = LocalNumaNode(config);
  ASSIGN_OR_RETURN(RingChoice ring, ChooseRing(config, places));
  transport::RingSpec spec;
  spec.nranks = nranks;
  spec.order = ring.order;
  const CommGeometry geometry = ChooseGeometry(config, nranks, nranks, Cores());
  spec.nchannels = geometry.nchannels;
  spec.slot_bytes = static_cast<size_t>(geometry.slot_bytes);
  std::vector<std::vector<transport::ChannelLinks>> links;
  if (nranks > 1) links = transport::ConnectRingInProcess(spec);
  std::vector<std::unique_ptr<transport::Board>> boards;
  if (geometry.board_bytes > 0) {
    boards = transport::ConnectBoardsInProcess(nranks, static_cast<size_t>(geometry.board_bytes));
  }
  std::vector<std::unique_ptr<Communicator>> comms;
  auto fabric = std::make_shared<transport::LocalFabric>(nranks);
  const uint64_t tag = RandomTag();
  for (int r = 0; r < nranks; ++r) {
    std::unique_ptr<Communicator> comm(new Communicator(r, nranks, config, options));
    comm->geometry_ = geometry;
    comm->one_process_ = true;
    comm->exchange_ = std::make_unique<transport::FabricExchange>(transport::LocalFabric::View(fabric, r), 0,
                                                                  AllRanks(nranks), comm->timeout_ms_);
    comm->tag_ = tag;
    comm->peer_infos_ = LocalPeerInfos(nranks, {});
    comm->Start(nranks > 1 ? std::move(links[r]) : std::vector<transport::ChannelLinks>(),
                boards.empty() ? nullptr : std::move(boards[r]), spec.order, nranks);
    comm->StartP2p(std::vector<bool>(nranks, false));
    comms.push_back(std::move(comm));
  }
  return comms;
}

StatusOr<std::vector<std::unique_ptr<Communicator>>> Communicator::InitAllCuda(
    int nranks, const CommOptions& options, const std::vector<int>& cuda_devices) {
  const base::Config& config = base::GetConfig();
  RETURN_IF_ERROR(config.parse_status);
  if (static_cast<int>(cuda_devices.size()) != nranks) {
    return base::InvalidArgument("one CUDA device per rank: " + std::to_string(cuda_devices.size()) + " for " +
                                 std::to_string(nranks) + " ranks");
  }
  std::vector<topology::RankInfo> places(nranks);
  for (auto& p : places) p.numa = LocalNumaNode(config);
  ASSIGN_OR_RETURN(RingChoice ring, ChooseRing(config, places));
  // Loads every kernel on every device, then channels from what they hold.
  ASSIGN_OR_RETURN(const std::vector<internal::GpuPlace> gpus, internal::LocalPlaces(cuda_devices));
  const internal::GpuLayout layout = internal::LayoutOf(gpus);
  const DeviceGeometry geometry =
      ChooseDeviceGeometry(config, nranks, layout.residency, layout.max_ranks_per_gpu);
  RETURN_IF_ERROR(internal::CheckPlaces(gpus, geometry.nchannels));
  std::shared_ptr<transport::P2pRing> p2p;
  if (nranks > 1) {
    transport::P2pRingSpec spec;
    spec.nranks = nranks;
    spec.order = ring.order;
    spec.devices = cuda_devices;
    spec.nchannels = geometry.nchannels;
    spec.slot_bytes = static_cast<uint64_t>(geometry.slot_bytes);
    spec.ll_slot_bytes = static_cast<uint64_t>(geometry.ll_slot_bytes);
    ASSIGN_OR_RETURN(std::unique_ptr<transport::P2pRing> made, transport::P2pRing::Create(spec));
    p2p = std::move(made);
  }
  auto ends_of = [&](int r) -> std::unique_ptr<transport::P2pEnds> {
    if (p2p == nullptr) return nullptr;
    for (int p = 0; p < nranks; ++p) {
      if (ring.order[p] == r) return transport::P2pRing::EndsOf(p2p, p);
    }
    return nullptr;
  };
  std::vector<std::unique_ptr<Communicator>> comms;
  auto fabric = std::make_shared<transport::LocalFabric>(nranks);
  const uint64_t tag = RandomTag();
  for (int r = 0; r < nranks; ++r) {
    std::unique_ptr<Communicator> comm(new Communicator(r, nranks, config, options));
    comm->exchange_ = std::make_unique<transport::FabricExchange>(transport::LocalFabric::View(fabric, r), 0,
                                                                  AllRanks(nranks), comm->timeout_ms_);
    comm->tag_ = tag;
    comm->peer_infos_ = LocalPeerInfos(nranks, cuda_devices);
    const uint64_t timeout_ns = static_cast<uint64_t>(comm->timeout_ms_) * 1000000ull;
    ASSIGN_OR_RETURN(comm->gpu_, internal::GpuComm::Create(
                                     r, nranks, cuda_devices[r], ring.order, ends_of(r), geometry,
                                     timeout_ns, internal::RanksSharingGpuInProcess(gpus, r)));
    comm->order_ = ring.order;
    for (int p = 0; p < nranks; ++p) {
      if (comm->order_[p] == r) comm->pos_ = p;
    }
    RINGO_LOG(INFO) << "rank " << r << "/" << nranks << " ready: CUDA device " << cuda_devices[r] << ", "
                    << geometry.nchannels << " channel(s), slot " << geometry.slot_bytes << " B, LL slot "
                    << geometry.ll_slot_bytes << " B, timeout " << comm->timeout_ms_ << " ms";
    comm->StartGpuP2p(cuda_devices[r]);
    comms.push_back(std::move(comm));
  }
  if (nranks > 1) RINGO_LOG(INFO) << "GPU ring: " << ring.Describe();
  return comms;
}

Status Communicator::ConnectGpu(transport::Exchange& bootstrap, const base::Config& shared,
                                const std::vector<int>& order, int device) {
  // Every rank loads its kernels and sees every rank's GPU: the same channels
  // and the same verdict on every rank.
  ASSIGN_OR_RETURN(const std::vector<internal::GpuPlace> gpus,
                   internal::ExchangePlaces(bootstrap, device));
  const internal::GpuLayout layout = internal::LayoutOf(gpus);
  const DeviceGeometry geometry =
      ChooseDeviceGeometry(shared, nranks_, layout.residency, layout.max_ranks_per_gpu);
  RETURN_IF_ERROR(internal::CheckPlaces(gpus, geometry.nchannels));
  std::unique_ptr<transport::P2pEnds> ends;
  if (nranks_ > 1) {
    transport::P2pIpcSpec spec;
    spec.rank = rank_;
    spec.nranks = nranks_;
    spec.order = order;
    spec.device = device;
    spec.nchannels = geometry.nchannels;
    spec.slot_bytes = static_cast<uint64_t>(geometry.slot_bytes);
    spec.ll_slot_bytes = static_cast<uint64_t>(geometry.ll_slot_bytes);
    spec.timeout_ms = timeout_ms_;
    ASSIGN_OR_RETURN(std::unique_ptr<transport::P2pIpcRing> ring, transport::P2pIpcRing::Connect(bootstrap, spec));
    ends = std::move(ring);
  }
  order_ = order;
  for (int p = 0; p < nranks_; ++p) {
    if (order_[p] == rank_) pos_ = p;
  }
  const uint64_t timeout_ns = static_cast<uint64_t>(timeout_ms_) * 1000000ull;
  auto made =
      internal::GpuComm::Create(rank_, nranks_, device, order, std::move(ends), geometry,
                                timeout_ns, internal::RanksSharingGpuInProcess(gpus, rank_));
  // A rank that failed here would leave the others' first collective waiting.
  RETURN_IF_ERROR(transport::AgreeOk(bootstrap, made.status(), "set up its GPU communicator"));
  gpu_ = std::move(made).value();
  StartGpuP2p(device);
  RINGO_LOG(INFO) << "rank " << rank_ << "/" << nranks_ << " ready: CUDA device " << device << " (CUDA IPC across "
                  << "processes), " << geometry.nchannels << " channel(s), slot " << geometry.slot_bytes
                  << " B, LL slot " << geometry.ll_slot_bytes << " B, timeout " << timeout_ms_ << " ms";
  return Status();
}

}  // namespace ringo::collectives
