#include "collectives/engines/host_p2p.h"

#include <sched.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>

#include "base/cpu_relax.h"
#include "base/logging.h"

namespace ringo::collectives {

using base::Status;

namespace {

// While several operations are pending: how long one sleep on all their
// counters lasts, and then one check of one operation's peer and flags.
constexpr int64_t kSleepMs = 20;
constexpr int64_t kSliceMs = 1;

using base::CpuRelax;

using transport::NowMs;

const char* OpName(const P2pOp& op) { return op.send ? "ringoSend" : "ringoRecv"; }

// What a descriptor slot carries: where the sender's bytes are, and, when
// they lie in one of its ringoMemAlloc regions, that region's name and
// their offset in it (region_fd -1: none).
struct Descriptor {
  int32_t pid;
  int32_t region_fd;
  uint64_t addr;
  uint64_t bytes;
  uint64_t region_id;
  uint64_t region_bytes;
  uint64_t region_offset;
};
static_assert(sizeof(Descriptor) <= 64, "a descriptor fits the smallest slot (RINGO_SLOT_BYTES >= 64)");

// The largest message copied out of a mapped region. Regions are 4 KiB
// pages (shared memory gets no transparent huge pages by default), and a
// user-space copy from one, above a few tens of MiB, spends its time in
// page-table walks: measured on 2 ranks, 256 MiB ran at 2.4-3.2 GB/s mapped
// against 3.5-3.8 with process_vm_readv (the kernel copies through its own
// mapping), while 1-64 MiB ran 1.2-2.3x faster mapped.
constexpr uint64_t kMappedCopyMaxBytes = uint64_t{64} << 20;

// Copies `bytes` at `addr` in process `pid` (this one or another) to `dst`:
// from the sender's mapped ringoMemAlloc region where it named one (one
// memcpy), else with process_vm_readv. A sender whose regions the system
// refuses to map joins `unmappable` and is not tried again.
Status Pull(const Descriptor& d, void* dst, transport::PeerRegions* regions, std::set<int32_t>* unmappable) {
  if (d.region_fd >= 0 && d.pid != ::getpid() && d.bytes <= kMappedCopyMaxBytes && unmappable->count(d.pid) == 0) {
    if (d.region_offset > d.region_bytes || d.bytes > d.region_bytes - d.region_offset) {
      return base::RemoteError("a descriptor beyond the region it names (" + std::to_string(d.bytes) +
                               " bytes at offset " + std::to_string(d.region_offset) + " of " +
                               std::to_string(d.region_bytes) + ")");
    }
    transport::RegionName name;
    name.pid = d.pid;
    name.fd = d.region_fd;
    name.id = d.region_id;
    name.bytes = d.region_bytes;
    auto base = regions->Map(name);
    if (base.ok()) {
      std::memcpy(dst, *base + d.region_offset, d.bytes);
      return Status();
    }
    // Not mappable from here (another user, a namespace: a system error):
    // the system call, from now on. A region gone stale is only this message's.
    if (base.status().code() == base::Code::kSystemError) unmappable->insert(d.pid);
    RINGO_LOG(INFO) << "point-to-point: " << base.status().message() << "; reading with process_vm_readv";
  }
  if (d.pid == ::getpid()) {
    std::memcpy(dst, reinterpret_cast<const void*>(d.addr), d.bytes);
    return Status();
  }
  uint64_t done = 0;
  while (done < d.bytes) {
    iovec local{static_cast<char*>(dst) + done, d.bytes - done};
    iovec remote{reinterpret_cast<void*>(d.addr + done), d.bytes - done};
    const ssize_t n = ::process_vm_readv(d.pid, &local, 1, &remote, 1, 0);
    if (n <= 0) {
      return base::SystemError("process_vm_readv of " + std::to_string(d.bytes) + " bytes from pid " +
                               std::to_string(d.pid) + " failed: " + std::strerror(errno));
    }
    done += static_cast<uint64_t>(n);
  }
  return Status();
}

}  // namespace

struct HostP2p::Progress {
  const P2pOp* op = nullptr;
  uint64_t msg = 0;       // the message's number on its pair (from 1)
  size_t slot_bytes = 0;  // the pair's FIFO slot
  int64_t nslots = 1;     // slots the message takes (an empty one takes one)
  int64_t slots = 0;      // slots moved so far
  size_t offset = 0;      // bytes moved so far
  bool done = false;
  // A send as a descriptor: posted, and the slot count that releases it.
  bool direct = false;
  bool posted = false;
  uint64_t ticket = 0;
};

HostP2p::HostP2p(const EngineSetup& setup)
    : rank_(setup.rank),
      nranks_(setup.nranks),
      connector_(setup.connector),
      geometry_{static_cast<uint64_t>(P2pSlotBytes(setup.settings)), 0, 0},
      send_(setup.nranks),
      recv_(setup.nranks),
      sent_(setup.nranks, 0),
      received_(setup.nranks, 0),
      busy_send_(setup.nranks, 0),
      busy_recv_(setup.nranks, 0) {}

HostP2p::~HostP2p() = default;

namespace {

// The k-th send to itself and the k-th receive from itself, in order (no
// allocation: most calls have none).
template <typename Visit>
void PairSelf(int rank, const std::vector<P2pOp>& ops, Visit visit) {
  size_t s = 0, r = 0, k = 0;
  while (true) {
    while (s < ops.size() && !(ops[s].peer == rank && ops[s].send)) ++s;
    while (r < ops.size() && !(ops[r].peer == rank && !ops[r].send)) ++r;
    if (s == ops.size() || r == ops.size()) return;
    visit(ops[s++], ops[r++], ++k);
  }
}

}  // namespace

Status PointToPoint::CheckSelf(int rank_, const std::vector<P2pOp>& ops) {
  size_t sends = 0, recvs = 0;
  for (const P2pOp& op : ops) {
    if (op.peer == rank_) ++(op.send ? sends : recvs);
  }
  if (sends == 0 && recvs == 0) return Status();
  if (sends != recvs) {
    return base::InvalidUsage("rank " + std::to_string(rank_) + " posted " + std::to_string(sends) +
                              " send(s) to itself and " + std::to_string(recvs) +
                              " receive(s) from itself: each must meet its match in the same call or group");
  }
  Status st;
  PairSelf(rank_, ops, [&](const P2pOp& send, const P2pOp& recv, size_t k) {
    if (st.ok() && send.bytes != recv.bytes) {
      st = base::InvalidUsage("rank " + std::to_string(rank_) + " sends " + std::to_string(send.bytes) +
                              " bytes to itself but receives " + std::to_string(recv.bytes) + " (message #" +
                              std::to_string(k) + " to itself in this group)");
    }
  });
  return st;
}

Status HostP2p::Connect(const std::vector<P2pOp>& ops, const std::atomic<bool>* abort) {
  // Every call after a pair's first finds its ends here, without allocating.
  bool missing = false;
  for (const P2pOp& op : ops) {
    missing = missing || (op.peer != rank_ && !Connected(op));
  }
  if (!missing) return Status();
  std::vector<transport::PairKey> sends, recvs;
  for (const P2pOp& op : ops) {
    const transport::PairKey key{op.peer, transport::kP2pLane};
    std::vector<transport::PairKey>& list = op.send ? sends : recvs;
    if (op.peer != rank_ && !Connected(op) && std::find(list.begin(), list.end(), key) == list.end()) {
      list.push_back(key);
    }
  }
  ASSIGN_OR_RETURN(std::vector<transport::FifoLink> links,
                   connector_->Connect(sends, recvs, geometry_, /*gpu=*/false, abort));
  std::lock_guard<std::mutex> lock(ends_mu_);
  for (const transport::FifoLink& l : links) {
    if (l.sending) send_[l.peer] = transport::MakeSendEnd(l, rank_);
    else recv_[l.peer] = transport::MakeRecvEnd(l, rank_);
  }
  RINGO_LOG(INFO) << "rank " << rank_ << ": point-to-point connected " << sends.size() << " send and "
                  << recvs.size() << " receive end(s)";
  return Status();
}

void HostP2p::Abort(const Status& why, uint64_t seq) {
  std::lock_guard<std::mutex> lock(ends_mu_);
  for (auto& e : send_) {
    if (e) e->Abort(why, rank_, seq);
  }
  for (auto& e : recv_) {
    if (e) e->Abort(why, rank_, seq);
  }
}

void HostP2p::RunSelf(const std::vector<P2pOp>& ops) {
  PairSelf(rank_, ops, [](const P2pOp& send, const P2pOp& recv, size_t) {
    if (send.bytes > 0 && send.send_buf != recv.recv_buf) {
      std::memmove(recv.recv_buf, send.send_buf, std::min(send.bytes, recv.bytes));
    }
  });
}

Status HostP2p::Advance(Progress& p, bool* moved) {
  const P2pOp& op = *p.op;
  if (op.send && p.direct) {
    transport::SendEnd* end = send_[op.peer].get();
    if (!p.posted) {
      void* slot = end->TryAcquire();
      if (slot == nullptr) return Status();
      Descriptor d{static_cast<int32_t>(::getpid()), -1, reinterpret_cast<uint64_t>(op.send_buf), op.bytes, 0, 0, 0};
      transport::RegionName region;
      uint64_t offset = 0;
      if (transport::FindSharedRegion(op.send_buf, op.bytes, &region, &offset)) {
        d.region_fd = region.fd;
        d.region_id = region.id;
        d.region_bytes = region.bytes;
        d.region_offset = offset;
      }
      std::memcpy(slot, &d, sizeof(d));
      transport::CallSignature sig;
      sig.seq = p.msg;
      sig.count = static_cast<int64_t>(op.bytes);
      sig.shape = kP2pDirectShape;
      end->Post(sizeof(d), sig);
      p.ticket = end->posted();
      p.posted = true;
      *moved = true;
    }
    if (end->Released(p.ticket)) {  // the receiver has copied the bytes
      p.done = true;
      *moved = true;
    }
    return Status();
  }
  if (op.send) {
    transport::SendEnd* end = send_[op.peer].get();
    while (p.slots < p.nslots) {
      const size_t n = std::min(p.slot_bytes, op.bytes - p.offset);
      void* slot = end->TryAcquire(n);  // a small message goes inline, in the slot's metadata line
      if (slot == nullptr) break;
      if (n > 0) std::memcpy(slot, static_cast<const char*>(op.send_buf) + p.offset, n);
      transport::CallSignature sig;
      sig.seq = p.msg;
      sig.count = static_cast<int64_t>(op.bytes);
      sig.shape = kP2pShape;
      sig.root = static_cast<int32_t>(p.slots);
      end->Post(n, sig);
      p.offset += n;
      ++p.slots;
      *moved = true;
    }
  } else {
    transport::RecvEnd* end = recv_[op.peer].get();
    while (p.slots < p.nslots) {
      size_t n = 0;
      transport::CallSignature sig;
      ASSIGN_OR_RETURN(const void* slot, end->TryAcquire(&n, &sig));
      if (slot == nullptr) break;
      // Named only when something fails: this loop runs once per slot.
      auto where = [&] {
        return "rank " + std::to_string(rank_) + " receiving from peer rank " + std::to_string(op.peer) +
               " (ringoRecv #" + std::to_string(p.msg) + ")";
      };
      if (sig.shape == kP2pDirectShape && sig.seq == p.msg && p.slots == 0 && n == sizeof(Descriptor) &&
          static_cast<uint64_t>(sig.count) == op.bytes) {
        Descriptor d;
        std::memcpy(&d, slot, sizeof(d));
        if (d.bytes != op.bytes) return base::RemoteError(where() + ": a descriptor of the wrong size");
        const Status pulled = Pull(d, op.recv_buf, &regions_, &unmappable_);
        if (!pulled.ok()) return pulled.WithContext(where());
        end->Release();
        p.offset = op.bytes;
        p.slots = p.nslots = 1;
        *moved = true;
        break;
      }
      if ((sig.shape != kP2pShape && sig.shape != kP2pDirectShape) || sig.seq != p.msg) {
        return base::RemoteError(where() + ": the peer's slot belongs to no message this rank expects")
            .WithOrigin(op.peer, where() + ": a slot of no expected message");
      }
      if (static_cast<uint64_t>(sig.count) != op.bytes) {
        const std::string what = where() + ": peer rank " + std::to_string(op.peer) + " sent " +
                                 std::to_string(sig.count) + " bytes, but the matching ringoRecv expects " +
                                 std::to_string(op.bytes) + " (mismatched ringoSend and ringoRecv)";
        return base::InvalidUsage(what).WithOrigin(rank_, what);
      }
      const size_t want = std::min(p.slot_bytes, op.bytes - p.offset);
      if (sig.root != static_cast<int32_t>(p.slots) || n != want) {
        return base::RemoteError(where() + ": a slot out of order or of the wrong size")
            .WithOrigin(op.peer, where() + ": a malformed slot");
      }
      if (n > 0) std::memcpy(static_cast<char*>(op.recv_buf) + p.offset, slot, n);
      end->Release();
      p.offset += n;
      ++p.slots;
      *moved = true;
    }
  }
  p.done = p.slots == p.nslots;
  return Status();
}

Status HostP2p::WaitOn(Progress& p, const transport::WaitContext& base_ctx) {
  transport::WaitContext ctx = base_ctx;
  if (!collective_) {
    ctx.coll = OpName(*p.op);
    ctx.seq = p.msg;
  }
  if (p.op->send && p.posted) return send_[p.op->peer]->WaitReleased(p.ticket, ctx, 0);
  if (p.op->send) return send_[p.op->peer]->Acquire(ctx, p.slots).status();
  size_t bytes = 0;
  return recv_[p.op->peer]->Acquire(ctx, p.slots, &bytes, nullptr).status();
}

Status HostP2p::Run(const std::vector<P2pOp>& ops, P2pCall& call) {
  call.fatal = true;
  collective_ = call.collective;
  const transport::WaitContext& wait = call.wait;
  RunSelf(ops);
  RETURN_IF_ERROR(Connect(ops, wait.local_abort));

  std::vector<Progress>& progress = progress_;  // reused: no allocation per call
  progress.clear();
  for (const P2pOp& op : ops) {
    if (op.peer == rank_) continue;
    Progress p;
    p.op = &op;
    p.msg = op.send ? ++sent_[op.peer] : ++received_[op.peer];
    p.slot_bytes = op.send ? send_[op.peer]->slot_bytes() : recv_[op.peer]->slot_bytes();
    p.nslots = op.bytes == 0 ? 1 : static_cast<int64_t>((op.bytes + p.slot_bytes - 1) / p.slot_bytes);
    p.direct = op.send && op.bytes >= kDirectMinBytes &&
               send_[op.peer]->header()->receiver_pulls.load(std::memory_order_acquire) == 1;
    progress.push_back(p);
  }
  if (progress.empty()) return Status();
  std::vector<char>& busy_send = busy_send_;
  std::vector<char>& busy_recv = busy_recv_;
  std::vector<size_t>& active = active_;
  int64_t idle = 0;
  size_t turn = 0;  // which active operation the next sleep is on
  int64_t last_progress_ms = -1;  // read at the first idle pass after progress
  transport::WaitTracker stall;    // the stall check since the last progress
  while (true) {
    active.clear();
    bool moved = false;
    for (size_t i = 0; i < progress.size(); ++i) {
      Progress& p = progress[i];
      if (p.done) continue;
      char& busy = p.op->send ? busy_send[p.op->peer] : busy_recv[p.op->peer];
      if (busy) continue;  // an earlier operation on this pair and direction goes first
      RETURN_IF_ERROR(Advance(p, &moved));
      if (!p.done) {
        busy = 1;
        active.push_back(i);
      }
    }
    // Only the entries this pass set go back to 0.
    for (size_t i : active) (progress[i].op->send ? busy_send : busy_recv)[progress[i].op->peer] = 0;
    if (active.empty()) return Status();
    if (moved) {
      idle = 0;
      last_progress_ms = -1;
      continue;
    }
    if (last_progress_ms < 0) last_progress_ms = NowMs();
    ++idle;
    if (idle <= wait.spin_count) {
      CpuRelax();
      continue;
    }
    if (idle <= static_cast<int64_t>(wait.spin_count) + wait.yield_count) {
      sched_yield();
      continue;
    }
    if (active.size() > 1) {
      // Several operations: sleep on all their counters at once (a publish
      // on any wakes this rank), then check one operation's peer and flags
      // (in turn) in a short wait of its own.
      std::vector<transport::CounterTarget> targets;
      for (size_t i : active) {
        const Progress& q = progress[i];
        const P2pOp& op = *q.op;
        targets.push_back(!op.send  ? recv_[op.peer]->FilledSlotTarget()
                          : q.posted ? send_[op.peer]->ReleasedTarget(q.ticket)
                                     : send_[op.peer]->FreeSlotTarget());
      }
      if (transport::SleepUntilAny(targets.data(), static_cast<int>(targets.size()), kSleepMs)) continue;
    }
    Progress& p = progress[active[turn++ % active.size()]];
    if (active.size() == 1) {
      // One operation left: its wait is the FIFO's, with the communicator's
      // timeout and the peer named on failure.
      RETURN_IF_ERROR(WaitOn(p, wait));
      continue;
    }
    transport::WaitContext slice = wait;
    slice.timeout_ms = kSliceMs;
    slice.spin_count = 0;
    slice.yield_count = 0;
    slice.self_wait = nullptr;  // a slice never waits on behalf of a stalled peer
    slice.rank_waits = nullptr;
    slice.stall = nullptr;      // the stall is this loop's to judge, below
    Status st = WaitOn(p, slice);
    if (!st.ok() && st.code() != base::Code::kTimeout) return st;
    const P2pOp& op = *p.op;
    const int64_t now_ms = NowMs();
    // The hang diagnosis, once this rank has made no progress for long.
    transport::WaitContext stalled = wait;
    if (!collective_) {
      stalled.coll = OpName(op);
      stalled.seq = p.msg;
    }
    const transport::PeerRef peer{nullptr, op.peer, transport::ProcessId{}, op.send ? "sending to" : "receiving from",
                                  0, nullptr};
    if (stall.started_ms != last_progress_ms) stall = transport::WaitTracker{{}, 0, last_progress_ms};
    RETURN_IF_ERROR(transport::CheckStall(peer, stalled, stall, now_ms));
    if (now_ms - last_progress_ms >= wait.timeout_ms) {
      std::string msg = "rank " + std::to_string(rank_) + " " + (op.send ? "sending to" : "receiving from") +
                        " peer rank " + std::to_string(op.peer) + " (" + (collective_ && wait.coll != nullptr ? std::string(wait.coll) + " #" + std::to_string(wait.seq) + "'s exchange"
                                                                  : std::string(OpName(op)) + " #" + std::to_string(p.msg)) +
                        ", " + std::to_string(op.bytes) + " bytes, " + std::to_string(active.size()) +
                        " operations pending): no progress for " + std::to_string(wait.timeout_ms) + " ms";
      if (!stall.diagnosis.empty()) msg += "\n" + stall.diagnosis;
      return base::Timeout(msg).WithOrigin(op.peer, msg);
    }
  }
}

}  // namespace ringo::collectives
