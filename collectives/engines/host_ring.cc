#include "collectives/engines/host_ring.h"

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
  const kernels::RingArgs ring =
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
  Status st = kernels::RunHostChannel(ring, channel, stores, ends);
  if (!st.ok()) on_fault_(st);  // the sibling channels and the peers stop at once
  return st;
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
  if (args.op == base::RedOp::kPreMulSum && args.scalar_ptr != nullptr) {
    // ringoScalarDevice on a host communicator: the scalar as it is now.
    args.scalar = 0;
    RETURN_IF_ERROR(base::CopyToHost(&args.scalar, args.scalar_ptr, base::DataTypeSize(args.dtype))
                        .WithContext("reading the premul-sum scalar"));
    args.scalar_ptr = nullptr;
  }
  const bool parallel = plan.nchannels > 1;
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
  }
  return st;
}

void HostRing::Abort(const Status& why, uint64_t seq) {
  for (Channel& c : channels_) {  // both neighbours
    c.recv->Abort(why, rank_, seq);
    c.send->Abort(why, rank_, seq);
  }
  if (board_ != nullptr) board_->board.WakeAll();
}

}  // namespace ringo::collectives
