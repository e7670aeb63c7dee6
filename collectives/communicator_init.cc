// Making communicators. Every way in runs the same Setup over an exchange
// whose members are the new communicator's ranks: InitRank over the mesh a
// unique id's bootstrap made, InitAll (ranks that are threads of this
// process) over an exchange in memory, Split over its parent's exchange (no
// new unique id). Setup's steps: agree (records, settings, memory), plan
// (ring, geometry), connect (the connector, then the residence and the
// engines: engines/registry.h), observe (the flight recorder, the hang
// diagnosis, the failure agreement).
#include <algorithm>
#include <numeric>
#include <random>
#include <thread>

#include "base/logging.h"
#include "collectives/communicator.h"
#include "collectives/engines/registry.h"
#include "collectives/plan/device_choice.h"
#include "collectives/plan/ring_choice.h"
#include "kernels/host_isa.h"
#include "kernels/wire.h"
#include "transport/bootstrap/mesh.h"
#include "transport/connect/peer_info.h"
#include "transport/net/choice.h"
#include "transport/net/gpudirect.h"

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

// The ranks that share rank `rank`'s CPUs (its machine), itself included.
int MachineRanks(const std::vector<transport::PeerInfo>& peers, int rank) {
  int n = 0;
  for (const auto& p : peers) n += p.machine_hash == peers[rank].machine_hash ? 1 : 0;
  return n;
}

int64_t TimeoutMs(const base::Config& config, const CommOptions& options) {
  return options.timeout_ms > 0 ? options.timeout_ms : config.timeout_ms;
}

// What each rank tells the others at init: where it is, what it wants, and
// the settings every rank must share. Fixed-size, sent raw.
struct RankRecord {
  transport::PeerInfo peer;
  SharedSettings shared;
  int32_t device_wish;  // DeviceWish
  int32_t tagged;       // 1: it asks for tagged point-to-point pairs
};

}  // namespace

struct Communicator::Agreement {
  std::vector<transport::PeerInfo> peers;
  std::vector<int> domains;  // every rank's memory domain (transport::MemoryDomains)
  CommSettings settings;     // rank 0's shared settings, this rank's local ones
  int device = -1;           // this rank's CUDA device where the ranks run on GPU memory; -1: host memory
  bool gpu_hosts = false;    // GPU memory on ranks of several hosts
  bool tagged = false;       // some rank asked for tagged point-to-point pairs
};

Communicator::Communicator(int rank, int nranks, const base::Config& config, const CommOptions& options)
    : rank_(rank), nranks_(nranks), config_(config), timeout_ms_(TimeoutMs(config, options)) {
  kernels::Wire wire = kernels::Wire::kNone;
  if (options.wire >= 0) {
    wire = static_cast<kernels::Wire>(options.wire);
  } else if (!config.wire.empty()) {
    kernels::ParseWire(config.wire, &wire);  // RINGO_WIRE's values were checked when read
  }
  wire_.store(static_cast<int>(wire));
}

StatusOr<std::unique_ptr<Communicator>> Communicator::InitRank(const transport::UniqueId& id, int nranks, int rank,
                                                               const CommOptions& options) {
  const base::Config& config = base::GetConfig();
  RETURN_IF_ERROR(config.parse_status);
  std::unique_ptr<Communicator> comm(new Communicator(rank, nranks, config, options));
  if (id.root_started_by_rank0 && rank == 0) {
    RETURN_IF_ERROR(transport::StartRootForRank0(id, comm->timeout_ms_));
  }
  ASSIGN_OR_RETURN(auto bootstrap, transport::Bootstrap::Connect(id, rank, nranks, comm->timeout_ms_));
  // The control mesh outlives the bootstrap's root: setup, lazy
  // point-to-point connections and ringoCommSplit go over it.
  ASSIGN_OR_RETURN(std::shared_ptr<transport::Mesh> mesh,
                   transport::Mesh::Create(*bootstrap, id.nonce, config.socket_ifname));
  comm->exchange_ = std::make_unique<transport::FabricExchange>(mesh, 0, AllRanks(nranks), comm->timeout_ms_);
  comm->tag_ = id.nonce;
  RETURN_IF_ERROR(comm->Setup(*comm->exchange_, options));
  return comm;
}

