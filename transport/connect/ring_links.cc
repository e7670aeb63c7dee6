#include "transport/connect/ring_links.h"

#include <unistd.h>

#include <cstring>
#include <algorithm>
#include <fstream>
#include <string>
#include <thread>

#include "base/check.h"
#include "base/config.h"
#include "base/logging.h"
#include "transport/net/registry.h"
#include "transport/peer_state.h"
#include "transport/shm/segment.h"

namespace ringo::transport {
namespace {

// Two ranks share a host (and so memory) when they share the boot id, the
// host name and the network namespace, or RINGO_HOSTID says so.
uint64_t HostHash(const std::string& host_id) {
  std::string key;
  if (!host_id.empty()) {
    key = "RINGO_HOSTID=" + host_id;
  } else {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    key = host;
    std::ifstream boot_id("/proc/sys/kernel/random/boot_id");
    std::string id;
    if (boot_id >> id) key += "/" + id;
    char ns[128] = {0};
    const ssize_t n = readlink("/proc/self/ns/net", ns, sizeof(ns) - 1);
    if (n > 0) key += "/" + std::string(ns, static_cast<size_t>(n));
  }
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char c : key) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h;
}

// Ranks of one machine share its CPUs even when they are different hosts
// (containers, network namespaces): the boot id tells.
uint64_t MachineHash() {
  std::ifstream boot_id("/proc/sys/kernel/random/boot_id");
  std::string id;
  boot_id >> id;
  uint64_t h = 1469598103934665603ull;
  for (char c : id) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h;
}

int PositionOf(const RingSpec& spec, int rank) {
  for (int p = 0; p < spec.nranks; ++p) {
    if (spec.order[p] == rank) return p;
  }
  RINGO_CHECK(false, "rank " + std::to_string(rank) + " is not on the ring");
  return -1;
}

// Shared memory needs one host; the network edges of the plan connect others.
base::Status CheckShmReachable(const PeerInfo& self, const PeerInfo& peer) {
  if (self.host_hash != peer.host_hash) {
    return base::Internal("rank " + std::to_string(self.rank) + " and rank " + std::to_string(peer.rank) +
                          " are on different hosts, but the ring joins them by shared memory");
  }
  return base::OkStatus();
}

}  // namespace

PeerInfo LocalPeerInfo(int rank, int device, const std::string& host_id) {
  PeerInfo info{};
  info.host_hash = HostHash(host_id);
  info.machine_hash = MachineHash();
  info.cores = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  const ProcessId self = SelfProcessId();
  info.pid = self.pid;
  info.start_ticks = self.start_ticks;
  info.rank = rank;
  info.device = device;
  return info;
}

base::Status ValidatePeerInfos(const std::vector<PeerInfo>& peers) {
  for (size_t r = 0; r < peers.size(); ++r) {
    const PeerInfo& p = peers[r];
    auto bad = [&](const std::string& what) {
      return base::RemoteError("bootstrap: rank " + std::to_string(r) + " sent " + what).WithOrigin(static_cast<int>(r),
                                                                                                 "a malformed peer record");
    };
    if (p.rank != static_cast<int32_t>(r)) return bad("the record of rank " + std::to_string(p.rank));
    if (p.pid <= 0) return bad("pid " + std::to_string(p.pid));
    if (p.nchannels < 0 || p.nchannels > 64) return bad(std::to_string(p.nchannels) + " channels");
    if (p.slot_bytes < 0 || p.slot_bytes % 64 != 0 || p.slot_bytes > (int64_t{1} << 30)) {
      return bad("a slot size of " + std::to_string(p.slot_bytes) + " bytes");
    }
    if (p.algorithm < 0 || p.algorithm > 3 || p.proto < 0 || p.proto > 2 || p.device_wish < 0 || p.device_wish > 2) {
      return bad("an unknown algorithm, protocol or device choice");
    }
    if ((p.check != 0 && p.check != 1) || (p.deterministic != 0 && p.deterministic != 1)) {
      return bad("a setting that is neither 0 nor 1");
    }
    if (p.device < -1 || p.numa < -1) return bad("device " + std::to_string(p.device));
    if (p.cores < 1) return bad(std::to_string(p.cores) + " cores");
  }
  return base::OkStatus();
}

