#include "transport/ring_links.h"

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>

#include "base/check.h"
#include "base/logging.h"
#include "transport/peer_state.h"
#include "transport/shm.h"

namespace ringo::transport {
namespace {

uint64_t HostHash() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string key = host;
  std::ifstream boot_id("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (boot_id >> id) key += id;
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char c : key) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h;
}

int PositionOf(const RingSpec& spec, int rank) {
  for (int p = 0; p < spec.nranks; ++p) {
    if (spec.order[p] == rank) return p;
  }
  RINGO_CHECK(false, "rank " + std::to_string(rank) + " is not on the ring");
  return -1;
}

// The one transport available between two ranks, or why there is none.
base::Status CheckShmReachable(const PeerInfo& self, const PeerInfo& peer) {
  if (self.host_hash != peer.host_hash) {
    return base::InvalidUsage("rank " + std::to_string(self.rank) + " and rank " + std::to_string(peer.rank) +
                              " are on different hosts; this build connects ranks of one host only "
                              "(shared memory)");
  }
  return base::OkStatus();
}

}  // namespace

PeerInfo LocalPeerInfo(int rank, int device) {
  PeerInfo info{};
  info.host_hash = HostHash();
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
  }
  return base::OkStatus();
}

base::StatusOr<std::vector<ChannelLinks>> ConnectRing(Bootstrap& bootstrap, uint64_t tag, int rank,
                                                      const RingSpec& spec, const std::vector<PeerInfo>& peers) {
  const int pos = PositionOf(spec, rank);
  const int prev = spec.order[(pos + spec.nranks - 1) % spec.nranks];
  const int next = spec.order[(pos + 1) % spec.nranks];
  // Check on every rank before anyone creates memory, then agree.
  base::Status reach = CheckShmReachable(peers[rank], peers[prev]);
  if (reach.ok()) reach = CheckShmReachable(peers[rank], peers[next]);
  RETURN_IF_ERROR(reach);

  // Receive side first (the memory is the receiver's), then everyone opens
  // its send side, then the creators unlink the names.
  std::vector<ChannelLinks> links(spec.nchannels);
  std::vector<std::shared_ptr<FifoMemory>> mine(spec.nchannels);
  std::vector<std::string> names;
  base::Status st;
  for (int c = 0; c < spec.nchannels && st.ok(); ++c) {
    names.push_back(ShmFifoName(tag, rank, c));
    auto mem = CreateShmFifo(names.back(), spec.slot_bytes, rank);
    if (mem.ok()) mine[c] = *mem;
    else st = mem.status();
  }
  auto cleanup = [&] {
    for (const std::string& n : names) UnlinkShm(n);
  };
  st = AgreeOk(bootstrap, st, "create its shared-memory FIFOs");
  if (!st.ok()) {
    cleanup();
    return st;
  }
  for (int c = 0; c < spec.nchannels && st.ok(); ++c) {
    auto theirs = OpenShmFifo(ShmFifoName(tag, next, c), spec.slot_bytes);
    if (!theirs.ok()) {
      st = theirs.status();
      break;
    }
    links[c].recv = std::make_unique<RecvEnd>(mine[c], rank, SelfProcessId());
    links[c].send = std::make_unique<SendEnd>(*theirs, rank, SelfProcessId());
  }
  st = AgreeOk(bootstrap, st, "open its peer's shared-memory FIFOs");
  cleanup();
  RETURN_IF_ERROR(st);
  RINGO_LOG(INFO) << "rank " << rank << ": ring connected over shared memory, prev " << prev << " next " << next
                  << ", " << spec.nchannels << " channel(s) of " << kSlots << " x " << spec.slot_bytes << " B";
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