StatusOr<std::vector<std::unique_ptr<Communicator>>> Communicator::InitAll(int nranks, const CommOptions& options,
                                                                           const std::vector<int>& cuda_devices) {
  const base::Config& config = base::GetConfig();
  RETURN_IF_ERROR(config.parse_status);
  if (!cuda_devices.empty() && static_cast<int>(cuda_devices.size()) != nranks) {
    return base::InvalidArgument("one CUDA device per rank: " + std::to_string(cuda_devices.size()) + " for " +
                                 std::to_string(nranks) + " ranks");
  }
  // Each rank joins as InitRank's do, on a thread of its own, over an
  // exchange in memory.
  auto fabric = std::make_shared<transport::LocalFabric>(nranks);
  const uint64_t tag = RandomTag();
  std::vector<std::unique_ptr<Communicator>> comms(nranks);
  std::vector<Status> status(nranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    CommOptions mine = options;
    if (!cuda_devices.empty()) {
      mine.device_wish = static_cast<int32_t>(DeviceWish::kCuda);
      mine.cuda_device = cuda_devices[r];
    }
    comms[r].reset(new Communicator(r, nranks, config, mine));
    comms[r]->exchange_ = std::make_unique<transport::FabricExchange>(transport::LocalFabric::View(fabric, r), 0,
                                                                      AllRanks(nranks), comms[r]->timeout_ms_);
    comms[r]->tag_ = tag;
    threads.emplace_back([&, r, mine] { status[r] = comms[r]->Setup(*comms[r]->exchange_, mine); });
  }
  for (std::thread& t : threads) t.join();
  for (const Status& st : status) RETURN_IF_ERROR(st);
  return comms;
}

CommOptions Communicator::ChildOptions(const CommOptions* options) const {
  CommOptions child;
  if (options != nullptr) {
    child = *options;
  } else {
    child.timeout_ms = timeout_ms_;
    child.device_wish = kInheritDevice;
    child.tagged = engines_.tagged != nullptr;
    child.wire = wire();
  }
  if (child.device_wish == kInheritDevice) {  // a child lives where its parent does
    child.device_wish = static_cast<int32_t>(WishToStay(device()));
    child.cuda_device = device();
  }
  return child;
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
  const CommOptions child_options = ChildOptions(options);
  std::unique_ptr<Communicator> child(
      new Communicator(child_rank, static_cast<int>(members.size()), config_, child_options));
  child->exchange_ = std::move(sub);
  child->context_ = context;
  child->tag_ = transport::ChildContext(tag_, seq, color);
  RETURN_IF_ERROR(child->Setup(*child->exchange_, child_options).WithContext("ringoCommSplit"));
  return child;
}

Status Communicator::Setup(transport::Exchange& exchange, const CommOptions& options) {
  ASSIGN_OR_RETURN(const Agreement agreed, Agree(exchange, options));
  EngineSetup setup;
  RETURN_IF_ERROR(Plan(agreed, &setup));
  RETURN_IF_ERROR(Connect(exchange, agreed, &setup));
  Observe(exchange, agreed);
  return Status();
}

void Communicator::Observe(transport::Exchange& exchange, const Agreement& agreed) {
  // What explains this rank from now on: its flight recorder, the answers
  // its control service gives about it, the hang diagnosis of its waits.
  ObserverSetup o;
  o.rank = rank_;
  o.nranks = nranks_;
  o.comm_id = tag_;
  o.exchange = &exchange;
  o.peers = agreed.peers;
  o.config = &config_;
  o.gpu = agreed.device >= 0;
  o.device = agreed.device;
  observer_ = std::make_unique<Observer>(std::move(o));
  wait_.stall = observer_->stall_hook();
  // Until a call says otherwise, the thread that made it drives it (a
  // split's child, say, before its first call).
  if (TracingOn()) observer_->Driven(ThisThreadCall());
  if (exchange.control() != nullptr) {
    agreement_ = std::make_unique<FailureAgreement>(&exchange, rank_, nranks_, config_.control_timeout_ms,
                                                    timeout_ms_, [this] { abort_.store(true); });
  }
}

