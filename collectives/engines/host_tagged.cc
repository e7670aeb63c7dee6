#include "collectives/engines/host_tagged.h"

#include <sched.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "base/cpu_relax.h"
#include "base/logging.h"

namespace ringo::collectives {

using base::Status;
using transport::NowMs;

namespace {

constexpr size_t kTaggedSlotBytes = size_t{64} << 10;
// Once spinning and yielding are done: one sleep on every counter, then one
// short check of the watched peer.
constexpr int64_t kSleepMs = 20;
constexpr int64_t kSliceMs = 1;
// The counters one sleep watches (SleepUntilAny's limit).
constexpr size_t kMaxSleepTargets = 128;

std::string Source(int peer) { return peer == kAnySource ? "any rank" : "rank " + std::to_string(peer); }

}  // namespace

size_t TaggedSlotBytes(int64_t slot_setting) {
  return slot_setting > 0 ? std::min(kTaggedSlotBytes, static_cast<size_t>(slot_setting)) : kTaggedSlotBytes;
}

// A message seen and not taken: its bytes arrive into `data`.
struct HostTagged::Message {
  int peer = -1;
  int32_t tag = 0;
  uint64_t number = 0;  // on its pair
  size_t bytes = 0;
  size_t arrived = 0;
  std::vector<char> data;
  bool complete() const { return arrived == bytes; }
};

// The message whose slots are arriving on one pair, and where they go.
struct HostTagged::Incoming {
  bool active = false;
  char* dst = nullptr;
  size_t bytes = 0;
  size_t offset = 0;
  Message* queued = nullptr;  // null: into the receive's own buffer
};

// The receive being served.
struct HostTagged::Want {
  int peer = kAnySource;
  int32_t tag = 0;
  void* buf = nullptr;
  size_t bytes = 0;
  bool matched = false;  // a message streams into buf
  bool done = false;
  int source = -1;
  const Message* mismatch = nullptr;  // the first match, of another size (queued)
};

HostTagged::HostTagged(int rank, int nranks, transport::Connector* connector, size_t slot_bytes)
    : rank_(rank),
      nranks_(nranks),
      connector_(connector),
      geometry_{static_cast<uint64_t>(slot_bytes), 0, 0},
      send_(nranks),
      recv_(nranks),
      sent_(nranks, 0),
      received_(nranks, 0),
      incoming_(nranks) {}

HostTagged::~HostTagged() = default;

Status HostTagged::Connect(const std::atomic<bool>* abort) {
  std::vector<transport::PairKey> pairs;
  for (int p = 0; p < nranks_; ++p) {
    if (p != rank_) pairs.push_back({p, kTaggedLane});
  }
  if (pairs.empty()) return Status();
  ASSIGN_OR_RETURN(std::vector<transport::FifoLink> links,
                   connector_->Connect(pairs, pairs, geometry_, /*gpu=*/false, abort));
  std::lock_guard<std::mutex> lock(ends_mu_);
  for (const transport::FifoLink& l : links) {
    if (l.sending) send_[l.peer] = transport::MakeSendEnd(l, rank_);
    else recv_[l.peer] = transport::MakeRecvEnd(l, rank_);
  }
  RINGO_LOG(INFO) << "rank " << rank_ << ": tagged point-to-point connected to " << pairs.size() << " rank(s), "
                  << geometry_.slot_bytes << "-byte slots";
  return Status();
}

void HostTagged::Abort(const Status& why, uint64_t seq) {
  std::lock_guard<std::mutex> lock(ends_mu_);
  for (auto& e : send_) {
    if (e) e->Abort(why, rank_, seq);
  }
  for (auto& e : recv_) {
    if (e) e->Abort(why, rank_, seq);
  }
}

Status HostTagged::DrainPair(int peer, Want* want, bool* moved) {
  transport::RecvEnd* end = recv_[peer].get();
  Incoming& in = incoming_[peer];
  auto where = [&] {
    return "rank " + std::to_string(rank_) + " receiving tagged messages from peer rank " + std::to_string(peer) +
           " (message #" + std::to_string(received_[peer]) + ")";
  };
  while (true) {
    size_t n = 0;
    transport::CallSignature sig;
    ASSIGN_OR_RETURN(const void* slot, end->TryAcquire(&n, &sig));
    if (slot == nullptr) return Status();
    if (!in.active) {  // the first slot of the next message
      ++received_[peer];
      if (sig.shape != kTaggedShape || sig.seq != received_[peer] || sig.count < 0) {
        return base::RemoteError(where() + ": the peer's slot belongs to no tagged message")
            .WithOrigin(peer, where() + ": a slot of no tagged message");
      }
      in = Incoming{};
      in.active = true;
      in.bytes = static_cast<size_t>(sig.count);
      const bool matches = want != nullptr && !want->matched && want->mismatch == nullptr &&
                           (want->peer == kAnySource || want->peer == peer) && want->tag == sig.root;
      if (matches && in.bytes == want->bytes) {
        want->matched = true;
        want->source = peer;
        in.dst = static_cast<char*>(want->buf);
      } else {
        auto m = std::make_unique<Message>();
        m->peer = peer;
        m->tag = sig.root;
        m->number = sig.seq;
        m->bytes = in.bytes;
        m->data.resize(in.bytes);
        in.queued = m.get();
        in.dst = m->data.data();
        if (matches) want->mismatch = m.get();
        queue_.push_back(std::move(m));
      }
    } else if (sig.shape != kTaggedShape || sig.seq != received_[peer] ||
               static_cast<uint64_t>(sig.count) != in.bytes) {
      return base::RemoteError(where() + ": a slot out of order").WithOrigin(peer, where() + ": a malformed slot");
    }
    const size_t want_n = std::min(static_cast<size_t>(geometry_.slot_bytes), in.bytes - in.offset);
    if (n != want_n) {
      return base::RemoteError(where() + ": a slot of " + std::to_string(n) + " bytes where " +
                               std::to_string(want_n) + " were due")
          .WithOrigin(peer, where() + ": a malformed slot");
    }
    if (n > 0) std::memcpy(in.dst + in.offset, slot, n);
    end->Release();
    in.offset += n;
    *moved = true;
    if (in.queued != nullptr) in.queued->arrived = in.offset;
    if (in.offset == in.bytes) {
      if (in.queued == nullptr) want->done = true;
      in.active = false;
    }
  }
}

Status HostTagged::Drain(Want* want, bool* moved) {
  for (int p = 0; p < nranks_; ++p) {
    if (p != rank_) RETURN_IF_ERROR(DrainPair(p, want, moved));
  }
  return Status();
}

Status HostTagged::Idle(int send_peer, int watch, Clock* clock, const transport::WaitContext& wait,
                        const std::function<std::string()>& what) {
  ++clock->idle;
  if (clock->since_ms < 0) clock->since_ms = NowMs();
  if (clock->idle <= wait.spin_count) {
    base::CpuRelax();
    return Status();
  }
  if (clock->idle <= static_cast<int64_t>(wait.spin_count) + wait.yield_count) {
    sched_yield();
    return Status();
  }
  // The send's free slot first, then the pairs a message may come from, as
  // many as one sleep watches (the rest are polled after it).
  std::vector<transport::CounterTarget> targets;
  if (send_peer >= 0) targets.push_back(send_[send_peer]->FreeSlotTarget());
  if (watch >= 0 && watch != rank_ && watch != send_peer) targets.push_back(recv_[watch]->FilledSlotTarget());
  for (int p = 0; p < nranks_ && targets.size() < kMaxSleepTargets; ++p) {
    if (p != rank_ && p != watch) targets.push_back(recv_[p]->FilledSlotTarget());
  }
  if (!targets.empty()) transport::SleepUntilAny(targets.data(), static_cast<int>(targets.size()), kSleepMs);
  if (wait.local_abort != nullptr && wait.local_abort->load(std::memory_order_relaxed)) {
    return base::InvalidUsage("the communicator was aborted");
  }
  // The watched peer's failure or disappearance, as its FIFO's wait reports
  // it (a short wait of its own). Other ranks are not watched: one that
  // finished and left (its connection closed, its FIFO's flag raised) is no
  // fault of a receive from any source.
  transport::WaitContext slice = wait;
  slice.timeout_ms = kSliceMs;
  slice.spin_count = 0;
  slice.yield_count = 0;
  slice.self_wait = nullptr;
  slice.rank_waits = nullptr;
  slice.stall = nullptr;
  slice.coll = send_peer >= 0 ? "ringoSendTagged" : "ringoRecvTagged";
  if (watch >= 0 && watch != rank_) {
    Status st;
    if (watch == send_peer) {
      st = send_[watch]->Acquire(slice, 0).status();
    } else {
      size_t n = 0;
      st = recv_[watch]->Acquire(slice, 0, &n, nullptr).status();
    }
    if (!st.ok() && st.code() != base::Code::kTimeout) return st;
  }
  if (NowMs() - clock->since_ms >= wait.timeout_ms) {
    const std::string msg = "rank " + std::to_string(rank_) + " " + what() + ": no progress for " +
                            std::to_string(wait.timeout_ms) + " ms";
    return watch >= 0 ? base::Timeout(msg).WithOrigin(watch, msg) : base::Timeout(msg);
  }
  return Status();
}

Status HostTagged::Send(const void* buf, size_t bytes, int peer, int32_t tag, const transport::WaitContext& wait) {
  fatal_ = true;  // but for a refusal, a failure leaves the pairs in an unknown state
  if (peer == rank_) {  // into this rank's own queue, as if it had arrived
    auto m = std::make_unique<Message>();
    m->peer = rank_;
    m->tag = tag;
    m->bytes = m->arrived = bytes;
    m->data.assign(static_cast<const char*>(buf), static_cast<const char*>(buf) + bytes);
    queue_.push_back(std::move(m));
    fatal_ = false;
    return Status();
  }
  transport::SendEnd* end = send_[peer].get();
  const uint64_t number = ++sent_[peer];
  const size_t slot_bytes = static_cast<size_t>(geometry_.slot_bytes);
  const int64_t nslots = bytes == 0 ? 1 : static_cast<int64_t>((bytes + slot_bytes - 1) / slot_bytes);
  auto what = [&] {
    return "sending to peer rank " + std::to_string(peer) + " (ringoSendTagged #" + std::to_string(number) +
           ", tag " + std::to_string(tag) + ", " + std::to_string(bytes) + " bytes)";
  };
  size_t offset = 0;
  Clock clock;
  for (int64_t s = 0; s < nslots;) {
    const size_t n = std::min(slot_bytes, bytes - offset);
    void* dst = end->TryAcquire(n);  // a small message goes inline
    if (dst == nullptr) {
      bool moved = false;
      RETURN_IF_ERROR(Drain(nullptr, &moved));  // take in what is sent here meanwhile
      if (moved) {
        clock = Clock();
      } else {
        RETURN_IF_ERROR(Idle(peer, peer, &clock, wait, what));
      }
      continue;
    }
    if (n > 0) std::memcpy(dst, static_cast<const char*>(buf) + offset, n);
    transport::CallSignature sig;
    sig.seq = number;
    sig.count = static_cast<int64_t>(bytes);
    sig.shape = kTaggedShape;
    sig.root = tag;
    end->Post(n, sig);
    offset += n;
    ++s;
    clock = Clock();
  }
  fatal_ = false;
  return Status();
}

Status HostTagged::Recv(void* buf, size_t bytes, int peer, int32_t tag, int* source,
                        const transport::WaitContext& wait) {
  fatal_ = true;
  auto refuse = [&](const Message& m) {
    fatal_ = false;
    return base::InvalidUsage("rank " + std::to_string(rank_) + ": ringoRecvTagged of " + std::to_string(bytes) +
                              " bytes with tag " + std::to_string(tag) + " from " + Source(peer) +
                              " matches a message of " + std::to_string(m.bytes) + " bytes from rank " +
                              std::to_string(m.peer) + ": the sizes must agree (the message stays queued)");
  };
  auto what = [&] {
    return "receiving tag " + std::to_string(tag) + " from " + Source(peer) + " (ringoRecvTagged, " +
           std::to_string(bytes) + " bytes, " + std::to_string(queue_.size()) + " other message(s) queued)";
  };
  // A message seen already goes first.
  auto it = std::find_if(queue_.begin(), queue_.end(), [&](const std::unique_ptr<Message>& m) {
    return (peer == kAnySource || m->peer == peer) && m->tag == tag;
  });
  Clock clock;
  if (it != queue_.end()) {
    Message* m = it->get();
    if (m->bytes != bytes) return refuse(*m);
    while (!m->complete()) {  // its last slots are on their way
      bool moved = false;
      RETURN_IF_ERROR(Drain(nullptr, &moved));
      if (moved) {
        clock = Clock();
      } else {
        RETURN_IF_ERROR(Idle(-1, m->peer, &clock, wait, what));
      }
    }
    if (bytes > 0) std::memcpy(buf, m->data.data(), bytes);
    if (source != nullptr) *source = m->peer;
    queue_.erase(std::find_if(queue_.begin(), queue_.end(),
                              [m](const std::unique_ptr<Message>& q) { return q.get() == m; }));
    fatal_ = false;
    return Status();
  }
  // Nothing can arrive from this rank itself while it waits (calls block):
  // a receive only it could match is refused at once.
  if (peer == rank_ || (peer == kAnySource && nranks_ == 1)) {
    fatal_ = false;
    return base::InvalidUsage("rank " + std::to_string(rank_) + ": ringoRecvTagged of tag " + std::to_string(tag) +
                              " from " + Source(peer) +
                              " has no message to take: a send to oneself must come before its receive");
  }
  Want want;
  want.peer = peer;
  want.tag = tag;
  want.buf = buf;
  want.bytes = bytes;
  while (true) {
    bool moved = false;
    RETURN_IF_ERROR(Drain(&want, &moved));
    if (want.mismatch != nullptr) return refuse(*want.mismatch);
    if (want.done) break;
    if (moved) {
      clock = Clock();
    } else {
      RETURN_IF_ERROR(Idle(-1, want.matched ? want.source : peer, &clock, wait, what));
    }
  }
  if (source != nullptr) *source = want.source;
  fatal_ = false;
  return Status();
}

}  // namespace ringo::collectives
