#include "collectives/engines/doubling.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/device/dtype.h"
#include "base/logging.h"
#include "collectives/engines/doubling_plan.h"
#include "kernels/coll_signature.h"
#include "kernels/internal/host_loops_table.h"
#include "topology/cost_model.h"

namespace ringo::collectives {

using base::DataType;
using base::RedOp;
using base::Status;
using kernels::Coll;

namespace {

constexpr size_t kSigBytes = sizeof(transport::CallSignature);

// Ops whose Pre changes a rank's input (float avg: x / N; premul-sum: x *
// scalar): the input goes through it once, and the partial results are then
// summed. Integer avg divides the sum at the end instead: not taken.
bool Floating(DataType dtype) { return static_cast<int>(dtype) >= static_cast<int>(DataType::kFloat16); }

bool HasPre(DataType dtype, RedOp op) {
  const bool floating = Floating(dtype);
  return (op == RedOp::kAvg && floating) || op == RedOp::kPreMulSum;
}

}  // namespace

Doubling::Doubling(const EngineSetup& setup, PointToPoint* p2p)
    : rank_(setup.rank),
      nranks_(setup.nranks),
      forced_(setup.settings.shared.algorithm == Algorithm::kDoubling),
      enabled_(DoublingRuns(setup.settings.shared)),
      p2p_(p2p) {
  if (setup.connector != nullptr && static_cast<int>(setup.connector->spec().domains.size()) == nranks_) {
    hosts_ = setup.connector->spec().domains;
    std::vector<int> distinct(hosts_);
    std::sort(distinct.begin(), distinct.end());
    const size_t nhosts = static_cast<size_t>(std::unique(distinct.begin(), distinct.end()) - distinct.begin());
    hierarchical_ = nhosts > 1 && nhosts < hosts_.size();
  }
  steps_ = hierarchical_ ? HierarchicalSteps(rank_, hosts_) : DoublingSteps(rank_, nranks_);
  const topology::CostModel model = topology::CostModel::Default();
  alpha_us_ = model.alpha_us[static_cast<int>(topology::PathType::kNet)];
  beta_gbps_ = model.beta_gbps[static_cast<int>(topology::PathType::kNet)];
}

bool Doubling::Takes(Call& call) {
  const kernels::CollArgs& a = call.args;
  if (!enabled_ || nranks_ < 2 || a.count <= 0) return false;
  // A premul-sum whose scalar is behind a pointer (ringoScalarDevice) stays
  // on the ring, which reads it when the collective runs.
  if (a.op == RedOp::kPreMulSum && a.scalar_ptr != nullptr) return false;
  if (a.coll == Coll::kAllGather) {
    const double out = static_cast<double>(a.count) * static_cast<double>(base::DataTypeSize(a.dtype)) * nranks_;
    return out <= static_cast<double>(kMaxBytes) && (forced_ || nranks_ >= 4);
  }
  if (a.coll == Coll::kReduceScatter) {
    if (a.op == RedOp::kAvg && !Floating(a.dtype)) return false;
    const double in = static_cast<double>(a.count) * static_cast<double>(base::DataTypeSize(a.dtype)) * nranks_;
    const int p = 1 << topology::DoublingRounds(nranks_);
    const int steps = topology::DoublingRounds(nranks_) + (p != nranks_ ? 2 : 0);
    return in <= static_cast<double>(kMaxBytes) && (forced_ || steps < nranks_ - 1);
  }
  if (a.coll != Coll::kAllReduce) return false;
  if (a.op == RedOp::kAvg && !Floating(a.dtype)) return false;
  const double bytes = static_cast<double>(a.count) * static_cast<double>(base::DataTypeSize(a.dtype));
  if (bytes > static_cast<double>(kMaxBytes)) return false;
  return forced_ || topology::PrefersDoubling(nranks_, bytes, alpha_us_, beta_gbps_);
}

Status Doubling::Swap(Call& call, int peer, bool send, bool recv, const void* mine, size_t bytes) {
  return Exchange(call, send ? peer : -1, mine, bytes, recv ? peer : -1, bytes);
}

Status Doubling::Exchange(Call& call, int to, const void* mine, size_t send_bytes, int from, size_t recv_bytes) {
  std::vector<P2pOp> ops;
  const bool send = to >= 0, recv = from >= 0;
  const int peer = from;
  if (send) {
    out_.resize(kSigBytes + send_bytes);
    std::memcpy(out_.data(), &call.sig, kSigBytes);
    std::memcpy(out_.data() + kSigBytes, mine, send_bytes);
    ops.push_back({true, to, out_.data(), nullptr, out_.size()});
  }
  if (recv) {
    theirs_.resize(kSigBytes + recv_bytes);
    ops.push_back({false, from, nullptr, theirs_.data(), theirs_.size()});
  }
  P2pCall p2p_call;
  p2p_call.wait = call.wait;
  p2p_call.collective = true;
  call.fatal = true;  // the peer may now wait for this rank
  RETURN_IF_ERROR(p2p_->Run(ops, p2p_call));
  if (recv && call.sig.seq != 0) {
    transport::CallSignature theirs;
    std::memcpy(&theirs, theirs_.data(), kSigBytes);
    if (theirs != call.sig) return kernels::SignatureMismatch(rank_, call.sig, peer, theirs);
  }
  return Status();
}

Status Doubling::Run(Call& call) {
  switch (call.args.coll) {
    case Coll::kAllGather: return RunAllGather(call);
    case Coll::kReduceScatter: return RunReduceScatter(call);
    default: return RunAllReduce(call);
  }
}

Status Doubling::RunReduceScatter(Call& call) {
  const kernels::CollArgs& a = call.args;
  const int n = nranks_;
  const int p = 1 << topology::DoublingRounds(n);
  const int extra = n - p;
  if (!logged_scatter_) {
    logged_scatter_ = true;
    RINGO_LOG(INFO) << "rank " << rank_ << ": reduce-scatters up to " << kMaxBytes / 1024
                    << " KiB across hosts by recursive halving (" << topology::DoublingRounds(n) << " steps"
                    << (extra > 0 ? " and 2 to fold " + std::to_string(extra) + " extra ranks in" : std::string())
                    << (forced_ ? ", every one: RINGO_ALGO=doubling)" : ", where they are fewer than the ring's)");
  }
  const size_t esize = base::DataTypeSize(a.dtype);
  const size_t block = static_cast<size_t>(a.count) * esize;
  const kernels::OpParams params(n, a.scalar);
  // blocks_: this rank's partial sums of every rank's block, its input
  // through Pre where the op has one.
  blocks_.resize(block * static_cast<size_t>(n));
  if (HasPre(a.dtype, a.op)) {
    kernels::internal::GetHostLoops(a.dtype, a.op).send(a.send, blocks_.data(), a.count * n, params, false);
  } else {
    std::memcpy(blocks_.data(), a.send, blocks_.size());
  }
  const RedOp combine_op = HasPre(a.dtype, a.op) ? RedOp::kSum : a.op;
  const kernels::internal::HostLoops& loops = kernels::internal::GetHostLoops(a.dtype, combine_op);
  // Blocks [first, last) arrived from `peer`: combined into blocks_, the
  // lower rank's partial first.
  auto combine = [&](int peer, int first, int last) {
    char* mine = blocks_.data() + block * static_cast<size_t>(first);
    const char* theirs = theirs_.data() + kSigBytes;
    const void* low = peer < rank_ ? static_cast<const void*>(theirs) : mine;
    const void* high = peer < rank_ ? static_cast<const void*>(mine) : theirs;
    loops.reduce_final(low, high, mine, nullptr, a.count * (last - first), params, false, false);
  };
  char* out = static_cast<char*>(a.recv);
  if (rank_ < 2 * extra && rank_ % 2 == 0) {  // hands everything to rank + 1, then takes its block back
    RETURN_IF_ERROR(Exchange(call, rank_ + 1, blocks_.data(), blocks_.size(), -1, 0));
    RETURN_IF_ERROR(Exchange(call, -1, nullptr, 0, rank_ + 1, block));
    std::memcpy(out, theirs_.data() + kSigBytes, block);
    return Status();
  }
  if (rank_ < 2 * extra) {
    RETURN_IF_ERROR(Exchange(call, -1, nullptr, 0, rank_ - 1, blocks_.size()));
    combine(rank_ - 1, 0, n);
  }
  // Virtual rank v holds the blocks of real ranks [First(v), First(v + 1)).
  auto first = [&](int v) { return v < extra ? 2 * v : v + extra; };
  auto real = [&](int v) { return v < extra ? 2 * v + 1 : v + extra; };
  const int vrank = rank_ < 2 * extra ? rank_ / 2 : rank_ - extra;
  int lo = 0, hi = p;
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    const bool lower = vrank < mid;
    const int vpeer = lower ? vrank + (mid - lo) : vrank - (mid - lo);
    const int send_lo = lower ? mid : lo, send_hi = lower ? hi : mid;
    const int keep_lo = lower ? lo : mid, keep_hi = lower ? mid : hi;
    const size_t send_bytes = block * static_cast<size_t>(first(send_hi) - first(send_lo));
    const size_t keep_bytes = block * static_cast<size_t>(first(keep_hi) - first(keep_lo));
    RETURN_IF_ERROR(Exchange(call, real(vpeer), blocks_.data() + block * static_cast<size_t>(first(send_lo)),
                             send_bytes, real(vpeer), keep_bytes));
    combine(real(vpeer), first(keep_lo), first(keep_hi));
    lo = keep_lo;
    hi = keep_hi;
  }
  if (rank_ < 2 * extra) {  // the partner's block back to it
    RETURN_IF_ERROR(Exchange(call, rank_ - 1, blocks_.data() + block * static_cast<size_t>(rank_ - 1), block, -1, 0));
  }
  std::memcpy(out, blocks_.data() + block * static_cast<size_t>(rank_), block);
  return Status();
}