namespace {

// The network edges of rank `rank`: connections accepted from its
// predecessor and made to its successor, every rank taking part in the
// bootstrap exchange of handles.
base::Status ConnectNetEdges(Exchange& bootstrap, uint64_t tag, int rank, int prev, int next, bool recv_net,
                             bool send_net, int numa, const RingSpec& spec, RingLinks* links) {
  const base::Config& config = base::GetConfig();
  // Each edge's transport: verbs where both ends have a port on one fabric,
  // sockets otherwise; every rank learns every rank's fabric.
  const uint64_t fabric = (recv_net || send_net) ? net::VerbsFabric(config, numa) : 0;
  std::vector<uint64_t> fabrics(spec.nranks);
  RETURN_IF_ERROR(bootstrap.AllGather(&fabric, sizeof(fabric), fabrics.data()));
  links->fabrics = fabrics;
  base::Status st;
  auto pick = [&](bool used, int peer, const char* way) -> net::Net* {
    if (!used || !st.ok()) return nullptr;
    auto kind = net::ChooseNet(config, fabric, fabrics[peer], rank, peer);
    if (!kind.ok()) {
      st = kind.status();
      return nullptr;
    }
    auto made = net::ProcessNet(config, *kind, numa);
    if (!made.ok()) {
      st = made.status();
      return nullptr;
    }
    RINGO_LOG(INFO) << "rank " << rank << ": the edge " << way << " rank " << peer << " takes "
                    << net::NetKindName(*kind)
                    << (*kind == net::NetKind::kIb ? "" : fabric == 0 ? " (no verbs port here)"
                                                      : fabrics[peer] == 0 ? " (no verbs port there)"
                                                                           : " (verbs ports on different fabrics)");
    return *made;
  };
  net::Net* const from_prev = pick(recv_net, prev, "from");
  net::Net* const to_next = pick(send_net, next, "to");
  // Listen first, then publish the handles.
  const int nch = spec.nchannels;
  std::vector<std::unique_ptr<net::Listener>> listeners(nch);
  std::vector<net::NetHandle> mine(nch);
  for (int c = 0; c < nch && st.ok() && recv_net; ++c) {
    net::ConnectOptions o{rank, prev, tag};
    auto l = from_prev->Listen(c % from_prev->DeviceCount(), o, &mine[c]);
    if (l.ok()) listeners[c] = std::move(l).value();
    else st = l.status();
  }
  st = AgreeOk(bootstrap, st, "listen on the network");
  RETURN_IF_ERROR(st.WithContext("network"));
  std::vector<net::NetHandle> all(static_cast<size_t>(nch) * spec.nranks);
  RETURN_IF_ERROR(bootstrap.AllGather(mine.data(), sizeof(net::NetHandle) * nch, all.data()));
  // Accept on a thread while connecting: every rank does both at once.
  const Deadline deadline = DeadlineAfterMs(spec.timeout_ms);
  std::vector<std::unique_ptr<net::RecvConnection>> accepted(nch);
  base::Status accept_st;
  std::thread acceptor([&] {
    for (int c = 0; c < nch && recv_net && accept_st.ok(); ++c) {
      auto conn = listeners[c]->Accept(prev, deadline);
      if (conn.ok()) accepted[c] = std::move(conn).value();
      else accept_st = conn.status();
    }
  });
  std::vector<std::unique_ptr<net::SendConnection>> connected(nch);
  for (int c = 0; c < nch && send_net && st.ok(); ++c) {
    net::ConnectOptions o{rank, next, tag};
    auto conn = to_next->Connect(c % to_next->DeviceCount(), all[static_cast<size_t>(next) * nch + c], o, deadline);
    if (conn.ok()) connected[c] = std::move(conn).value();
    else st = conn.status();
  }
  acceptor.join();
  if (st.ok()) st = accept_st;
  st = AgreeOk(bootstrap, st, "connect its network edges");
  RETURN_IF_ERROR(st.WithContext("network"));
  // Local FIFOs, in this process, that the proxy serves (registered with
  // their connections; every rank takes part in the agreement below).
  const ProcessId self = SelfProcessId();
  net::ProxyOptions po;
  po.self_rank = rank;
  po.spin_count = spec.proxy_spin_count;
  po.yield_count = spec.proxy_yield_count;
  if (recv_net || send_net) links->proxy = std::make_unique<net::Proxy>(po);
  for (int c = 0; c < nch && (recv_net || send_net); ++c) {
    if (recv_net) {
      auto mem = AllocateProcessFifo(spec.slot_bytes, rank, net::kProxySlotPrefix);
      auto* h = static_cast<FifoHeader*>(mem->base());
      h->sender_rank = prev;            // the remote sender, as the executor names it
      h->sender_process = ProcessId{};  // not on this host: its death shows on the connection
      links->channels[c].recv = std::make_unique<RecvEnd>(mem, rank, self);
      if (st.ok()) st = links->proxy->AddReceiver(mem, std::move(accepted[c]), c);
    }
    if (send_net) {
      auto mem = AllocateProcessFifo(spec.slot_bytes, next, net::kProxySlotPrefix);
      static_cast<FifoHeader*>(mem->base())->receiver_process = ProcessId{};
      links->channels[c].send = std::make_unique<SendEnd>(mem, rank, self);
      if (st.ok()) st = links->proxy->AddSender(mem, std::move(connected[c]), c);
    }
  }
  st = AgreeOk(bootstrap, st, "register its FIFOs with the network");
  RETURN_IF_ERROR(st.WithContext("network"));
  return links->proxy != nullptr ? links->proxy->Start() : base::OkStatus();
}

}  // namespace

