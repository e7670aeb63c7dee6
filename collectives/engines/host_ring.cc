#include "collectives/engines/host_ring.h"

#include <algorithm>
#include <climits>
#include <string>

#include "base/cuda.h"
#include "base/device/dtype.h"
#include "base/logging.h"

namespace ringo::collectives {

using base::Status;
using base::StatusOr;

HostRing::HostRing(const EngineSetup& setup, std::shared_ptr<BoardState> board)
    : rank_(setup.rank),
      nranks_(setup.nranks),
      pos_(setup.pos),
      order_(setup.ring.order),
      geometry_(setup.host),
      board_(std::move(board)),
      on_fault_(setup.on_fault) {}

StatusOr<std::unique_ptr<HostRing>> HostRing::Connect(const EngineSetup& setup, std::shared_ptr<BoardState> board) {
  std::unique_ptr<HostRing> ring(new HostRing(setup, std::move(board)));
  const int n = setup.nranks;
  const int nch = setup.host.nchannels;
  if (n > 1) {
    const int prev = setup.ring.order[(setup.pos + n - 1) % n];
    const int next = setup.ring.order[(setup.pos + 1) % n];
    std::vector<transport::PairKey> sends, recvs;
    for (int c = 0; c < nch; ++c) {
      sends.push_back({next, c});
      recvs.push_back({prev, c});
    }
    transport::FifoGeometry geometry;
    geometry.slot_bytes = static_cast<uint64_t>(setup.host.slot_bytes);
    ASSIGN_OR_RETURN(std::vector<transport::FifoLink> links,
                     setup.connector->Connect(sends, recvs, geometry, /*gpu=*/false, setup.abort));
    ring->channels_.resize(nch);
    for (int c = 0; c < nch; ++c) {
      ring->channels_[c].send = transport::MakeSendEnd(links[c], setup.rank);
      ring->channels_[c].recv = transport::MakeRecvEnd(links[nch + c], setup.rank);
    }
    RINGO_LOG(INFO) << "rank " << setup.rank << ": ring connected, prev " << prev << " ("
                    << transport::MediumName(links[nch].medium) << ") next " << next << " ("
                    << transport::MediumName(links[0].medium) << "), " << nch << " channel(s) of "
                    << transport::kSlots << " x " << setup.host.slot_bytes << " B";
  }
  if (setup.host.balance && nch > 1 && !setup.host.deterministic) {
    ring->balance_ = std::make_unique<ChannelBalance>(nch);
    RINGO_LOG(INFO) << "rank " << setup.rank << ": " << nch << " ring channels over " << setup.host.net_devices
                    << " network device(s), each collective split in proportion to their measured rates";
  }
  ring->job_status_.assign(nch, Status());
  for (int c = 1; c < static_cast<int>(ring->channels_.size()); ++c) {
    ring->workers_.emplace_back([r = ring.get(), c] { r->WorkerLoop(c); });
  }
  return ring;
}

HostRing::~HostRing() {
  {
    std::lock_guard<std::mutex> lock(job_mu_);
    stop_ = true;
  }
  job_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void HostRing::WorkerLoop(int channel) {
  uint64_t seen = 0;
  while (true) {
    const kernels::CollArgs* args;
    const CollPlan* plan;
    const Call* call;
    {
      std::unique_lock<std::mutex> lock(job_mu_);
      job_cv_.wait(lock, [&] { return stop_ || job_gen_ != seen; });
      if (stop_) return;
      seen = job_gen_;
      if (channel >= job_plan_->nchannels) continue;
      args = job_args_;
      plan = job_plan_;
      call = job_call_;
    }
    Status st = RunChannel(channel, *args, *plan, *call);
    std::lock_guard<std::mutex> lock(job_mu_);
    job_status_[channel] = st;
    if (--job_pending_ == 0) done_cv_.notify_all();
  }
}

Status HostRing::RunChannel(int channel, const kernels::CollArgs& args, const CollPlan& plan, const Call& call) {
  kernels::RingArgs ring =
      kernels::MakeRingArgs(args, rank_, nranks_, pos_, order_.data(), plan.nchannels, plan.slice_bytes);
  kernels::HostStores stores;
  stores.stream_output = plan.stream_output;
  kernels::ChannelEnds ends;
  if (!channels_.empty()) {
    ends.recv = channels_[channel].recv.get();
    ends.send = channels_[channel].send.get();
  }
  ends.wait = call.wait;
  ends.wait.channel = channel;
  ends.sig = call.sig;
  ring.split = call_split_;
  Status st = kernels::RunHostChannel(ring, channel, stores, ends);
  if (!st.ok()) on_fault_(st);  // the sibling channels and the peers stop at once
  if (st.ok() && call_measured_) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - call_start_).count();
    balance_->Record(channel, ChannelBytes(ring, channel), seconds);
  }
  return st;
}