Status Doubling::RunAllGather(Call& call) {
  const kernels::CollArgs& a = call.args;
  const int n = nranks_;
  int steps = 0;
  while ((1 << steps) < n) ++steps;
  if (!logged_gather_) {
    logged_gather_ = true;
    RINGO_LOG(INFO) << "rank " << rank_ << ": all-gathers up to " << kMaxBytes / 1024
                    << " KiB across hosts by Bruck's algorithm (" << steps << " steps"
                    << (forced_ ? ", every one: RINGO_ALGO=doubling)" : ", from 4 ranks up)");
  }
  const size_t block = static_cast<size_t>(a.count) * base::DataTypeSize(a.dtype);
  // blocks_[i]: the block of rank (rank + i) mod n, once received.
  blocks_.resize(block * static_cast<size_t>(n));
  std::memcpy(blocks_.data(), a.send, block);
  for (int k = 0; k < steps; ++k) {
    const int dist = 1 << k;
    const int count = std::min(dist, n - dist);
    const int to = (rank_ - dist + n) % n, from = (rank_ + dist) % n;
    const size_t bytes = block * static_cast<size_t>(count);
    RETURN_IF_ERROR(Exchange(call, to, blocks_.data(), bytes, from, bytes));
    std::memcpy(blocks_.data() + block * static_cast<size_t>(dist), theirs_.data() + kSigBytes, bytes);
  }
  char* out = static_cast<char*>(a.recv);
  for (int i = 0; i < n; ++i) {
    std::memcpy(out + block * static_cast<size_t>((rank_ + i) % n), blocks_.data() + block * static_cast<size_t>(i),
                block);
  }
  return Status();
}