StatusOr<Communicator::Agreement> Communicator::Agree(transport::Exchange& exchange, const CommOptions& options) {
  kernels::SelectHostIsa(config_.host_isa);  // the process's first communicator decides
  Agreement a;
  a.settings = SettingsFrom(config_);
  RankRecord mine{};
  mine.peer = transport::LocalPeerInfo(rank_, -1, config_.host_id);
  mine.peer.numa = LocalNumaNode(config_);
  mine.shared = a.settings.shared;
  mine.device_wish = options.device_wish;
  mine.tagged = options.tagged ? 1 : 0;
  if (options.device_wish != static_cast<int32_t>(DeviceWish::kHost)) mine.peer.device = options.cuda_device;
  std::vector<RankRecord> records(nranks_);
  RETURN_IF_ERROR(exchange.AllGather(&mine, sizeof(mine), records.data()));
  std::vector<SharedSettings> shared;
  std::vector<DeviceWish> wishes;
  std::vector<uint64_t> hosts;
  for (const RankRecord& r : records) {
    a.peers.push_back(r.peer);
    shared.push_back(r.shared);
    wishes.push_back(static_cast<DeviceWish>(r.device_wish));
    hosts.push_back(r.peer.host_hash);
    a.tagged = a.tagged || r.tagged != 0;
  }
  RETURN_IF_ERROR(transport::ValidatePeerInfos(a.peers));
  RETURN_IF_ERROR(ValidateShared(shared));
  for (int r = 0; r < nranks_; ++r) {
    if (wishes[r] < DeviceWish::kHost || wishes[r] > DeviceWish::kCudaIfAll) {
      return base::RemoteError("rank " + std::to_string(r) + " sent an unknown device choice")
          .WithOrigin(r, "malformed settings");
    }
  }
  a.settings.shared = shared[0];  // rank 0's channel, slot, algorithm... settings apply to all
  // Host or GPU memory: every rank decides alike from the same wishes.
  ASSIGN_OR_RETURN(const DeviceAgreement memory, AgreeOnDevice(wishes, hosts, shared[0].gpu_across_hosts != 0));
  if (!memory.note.empty() && options.device_wish != static_cast<int32_t>(DeviceWish::kHost)) {
    RINGO_LOG(WARN) << "rank " << rank_ << ": " << memory.note;
  }
  a.device = memory.cuda ? options.cuda_device : -1;
  a.gpu_hosts = memory.cuda && memory.hosts_spanned;
  // Which ranks of a host share its memory.
  ASSIGN_OR_RETURN(a.domains, transport::MemoryDomains(exchange, tag_, a.peers));
  return a;
}

Status Communicator::Plan(const Agreement& agreed, EngineSetup* setup) {
  const std::vector<transport::PeerInfo>& peers = agreed.peers;
  int local_ranks = 0;  // ranks that share this rank's memory
  for (int r = 0; r < nranks_; ++r) local_ranks += agreed.domains[r] == agreed.domains[rank_] ? 1 : 0;
  const int machine_ranks = MachineRanks(peers, rank_);
  const bool net = local_ranks < nranks_;
  setup->rank = rank_;
  setup->nranks = nranks_;
  setup->tag = tag_;
  setup->local_ranks = local_ranks;
  setup->config = &config_;
  setup->settings = agreed.settings;
  setup->device = agreed.device;
  setup->gpu_hosts_spanned = agreed.gpu_hosts;
  setup->tagged = agreed.tagged;
  setup->host = ChooseGeometry(agreed.settings, nranks_, local_ranks, Cores(), machine_ranks, net);
  if (!setup->host.fixed_channels && nranks_ > 1) setup->host.nchannels = ChannelsEveryRankAllows(peers);
  // The ring: order and transports from the topology, the same on every
  // rank; ranks of one memory domain are one host to it.
  std::vector<topology::RankInfo> places(nranks_);
  for (int r = 0; r < nranks_; ++r) {
    places[r].host = agreed.domains[r];
    places[r].numa = peers[r].numa;
  }
  ASSIGN_OR_RETURN(setup->ring, ChooseRing(config_, places, agreed.settings.shared.deterministic != 0));
  if (rank_ == 0 && nranks_ > 1) RINGO_LOG(INFO) << "ring: " << setup->ring.Describe();
  for (int p = 0; p < nranks_; ++p) {
    if (setup->ring.order[p] == rank_) setup->pos = p;
  }
  setup->timeout_ms = timeout_ms_;
  setup->abort = &abort_;
  return Status();
}