base::StatusOr<RingLinks> ConnectRing(Exchange& bootstrap, uint64_t tag, int rank, const RingSpec& spec,
                                      const std::vector<PeerInfo>& peers) {
  const int n = spec.nranks;
  const int pos = PositionOf(spec, rank);
  const int prev = spec.order[(pos + n - 1) % n];
  const int next = spec.order[(pos + 1) % n];
  auto is_net = [&](int p) { return !spec.net_edges.empty() && spec.net_edges[(p + n) % n]; };
  const bool recv_net = is_net(pos - 1);
  const bool send_net = is_net(pos);
  bool any_net = false;
  for (int p = 0; p < n; ++p) any_net = any_net || is_net(p);
  // Check on every rank before anyone creates memory, then agree.
  base::Status reach;
  if (!recv_net) reach = CheckShmReachable(peers[rank], peers[prev]);
  if (reach.ok() && !send_net) reach = CheckShmReachable(peers[rank], peers[next]);
  RETURN_IF_ERROR(reach);

  // Shared memory: receive side first (the memory is the receiver's), then
  // everyone opens its send side, then the creators unlink the names.
  RingLinks links;
  links.channels.resize(spec.nchannels);
  std::vector<std::shared_ptr<FifoMemory>> mine(spec.nchannels);
  std::vector<std::string> names;
  base::Status st;
  for (int c = 0; c < spec.nchannels && st.ok() && !recv_net; ++c) {
    names.push_back(ShmFifoName(tag, rank, c));
    auto mem = CreateShmFifo(names.back(), spec.slot_bytes, rank);
    if (mem.ok()) mine[c] = *mem;
    else st = mem.status();
  }
  auto cleanup = [&] {
    for (const std::string& name : names) UnlinkShm(name);
  };
  st = AgreeOk(bootstrap, st, "create its shared-memory FIFOs");
  if (!st.ok()) {
    cleanup();
    return st;
  }
  for (int c = 0; c < spec.nchannels && st.ok(); ++c) {
    if (!recv_net) links.channels[c].recv = std::make_unique<RecvEnd>(mine[c], rank, SelfProcessId());
    if (send_net) continue;
    auto theirs = OpenShmFifo(ShmFifoName(tag, next, c), spec.slot_bytes);
    if (!theirs.ok()) {
      st = theirs.status();
      break;
    }
    links.channels[c].send = std::make_unique<SendEnd>(*theirs, rank, SelfProcessId());
  }
  st = AgreeOk(bootstrap, st, "open its peer's shared-memory FIFOs");
  cleanup();
  RETURN_IF_ERROR(st);
  if (any_net) {
    RETURN_IF_ERROR(
        ConnectNetEdges(bootstrap, tag, rank, prev, next, recv_net, send_net, peers[rank].numa, spec, &links));
  }
  RINGO_LOG(INFO) << "rank " << rank << ": ring connected, prev " << prev << (recv_net ? " (network)" : " (shm)")
                  << " next " << next << (send_net ? " (network)" : " (shm)") << ", " << spec.nchannels
                  << " channel(s) of " << kSlots << " x " << spec.slot_bytes << " B";
  return links;
}

std::vector<std::vector<ChannelLinks>> ConnectRingInProcess(const RingSpec& spec) {
  std::vector<std::vector<ChannelLinks>> links(spec.nranks);
  for (auto& l : links) l.resize(spec.nchannels);
  for (int pos = 0; pos < spec.nranks; ++pos) {
    const int rank = spec.order[pos];
    const int next = spec.order[(pos + 1) % spec.nranks];
    for (int c = 0; c < spec.nchannels; ++c) {
      auto mem = AllocateProcessFifo(spec.slot_bytes, next);
      links[next][c].recv = std::make_unique<RecvEnd>(mem, next, SelfProcessId());
      links[rank][c].send = std::make_unique<SendEnd>(mem, rank, SelfProcessId());
    }
  }
  return links;
}

}  // namespace ringo::transport
