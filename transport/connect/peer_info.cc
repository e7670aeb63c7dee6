#include "transport/connect/peer_info.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include "base/logging.h"
#include "transport/peer_state.h"
#include "transport/shm/segment.h"

namespace ringo::transport {
namespace {

uint64_t Fnv1a(const std::string& key) {
  uint64_t h = 1469598103934665603ull;
  for (char c : key) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h;
}

std::string BootId() {
  std::ifstream boot_id("/proc/sys/kernel/random/boot_id");
  std::string id;
  boot_id >> id;
  return id;
}

// Two ranks share a host (and so memory) when they share the boot id, the
// host name and the network namespace, or RINGO_HOSTID says so.
uint64_t HostHash(const std::string& host_id) {
  if (!host_id.empty()) return Fnv1a("RINGO_HOSTID=" + host_id);
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string key = host;
  const std::string id = BootId();
  if (!id.empty()) key += "/" + id;
  char ns[128] = {0};
  const ssize_t n = readlink("/proc/self/ns/net", ns, sizeof(ns) - 1);
  if (n > 0) key += "/" + std::string(ns, static_cast<size_t>(n));
  return Fnv1a(key);
}

// What a probe segment holds: who made it, so a namesake is not mistaken for it.
struct Probe {
  uint64_t tag;
  int32_t rank;
  int32_t pid;
};

std::string ProbeName(uint64_t tag, int rank) {
  char name[96];
  std::snprintf(name, sizeof(name), "/ringo-%016llx-probe-%d", static_cast<unsigned long long>(tag), rank);
  return name;
}

}  // namespace

PeerInfo LocalPeerInfo(int rank, int device, const std::string& host_id) {
  PeerInfo info{};
  info.host_hash = HostHash(host_id);
  // Ranks of one machine share its CPUs even when they are different hosts
  // (containers, network namespaces): the boot id tells.
  info.machine_hash = Fnv1a(BootId());
  info.cores = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  const ProcessId self = SelfProcessId();
  info.pid = self.pid;
  info.start_ticks = self.start_ticks;
  info.rank = rank;
  info.device = device;
  info.numa = -1;
  return info;
}

base::Status ValidatePeerInfos(const std::vector<PeerInfo>& peers) {
  for (size_t r = 0; r < peers.size(); ++r) {
    const PeerInfo& p = peers[r];
    auto bad = [&](const std::string& what) {
      return base::RemoteError("bootstrap: rank " + std::to_string(r) + " sent " + what)
          .WithOrigin(static_cast<int>(r), "a malformed peer record");
    };
    if (p.rank != static_cast<int32_t>(r)) return bad("the record of rank " + std::to_string(p.rank));
    if (p.pid <= 0) return bad("pid " + std::to_string(p.pid));
    if (p.device < -1 || p.numa < -1) return bad("device " + std::to_string(p.device));
    if (p.cores < 1) return bad(std::to_string(p.cores) + " cores");
  }
  return base::OkStatus();
}

base::StatusOr<std::vector<int>> MemoryDomains(Exchange& exchange, uint64_t tag, const std::vector<PeerInfo>& peers) {
  const int n = static_cast<int>(peers.size());
  const int self = exchange.rank();
  // Processes of one host that might share memory: anyone else needs no probe.
  bool others_here = false;
  for (int r = 0; r < n; ++r) {
    others_here = others_here || (r != self && peers[r].host_hash == peers[self].host_hash &&
                                  !SameProcess(peers[r], peers[self]));
  }
  // Whether any rank has such a neighbour decides, on every rank alike,
  // whether the probe round runs at all.
  bool anyone = false;
  for (int r = 0; r < n && !anyone; ++r) {
    for (int q = 0; q < n && !anyone; ++q) {
      anyone = q != r && peers[q].host_hash == peers[r].host_hash && !SameProcess(peers[q], peers[r]);
    }
  }
  std::vector<uint8_t> reach(static_cast<size_t>(n) * n, 0);  // reach[a * n + b]: a opened b's probe
  if (anyone) {
    std::shared_ptr<FifoMemory> mine;
    const std::string my_name = ProbeName(tag, self);
    if (others_here) {
      auto made = CreateShm(my_name, sizeof(Probe));
      if (made.ok()) {
        mine = *made;
        Probe p{tag, self, static_cast<int32_t>(::getpid())};
        std::memcpy(mine->base(), &p, sizeof(p));
      } else {
        RINGO_LOG(INFO) << "rank " << self << ": cannot make a shared-memory probe: " << made.status().message();
      }
    }
    RETURN_IF_ERROR(exchange.Barrier().WithContext("probing shared memory"));  // every probe exists
    std::vector<uint8_t> opened(n, 0);
    for (int r = 0; r < n; ++r) {
      if (r == self || SameProcess(peers[r], peers[self])) {
        opened[r] = 1;
        continue;
      }
      if (peers[r].host_hash != peers[self].host_hash) continue;
      auto theirs = OpenShm(ProbeName(tag, r), sizeof(Probe));
      if (!theirs.ok()) continue;
      Probe p;
      std::memcpy(&p, (*theirs)->base(), sizeof(p));
      opened[r] = p.tag == tag && p.rank == r && p.pid == peers[r].pid ? 1 : 0;
    }
    const base::Status gathered = exchange.AllGather(opened.data(), opened.size(), reach.data());
    if (mine != nullptr) UnlinkShm(my_name);
    RETURN_IF_ERROR(gathered.WithContext("probing shared memory"));
  }
  // Domains: ranks that opened each other's probes, the smallest rank naming
  // each; every rank computes this from the same matrix.
  std::vector<int> domain(n);
  for (int r = 0; r < n; ++r) {
    domain[r] = r;
    for (int q = 0; q < r; ++q) {
      const bool same = SameProcess(peers[q], peers[r]) ||
                        (anyone && reach[static_cast<size_t>(r) * n + q] && reach[static_cast<size_t>(q) * n + r]);
      if (same && peers[q].host_hash == peers[r].host_hash) {
        domain[r] = domain[q];
        break;
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    if (r != self && peers[r].host_hash == peers[self].host_hash && domain[r] != domain[self]) {
      RINGO_LOG(INFO) << "rank " << self << ": rank " << r << " shares this host but not its shared memory "
                      << "(/dev/shm): the two connect over the network";
    }
  }
  return domain;
}

}  // namespace ringo::transport