int Communicator::ChannelsEveryRankAllows(const std::vector<transport::PeerInfo>& peers) const {
  int channels = 1 << 20;
  for (int r = 0; r < static_cast<int>(peers.size()); ++r) {
    channels = std::min(channels, ChannelsForCores(peers[r].cores, MachineRanks(peers, r)));
  }
  return channels;
}

Status Communicator::Connect(transport::Exchange& exchange, const Agreement& agreed, EngineSetup* setup) {
  int net_devices = 0;
  ASSIGN_OR_RETURN(transport::ConnectorSpec spec, ConnectorSpecFor(exchange, agreed, *setup, &net_devices));
  // Across hosts: a channel per network device at least, so that every NIC
  // carries one, and where they are several, splits by measured rate.
  if (net_devices > 0) {
    setup->host.net_devices = net_devices;
    if (!setup->host.fixed_channels && nranks_ > 1) {
      const int before = setup->host.nchannels;
      setup->host.nchannels = ChannelsForNetDevices(setup->host.nchannels, net_devices);
      if (setup->host.nchannels > before) {  // more threads: is the machine now oversubscribed?
        if (static_cast<int64_t>(MachineRanks(agreed.peers, rank_)) * (setup->host.nchannels + 1) > Cores()) {
          SetWaits(setup->settings.local, true, &setup->host);
          spec.proxy_spin_count = setup->host.spin_count;
          spec.proxy_yield_count = setup->host.yield_count;
        }
      }
    }
    setup->host.balance = net_devices > 1 && agreed.settings.shared.net_balance != 0 && !setup->host.deterministic;
  }
  connector_ = std::make_unique<transport::Connector>(exchange_.get(), std::move(spec), config_);
  setup->exchange = &exchange;
  setup->connector = connector_.get();
  setup->on_fault = [this](const Status& st) { Fail(st); };
  check_ = agreed.settings.shared.check != 0;
  ASSIGN_OR_RETURN(engines_, ConnectEngines(setup));
  async_engines_ = engines_.asynchronous();
  ConfigureWait(*setup);
  RINGO_LOG(INFO) << "rank " << rank_ << "/" << nranks_ << " ready: " << engines_.residence->Describe(*setup)
                  << ", timeout " << timeout_ms_ << " ms";
  if (wire() != 0 && setup->device >= 0 && engines_.Find("wire") == nullptr) {
    RINGO_LOG(INFO) << "rank " << rank_ << ": wire " << kernels::WireName(static_cast<kernels::Wire>(wire()))
                    << " not used: GPU communicators send their data uncompressed unless RINGO_GPU_WIRE=1 and their "
                       "ranks span hosts";
    wire_.store(0);
  }
  return Status();
}