// The bytes channel `channel` of `ring` moves through each of its steps.
int64_t HostRing::ChannelBytes(const kernels::RingArgs& ring, int channel) {
  const kernels::RingArgs loop = kernels::LoopArgs(ring);
  const int64_t esize = static_cast<int64_t>(base::DataTypeSize(loop.call.dtype));
  const kernels::Range r = kernels::RingChannelRange(loop, channel, kernels::ChunkAlignElems(esize));
  return (r.hi - r.lo) * esize;
}

Status HostRing::PostSignature(Call& call) {
  call.fatal = true;
  // A rank whose call went to the one-shot or the direct path reads the
  // board: it finds this call's signature there instead of waiting for a post.
  if (board_ == nullptr || call.board_posted || call.sig.seq == 0) return Status();
  call.board_posted = true;
  return board_->board.PostSignatureOnly(++board_->seq, call.sig, call.wait);
}

Status HostRing::Run(Call& call) {
  RETURN_IF_ERROR(PostSignature(call));
  return RunPlanned(call.args, PlanRingCollective(call.args, nranks_, geometry_), call);
}

Status HostRing::RunPlanned(const kernels::CollArgs& given, const CollPlan& plan, Call& call) {
  call.fatal = true;
  kernels::CollArgs args = given;
  RETURN_IF_ERROR(ReadScalarNow(&args));
  const bool parallel = plan.nchannels > 1;
  // Calls over every channel whose channels each move enough to time a rate
  // (in equal parts) take the balanced split and measure it; smaller ones
  // keep equal parts. Decided from the call alone, so every rank decides alike.
  int64_t total = 0;
  call_measured_ = false;
  if (balance_ != nullptr && plan.nchannels == balance_->nchannels()) {
    const kernels::RingArgs even =
        kernels::MakeRingArgs(args, rank_, nranks_, pos_, order_.data(), plan.nchannels, plan.slice_bytes);
    int64_t least = INT64_MAX;
    for (int c = 0; c < plan.nchannels; ++c) {
      least = std::min(least, ChannelBytes(even, c));
      total += ChannelBytes(even, c);
    }
    call_measured_ = least >= ChannelBalance::kMinChannelBytes;
  }
  call_split_ = call_measured_ ? balance_->split() : nullptr;
  call_start_ = std::chrono::steady_clock::now();
  if (parallel) {
    {
      std::lock_guard<std::mutex> lock(job_mu_);
      job_args_ = &args;
      job_plan_ = &plan;
      job_call_ = &call;
      job_pending_ = plan.nchannels - 1;
      ++job_gen_;
    }
    job_cv_.notify_all();
  }
  Status st = RunChannel(0, args, plan, call);
  if (parallel) {
    std::unique_lock<std::mutex> lock(job_mu_);
    done_cv_.wait(lock, [&] { return job_pending_ == 0; });
    for (int c = 1; c < plan.nchannels; ++c) call_measured_ = call_measured_ && job_status_[c].ok();
  }
  if (st.ok() && call_measured_) {
    call_measured_ = false;
    call_split_ = nullptr;
    st = Rebalance(total, call);
  }
  call_split_ = nullptr;
  call_measured_ = false;
  return st;
}

Status HostRing::Rebalance(int64_t bytes, Call& call) {
  if (!balance_->CallDone(bytes)) return Status();
  // Every rank's seconds per channel, summed on the ring (channel 0, one
  // slot's worth), in this call: its signature is the call's.
  std::vector<double> seconds = balance_->Seconds();
  kernels::CollArgs pool;
  pool.coll = kernels::Coll::kAllReduce;
  pool.dtype = base::DataType::kFloat64;
  pool.op = base::RedOp::kSum;
  pool.send = seconds.data();
  pool.recv = seconds.data();
  pool.count = static_cast<int64_t>(seconds.size());
  CollPlan plan;
  plan.nchannels = 1;
  plan.slice_bytes = std::min<int64_t>(geometry_.slot_bytes, 4096);
  RETURN_IF_ERROR(RunPlanned(pool, plan, call).WithContext("pooling the channels' measured rates"));
  balance_->Adopt(seconds, nranks_);
  const uint32_t first = balance_->split()[1];
  const uint32_t moved = first > logged_first_part_ ? first - logged_first_part_ : logged_first_part_ - first;
  if (rank_ == 0 && (balance_->adoptions() == 1 || moved >= ChannelBalance::kTotal / 16)) {
    logged_first_part_ = first;
    RINGO_LOG(INFO) << "rank 0: ring channels' split " << balance_->Describe();
  }
  return Status();
}

void HostRing::Abort(const Status& why, uint64_t seq) {
  for (Channel& c : channels_) {  // both neighbours
    c.recv->Abort(why, rank_, seq);
    c.send->Abort(why, rank_, seq);
  }
  if (board_ != nullptr) board_->board.WakeAll();
}

}  // namespace ringo::collectives
