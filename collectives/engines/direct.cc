#include "collectives/engines/direct.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "base/logging.h"
#include "kernels/direct_executor.h"
#include "kernels/coll_signature.h"

namespace ringo::collectives {

using base::Status;
using internal::DirectPost;

namespace {

// The most direct-planned calls skipped after a fallback (Direct::skip_).
constexpr int64_t kMaxDirectSkip = 1024;

bool OneProcess(const EngineSetup& setup) {
  const auto& peers = setup.connector->spec().peers;
  return std::all_of(peers.begin(), peers.end(),
                     [&](const transport::PeerInfo& p) { return transport::SameProcess(p, peers[setup.rank]); });
}

}  // namespace

namespace internal {

Status ValidateDirectPost(const kernels::CollArgs& args, int self, int q, int nranks, const DirectPost& p) {
  // This call touches what this rank's arguments say of rank q's buffers;
  // never more than rank q published (a mismatched call that slipped past
  // the signatures, or one made with RINGO_CHECK=0, fails here instead of
  // writing past the end of a peer's buffer).
  const kernels::DirectNeeds reach = kernels::DirectBuffersNeeded(args, q, nranks);
  if (q != self && (static_cast<uint64_t>(reach.send_bytes) > p.send_bytes ||
                    static_cast<uint64_t>(reach.recv_bytes) > p.recv_bytes)) {
    const std::string msg = "rank " + std::to_string(self) + "'s call reaches " + std::to_string(reach.send_bytes) +
                            " + " + std::to_string(reach.recv_bytes) + " bytes of rank " + std::to_string(q) +
                            "'s send and receive buffers, which it published as " + std::to_string(p.send_bytes) +
                            " + " + std::to_string(p.recv_bytes) + ": the ranks did not issue the same collective";
    return base::InvalidUsage(msg).WithOrigin(q, msg);
  }
  auto in_region = [&](const transport::RegionName& r, uint64_t offset, uint64_t bytes) {
    return r.fd < 0 || (offset <= r.bytes && bytes <= r.bytes - offset);
  };
  if (!in_region(p.send_region, p.send_offset, p.send_bytes) || !in_region(p.recv_region, p.recv_offset, p.recv_bytes)) {
    const std::string msg = "rank " + std::to_string(q) + " posted a buffer that extends past its ringoMemAlloc region";
    return base::RemoteError(msg).WithOrigin(q, msg);
  }
  return Status();
}

}  // namespace internal

Direct::Direct(const EngineSetup& setup, std::shared_ptr<BoardState> board, Engine* oneshot, Engine* ring)
    : rank_(setup.rank),
      nranks_(setup.nranks),
      geometry_(setup.host),
      one_process_(OneProcess(setup)),
      board_(std::move(board)),
      pages_(setup.pages),
      oneshot_(oneshot),
      ring_(ring) {
  for (int q = 0; q < nranks_; ++q) {
    words_.push_back(&pages_->words(q)->direct_work);
    cpus_.push_back(&pages_->control(q)->cpu);
  }
}

Engine* Direct::Fallback(const CollPlan& plan) const {
  return plan.fallback == Algorithm::kOneShot && oneshot_ != nullptr ? oneshot_ : ring_;
}

Status Direct::Run(Call& call) {
  call.fatal = true;
  const CollPlan& plan = HostPlan(call, nranks_, geometry_);
  if (skip_ > 0) {
    --skip_;
  } else {
    bool ran = false;
    RETURN_IF_ERROR(Attempt(call, &ran));
    if (ran) {
      backoff_ = 0;
      return Status();
    }
    call.board_posted = true;
    // Some rank's buffers are out of reach (every rank learnt it from the
    // same posts): the plan's fallback, and the next calls skip the attempt
    // (it costs a board exchange: 2 ranks, 32 KiB of heap buffers, 5.4 us
    // against 3.5 us one-shot alone).
    if (geometry_.algorithm == Algorithm::kAuto) {
      backoff_ = std::min(backoff_ == 0 ? 1 : 2 * backoff_, kMaxDirectSkip);
      skip_ = backoff_;
    }
  }
  return Fallback(plan)->Run(call);
}

Status Direct::Attempt(Call& call, bool* ran) {
  *ran = false;
  const kernels::CollArgs& args = call.args;
  const transport::WaitContext& wait = call.wait;
  transport::Board& board = board_->board;
  DirectPost mine{};
  mine.send_addr = reinterpret_cast<uint64_t>(args.send);
  mine.recv_addr = reinterpret_cast<uint64_t>(args.recv);
  mine.pid = static_cast<int32_t>(getpid());
  mine.send_region.fd = mine.recv_region.fd = -1;
  const kernels::DirectNeeds needs = kernels::DirectBuffersNeeded(args, rank_, nranks_);
  mine.send_bytes = static_cast<uint64_t>(needs.send_bytes);
  mine.recv_bytes = static_cast<uint64_t>(needs.recv_bytes);
  if (needs.send_bytes > 0) {
    transport::FindSharedRegion(args.send, static_cast<size_t>(needs.send_bytes), &mine.send_region,
                                &mine.send_offset);
  }
  if (needs.recv_bytes > 0) {
    transport::FindSharedRegion(args.recv, static_cast<size_t>(needs.recv_bytes), &mine.recv_region,
                                &mine.recv_offset);
  }

  // Exchange 1: every rank is inside the collective, and says where its
  // buffers are. Ranks of one process can always read each other's buffers;
  // across processes, every buffer another rank reads or writes must be
  // shared. A rank whose own buffers are not knows the answer (the plan's
  // fallback) and does not wait for the others: when every rank passes heap
  // buffers, nobody waits here.
  auto shared = [&](const DirectPost& p, int q) {
    const kernels::DirectNeeds n = kernels::DirectBuffersNeeded(args, q, nranks_);
    return (n.send_bytes == 0 || p.send_region.fd >= 0) && (n.recv_bytes == 0 || p.recv_region.fd >= 0);
  };
  const bool self_shared = shared(mine, rank_);
  const uint64_t seq = ++board_->seq;
  ASSIGN_OR_RETURN(void* out, board.AcquireWrite(seq, wait));
  std::memcpy(out, &mine, sizeof(mine));
  // The chunks of this rank's part, claimed by any rank once all have posted.
  words_[rank_]->store(kernels::DirectShareWord(args, rank_, nranks_), std::memory_order_relaxed);
  board.Post(seq, call.sig);
  if (!one_process_ && !self_shared) {
    board.Done(seq);
    LogFallback(*call.plan, "this rank's buffers are not from ringoMemAlloc");
    return Status();
  }
  posts_.resize(nranks_);
  int unshared_rank = -1;
  RETURN_IF_ERROR(board.WaitAllPosted(seq, wait));
  for (int q = 0; q < nranks_; ++q) {
    // Every rank that waits compares every signature: they all see the same posts.
    if (call.sig.seq != 0 && board.PostedSignature(q, seq) != call.sig) {
      return kernels::SignatureMismatch(rank_, call.sig, q, board.PostedSignature(q, seq));
    }
    std::memcpy(&posts_[q], board.Posted(q, seq), sizeof(DirectPost));
    if (!shared(posts_[q], q) && unshared_rank < 0) unshared_rank = q;
  }
  board.Done(seq);
  if (!one_process_ && unshared_rank >= 0) {
    LogFallback(*call.plan, "rank " + std::to_string(unshared_rank) + "'s buffers are not from ringoMemAlloc");
    return Status();
  }

  const Status valid = ValidatePosts(args);
  Status mapped = valid.ok() ? MapBuffers(mine.pid) : valid;
  if (!one_process_) {
    // Exchange 2 (across processes): did every rank map every region, and
    // find every post within what its call may touch? If one could not map,
    // all take the fallback; if one found a post its call would reach past,
    // all fail; either way before anyone has written anything.
    const uint64_t check = ++board_->seq;
    ASSIGN_OR_RETURN(void* flag, board.AcquireWrite(check, wait));
    const int32_t state = mapped.ok() ? 1 : valid.ok() ? 0 : -1;
    std::memcpy(flag, &state, sizeof(state));
    board.Post(check);
    int failed_rank = -1;
    int invalid_rank = -1;
    RETURN_IF_ERROR(board.WaitAllPosted(check, wait));
    for (int q = 0; q < nranks_; ++q) {
      int32_t theirs = 0;
      std::memcpy(&theirs, board.Posted(q, check), sizeof(theirs));
      if (theirs != 1 && failed_rank < 0) failed_rank = q;
      if (theirs != 1 && theirs != 0 && invalid_rank < 0) invalid_rank = q;
    }
    board.Done(check);
    RETURN_IF_ERROR(valid);
    if (invalid_rank >= 0) {
      const std::string msg = "rank " + std::to_string(invalid_rank) +
                              " found that its call reaches past the buffers another rank published for this "
                              "direct collective: the ranks did not issue the same collective";
      return base::InvalidUsage(msg).WithOrigin(invalid_rank, msg);
    }
    if (failed_rank >= 0) {
      if (!mapped.ok()) {
        RINGO_LOG(WARN) << "rank " << rank_ << ": cannot map a peer's ringoMemAlloc buffer, collective through the "
                        << Fallback(*call.plan)->name() << ": " << mapped.ToString();
      }
      LogFallback(*call.plan, "rank " + std::to_string(failed_rank) + " cannot map every ringoMemAlloc buffer");
      return Status();
    }
  }
  RETURN_IF_ERROR(mapped);
  kernels::DirectShare share;
  share.words = words_.data();
  share.cpus = cpus_.data();
  share.ordered = geometry_.deterministic;
  RETURN_IF_ERROR(kernels::RunHostDirect(args, rank_, nranks_, sends_.data(), recvs_.data(),
                                         call.plan->stream_output, share));

  // Last exchange: nobody returns (and reuses its buffers) before everyone is done with them.
  const uint64_t done = ++board_->seq;
  RETURN_IF_ERROR(board.AcquireWrite(done, wait).status());
  board.Post(done);
  RETURN_IF_ERROR(board.WaitAllPosted(done, wait));
  board.Done(done);
  *ran = true;
  if (!logged_) {
    logged_ = true;
    RINGO_LOG(INFO) << "rank " << rank_ << ": collective run directly on every rank's buffers ("
                    << (one_process_ ? "ranks in one process" : "ringoMemAlloc regions") << ")";
  }
  return Status();
}

void Direct::LogFallback(const CollPlan& plan, const std::string& why) {
  if (fallback_logged_) return;
  fallback_logged_ = true;
  RINGO_LOG(INFO) << "rank " << rank_ << ": collective through the "
                  << (Fallback(plan) == oneshot_ ? "one-shot board" : "ring") << ": " << why
                  << ", so the ranks cannot read each other's buffers directly"
                  << (geometry_.algorithm == Algorithm::kAuto ? " (the next direct attempts back off)" : "");
}

Status Direct::ValidatePosts(const kernels::CollArgs& args) const {
  for (int q = 0; q < nranks_; ++q) RETURN_IF_ERROR(internal::ValidateDirectPost(args, rank_, q, nranks_, posts_[q]));
  return Status();
}

Status Direct::MapBuffers(int32_t self_pid) {
  sends_.resize(nranks_);
  recvs_.resize(nranks_);
  // Every region of this call stays mapped until the call ends.
  peer_regions_.Reserve(2 * static_cast<size_t>(nranks_));
  for (int q = 0; q < nranks_; ++q) {
    const DirectPost& p = posts_[q];
    if (p.pid == self_pid) {
      sends_[q] = reinterpret_cast<const void*>(p.send_addr);
      recvs_[q] = reinterpret_cast<void*>(p.recv_addr);
      continue;
    }
    // Only the buffers the collective reaches are named (fd >= 0); the others stay null.
    sends_[q] = nullptr;
    recvs_[q] = nullptr;
    if (p.send_region.fd >= 0) {
      auto send = peer_regions_.Map(p.send_region);
      if (!send.ok()) return send.status().WithContext("rank " + std::to_string(q) + "'s sendbuff");
      sends_[q] = *send + p.send_offset;
    }
    if (p.recv_region.fd >= 0) {
      auto recv = peer_regions_.Map(p.recv_region);
      if (!recv.ok()) return recv.status().WithContext("rank " + std::to_string(q) + "'s recvbuff");
      recvs_[q] = *recv + p.recv_offset;
    }
  }
  return Status();
}

}  // namespace ringo::collectives