// Which pairs the transport policy sends over the network (other memory
// domains; every pair where RINGO_SHM_DISABLE says so), and where any does,
// each rank's network record: verbs where both ends have a port on one
// fabric, sockets otherwise, and for GPU ranks across hosts whether the rank
// offers GPUDirect RDMA (its verdict said once at INFO). Every rank learns
// every rank's record, so both ends of an edge decide alike.
StatusOr<transport::ConnectorSpec> Communicator::ConnectorSpecFor(transport::Exchange& exchange,
                                                                  const Agreement& agreed,
                                                                  const EngineSetup& setup,
                                                                  int* net_devices) const {
  std::vector<topology::RankInfo> places(nranks_);
  for (int r = 0; r < nranks_; ++r) places[r].host = agreed.domains[r];
  ASSIGN_OR_RETURN(const topology::TransportPolicy policy, TransportPolicyFor(config_));
  transport::ConnectorSpec spec;
  spec.rank = rank_;
  spec.nranks = nranks_;
  spec.tag = tag_;
  spec.peers = agreed.peers;
  spec.domains = agreed.domains;
  spec.net.resize(nranks_);
  bool any_net = false;
  for (int r = 0; r < nranks_; ++r) {
    spec.net[r] = r != rank_ && topology::ChooseTransport(places[rank_], places[r], topology::PathType::kSys,
                                                          policy) == topology::TransportKind::kNet;
    any_net = any_net || spec.net[r];
    any_net = any_net || agreed.domains[r] != agreed.domains[0];
  }
  spec.numa = agreed.peers[rank_].numa;
  spec.device = agreed.device;
  spec.timeout_ms = timeout_ms_;
  spec.proxy_spin_count = setup.host.spin_count;
  spec.proxy_yield_count = setup.host.yield_count;
  if (!any_net) return spec;
  struct NetRecord {
    uint64_t fabric;
    uint64_t gpudirect;
    uint64_t devices;  // the network devices its ring channels spread over
  };
  NetRecord mine{transport::net::VerbsFabric(config_, spec.numa), 0, 0};
  // The devices this rank's ring channels spread over: verbs ports on port
  // 0's fabric, or the interfaces RINGO_SOCKET_IFNAME names (without it,
  // one: the interfaces that happen to be up may include bridges and VPNs
  // the other hosts cannot reach, which no channel count should depend on).
  if (mine.fabric != 0 || !config_.socket_ifname.empty()) {
    auto net = transport::net::ProcessNet(
        config_, mine.fabric != 0 ? transport::net::NetKind::kIb : transport::net::NetKind::kSocket, spec.numa);
    mine.devices = net.ok() ? transport::net::DevicesNearFirst(**net, spec.numa).size() : 0;
  } else {
    mine.devices = 1;
  }
  if (agreed.gpu_hosts) {
    const transport::net::GpuDirectVerdict verdict = transport::net::JudgeGpuDirect(
        transport::net::ProbeGpuDirect(agreed.device, mine.fabric != 0), config_.net_gpudirect);
    RINGO_LOG(INFO) << "rank " << rank_ << ": GPUDirect RDMA " << verdict.text;
    mine.gpudirect = verdict.used ? 1 : 0;
  }
  std::vector<NetRecord> records(nranks_);
  RETURN_IF_ERROR(exchange.AllGather(&mine, sizeof(mine), records.data()));
  spec.fabrics.resize(nranks_);
  spec.gpudirect.resize(nranks_);
  for (int r = 0; r < nranks_; ++r) {
    spec.fabrics[r] = records[r].fabric;
    spec.gpudirect[r] = records[r].gpudirect != 0 ? 1 : 0;
    *net_devices = std::max<int>(*net_devices, static_cast<int>(std::min<uint64_t>(records[r].devices, 64)));
  }
  return spec;
}

// How this rank's calls wait: its abort flag, its patience, and where the
// ranks share pages, the wait cells.
void Communicator::ConfigureWait(const EngineSetup& setup) {
  wait_.local_abort = &abort_;
  wait_.timeout_ms = timeout_ms_;
  wait_.spin_count = setup.host.spin_count;
  wait_.yield_count = setup.host.yield_count;
  wait_.crowded = setup.host.crowded;
  wait_.self_rank = rank_;
  wait_.nranks = nranks_;
  engines_.residence->ConfigureWait(&wait_);
}

}  // namespace ringo::collectives