Status Doubling::RunAllReduce(Call& call) {
  const kernels::CollArgs& a = call.args;
  if (!logged_) {
    logged_ = true;
    const int rounds = topology::DoublingRounds(nranks_);
    if (hierarchical_) {
      RINGO_LOG(INFO) << "rank " << rank_ << ": all-reduces up to " << kMaxBytes / 1024
                      << " KiB across hosts by recursive doubling, hierarchical (each host's lowest rank combines"
                      << " its ranks' inputs, the hosts' leaders run the doubling, the leaders send the result back"
                      << (forced_ ? "; every one: RINGO_ALGO=doubling" : "; where the cost model prefers it to the ring")
                      << ")";
    } else {
      RINGO_LOG(INFO) << "rank " << rank_ << ": all-reduces up to " << kMaxBytes / 1024 << " KiB across hosts by recursive doubling ("
                      << rounds << " exchanges" << ((1 << rounds) != nranks_ ? " and 2 to fold " + std::to_string(nranks_ - (1 << rounds)) + " extra ranks in" : std::string())
                      << (forced_ ? ", every one: RINGO_ALGO=doubling" : ", where the cost model prefers it to the ring") << ")";
    }
  }
  const size_t bytes = static_cast<size_t>(a.count) * base::DataTypeSize(a.dtype);
  char* acc = static_cast<char*>(a.recv);
  const kernels::OpParams params(nranks_, a.scalar);
  // This rank's contribution, through Pre where the op has one.
  if (HasPre(a.dtype, a.op)) {
    kernels::internal::GetHostLoops(a.dtype, a.op).send(a.send, acc, a.count, params, false);
  } else if (a.send != a.recv) {
    std::memcpy(acc, a.send, bytes);
  }
  const RedOp combine_op = HasPre(a.dtype, a.op) ? RedOp::kSum : a.op;
  const kernels::internal::HostLoops& loops = kernels::internal::GetHostLoops(a.dtype, combine_op);
  // acc = (lower rank's partial) (+) (higher rank's): the same expression, so
  // the same bits, on both ranks of a pair.
  auto combine = [&](int peer) {
    const char* theirs = theirs_.data() + kSigBytes;
    const void* low = peer < rank_ ? static_cast<const void*>(theirs) : acc;
    const void* high = peer < rank_ ? static_cast<const void*>(acc) : theirs;
    loops.reduce_final(low, high, acc, nullptr, a.count, params, false, false);
  };

  for (const DoublingStep& step : steps_) {
    RETURN_IF_ERROR(Swap(call, step.peer, step.send, step.recv, acc, bytes));
    if (step.combine) combine(step.peer);
    if (step.take) std::memcpy(acc, theirs_.data() + kSigBytes, bytes);
  }
  return Status();
}

}  // namespace ringo::collectives
