#include "collectives/communicator.h"

#include <unistd.h>

#include <cstring>
#include <algorithm>
#include <thread>

#include "base/check.h"
#include "base/cuda.h"
#include "base/device/dtype.h"
#include "kernels/host_direct.h"
#include "kernels/host_oneshot.h"
#include "kernels/host_ring.h"
#include "kernels/signature.h"
#include "base/logging.h"
#include "collectives/device_choice.h"
#include "collectives/internal/direct_post.h"
#include "collectives/internal/gpu_comm.h"
#include "collectives/internal/gpu_p2p.h"
#include "collectives/internal/gpu_placement.h"
#include "collectives/p2p_engine.h"
#include "collectives/ring_choice.h"
#include "transport/cuda/p2p.h"
#include "transport/cuda/p2p_ipc.h"

namespace ringo::collectives {

using base::Status;
using base::StatusOr;

namespace {

// The most direct-planned calls skipped after a fallback (Communicator::direct_skip_).
constexpr int64_t kMaxDirectSkip = 1024;

int64_t TimeoutMs(const base::Config& config, const CommOptions& options) {
  return options.timeout_ms > 0 ? options.timeout_ms : config.timeout_ms;
}

}  // namespace


Communicator::Communicator(int rank, int nranks, const base::Config& config, const CommOptions& options)
    : rank_(rank), nranks_(nranks), config_(config), timeout_ms_(TimeoutMs(config, options)) {}

Communicator::~Communicator() {
  gpu_.reset();  // waits for this rank's kernels before freeing their memory
  gpu_p2p_.reset();
  // What this rank posted for its peers on other hosts goes out before the
  // connections close (a collective returns once its slots are posted).
  const bool drain = !failed_.load() && !abort_.load();
  if (p2p_) p2p_->Shutdown(drain, timeout_ms_);
  if (proxy_) proxy_->Shutdown(drain, timeout_ms_);
  {
    std::lock_guard<std::mutex> lock(job_mu_);
    stop_ = true;
  }
  job_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void Communicator::Start(std::vector<transport::ChannelLinks> links, std::unique_ptr<transport::Board> board,
                         const std::vector<int>& order, int local_ranks) {
  links_ = std::move(links);
  board_ = std::move(board);
  order_ = order;
  for (int p = 0; p < nranks_; ++p) {
    if (order_[p] == rank_) pos_ = p;
  }
  job_status_.assign(geometry_.nchannels, Status());
  if (board_) {
    for (int q = 0; q < nranks_; ++q) direct_words_.push_back(&board_->header(q)->direct_work);
    for (int q = 0; q < nranks_; ++q) direct_cpus_.push_back(&board_->header(q)->cpu);
  }
  for (int c = 1; c < static_cast<int>(links_.size()); ++c) {
    workers_.emplace_back([this, c] { WorkerLoop(c); });
  }
  RINGO_LOG(INFO) << "rank " << rank_ << "/" << nranks_ << " ready: host memory, " << geometry_.nchannels
                  << " channel(s), slot " << geometry_.slot_bytes << " B, spin " << geometry_.spin_count
                  << "/yield " << geometry_.yield_count
                  << ", " << local_ranks << " local rank(s), timeout " << timeout_ms_ << " ms";
}

void Communicator::WorkerLoop(int channel) {
  uint64_t seen = 0;
  while (true) {
    const kernels::CollArgs* args;
    CollPlan plan;
    transport::CallSignature sig;
    {
      std::unique_lock<std::mutex> lock(job_mu_);
      job_cv_.wait(lock, [&] { return stop_ || job_gen_ != seen; });
      if (stop_) return;
      seen = job_gen_;
      if (channel >= job_plan_.nchannels) continue;
      args = job_args_;
      plan = job_plan_;
      sig = job_sig_;
    }
    Status st = RunChannel(channel, *args, plan, sig);
    std::lock_guard<std::mutex> lock(job_mu_);
    job_status_[channel] = st;
    if (--job_pending_ == 0) done_cv_.notify_all();
  }
}

transport::WaitContext Communicator::MakeWait(int channel) const {
  transport::WaitContext wait;
  wait.local_abort = &abort_;
  wait.timeout_ms = timeout_ms_;
  wait.spin_count = geometry_.spin_count;
  wait.yield_count = geometry_.yield_count;
  wait.crowded = geometry_.crowded;
  wait.self_rank = rank_;
  wait.channel = channel;
  wait.coll = coll_name_;
  wait.seq = sequence_;
  wait.nranks = nranks_;
  if (board_) {
    wait.self_wait = board_->self_waits();
    wait.rank_waits = board_->rank_waits();
  }
  return wait;
}

Status Communicator::RunChannel(int channel, const kernels::CollArgs& args, const CollPlan& plan,
                                const transport::CallSignature& sig) {
  const kernels::RingArgs ring =
      kernels::MakeRingArgs(args, rank_, nranks_, pos_, order_.data(), plan.nchannels, plan.slice_bytes);
  kernels::HostStores stores;
  stores.stream_output = plan.stream_output;
  kernels::ChannelEnds ends;
  if (!links_.empty()) {
    ends.recv = links_[channel].recv.get();
    ends.send = links_[channel].send.get();
  }
  ends.wait = MakeWait(channel);
  ends.sig = sig;
  Status st = kernels::RunHostChannel(ring, channel, stores, ends);
  if (!st.ok()) Fail(st);
  return st;
}

void Communicator::Fail(const Status& st) {
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!async_error_.ok()) return;
    async_error_ = st;
    failed_.store(true, std::memory_order_release);
  }
  RINGO_LOG(WARN) << "rank " << rank_ << ": " << st.ToString();
  abort_.store(true);    // stops sibling channels
  AbortTransports(st);  // tells the peers, and through them every rank, where it started
}

void Communicator::AbortTransports(const Status& why) {
  if (gpu_) gpu_->RaiseAbort();
  for (auto& l : links_) {  // both neighbours
    l.recv->Abort(why, rank_, sequence_);
    l.send->Abort(why, rank_, sequence_);
  }
  if (board_) board_->Abort(why, sequence_);
  if (p2p_) p2p_->Abort(why, rank_, sequence_);
}

int Communicator::device() const { return gpu_ ? gpu_->device() : -1; }

Status Communicator::CheckBuffer(const void* ptr, const char* name) const {
  if (ptr == nullptr) return base::InvalidArgument(std::string(name) + " is NULL");
  const int owner = base::PointerDevice(ptr);
  if (!gpu_) {
    if (owner < 0) return Status();
    return base::InvalidArgument(std::string(name) + " is GPU memory, but this is a host communicator");
  }
  if (owner == gpu_->device()) return Status();
  if (owner < 0) {
    return base::InvalidArgument(std::string(name) + " is host memory, but this is a GPU communicator on CUDA device " +
                                 std::to_string(gpu_->device()) + ": pass memory from cudaMalloc on that device");
  }
  return base::InvalidArgument(std::string(name) + " is memory of CUDA device " + std::to_string(owner) +
                               ", but this communicator runs on CUDA device " + std::to_string(gpu_->device()));
}

Status Communicator::RunGpu(const kernels::CollArgs& args, void* stream) {
  if (args.count > 0) {
    const bool is_root = rank_ == args.root;
    if (args.coll != kernels::Coll::kBroadcast || is_root) RETURN_IF_ERROR(CheckBuffer(args.send, "sendbuff"));
    if (args.coll != kernels::Coll::kReduce || is_root) RETURN_IF_ERROR(CheckBuffer(args.recv, "recvbuff"));
  }
  ++sequence_;
  Status st = gpu_->Enqueue(args, stream);
  // A launch that failed after the arguments were accepted leaves the peers
  // waiting for this rank: fail the communicator and tell them.
  if (st.code() == base::Code::kCudaError) Fail(st);
  return st;
}

namespace {

const char* CollName(kernels::Coll c) {
  static const char* const kNames[] = {"AllReduce", "ReduceScatter", "AllGather", "Broadcast", "Reduce"};
  return kNames[static_cast<int>(c)];
}

}  // namespace

Status Communicator::Run(const kernels::CollArgs& args, void* stream) {
  std::lock_guard<std::mutex> run_lock(run_mu_);
  if (finalized_) return base::InvalidUsage("the communicator was finalized");
  Status failed = AsyncError();
  if (!failed.ok()) return failed.WithContext("the communicator failed earlier; abort or destroy it");
  if (abort_.load()) return base::InvalidUsage("the communicator was aborted");
  if (gpu_) return RunGpu(args, stream);
  if (stream != nullptr) return base::InvalidArgument("stream must be NULL on a host communicator");
  kernels::CollArgs resolved = args;
  if (args.op == base::RedOp::kPreMulSum && args.scalar_ptr != nullptr) {
    // ringoScalarDevice on a host communicator: the scalar as it is now.
    resolved.scalar = 0;
    RETURN_IF_ERROR(base::CopyToHost(&resolved.scalar, args.scalar_ptr, base::DataTypeSize(args.dtype))
                        .WithContext("reading the premul-sum scalar"));
    resolved.scalar_ptr = nullptr;
  }
  ++sequence_;
  coll_name_ = CollName(args.coll);
  const transport::CallSignature sig =
      geometry_.check && nranks_ > 1 ? kernels::MakeSignature(resolved, sequence_) : transport::CallSignature();
  Status st = RunHost(resolved, sig);
  if (!st.ok()) Fail(st);
  Status first = AsyncError();  // the first failure of any channel, in time order
  return first.ok() ? st : first;
}

Status Communicator::RunP2p(const std::vector<P2pOp>& ops, void* stream) {
  std::lock_guard<std::mutex> run_lock(run_mu_);
  if (finalized_) return base::InvalidUsage("the communicator was finalized");
  Status failed = AsyncError();
  if (!failed.ok()) return failed.WithContext("the communicator failed earlier; abort or destroy it");
  if (abort_.load()) return base::InvalidUsage("the communicator was aborted");
  if (gpu_) {
    RETURN_IF_ERROR(P2pEngine::CheckSelf(rank_, ops));
    if (gpu_p2p_ == nullptr) return base::Internal("this GPU communicator has no point-to-point engine");
    Status st = gpu_p2p_->Run(ops, stream, *gpu_);
    // A launch that failed after connections were made leaves peers waiting.
    if (st.code() == base::Code::kCudaError) Fail(st);
    return st;
  }
  if (stream != nullptr) return base::InvalidArgument("stream must be NULL on a host communicator");
  if (p2p_ == nullptr) return base::Internal("this communicator has no point-to-point engine");
  RETURN_IF_ERROR(p2p_->Check(ops));  // a call that cannot run leaves the communicator as it was
  coll_name_ = "point-to-point";
  Status st = p2p_->Run(ops, MakeWait(0));
  if (!st.ok()) Fail(st);
  Status first = AsyncError();
  return first.ok() ? st : first;
}

Status Communicator::RunOneShot(const kernels::CollArgs& args, const transport::CallSignature& sig) {
  return kernels::RunHostOneShot(args, rank_, nranks_, *board_, ++board_seq_, MakeWait(0), geometry_.oneshot_ll_bytes,
                                 sig, geometry_.deterministic);
}

Status Communicator::RunHost(const kernels::CollArgs& args, const transport::CallSignature& sig) {
  const CollPlan plan = PlanCollective(args, nranks_, geometry_);
  if (plan.algorithm == Algorithm::kOneShot) return RunOneShot(args, sig);
  bool posted = false;  // this call's signature is on the board already
  if (plan.algorithm == Algorithm::kDirect) {
    if (direct_skip_ > 0) {
      --direct_skip_;
    } else {
      bool ran = false;
      RETURN_IF_ERROR(RunDirect(args, plan, sig, &ran));
      if (ran) {
        direct_backoff_ = 0;
        return Status();
      }
      posted = true;
      // Some rank's buffers are out of reach (every rank learnt it from the
      // same posts): the plan's fallback, and the next calls skip the attempt
      // (it costs a board exchange: 2 ranks, 32 KiB of heap buffers, 5.4 us
      // against 3.5 us one-shot alone). A forced RINGO_ALGO=direct tries every call.
      if (geometry_.algorithm == Algorithm::kAuto) {
        direct_backoff_ = std::min(direct_backoff_ == 0 ? 1 : 2 * direct_backoff_, kMaxDirectSkip);
        direct_skip_ = direct_backoff_;
      }
    }
    if (plan.fallback == Algorithm::kOneShot) return RunOneShot(args, sig);
  }
  // A rank whose call went to the one-shot or the direct path reads the
  // board: it finds this call's signature there instead of waiting for a post.
  if (!posted && sig.seq != 0 && board_) RETURN_IF_ERROR(board_->PostSignatureOnly(++board_seq_, sig, MakeWait(0)));
  if (geometry_.deterministic && nranks_ > 1 && kernels::Reduces(args.coll)) return RunRingOrdered(args, sig);
  return RunRing(args, plan, sig);
}

Status Communicator::RunRing(const kernels::CollArgs& args, const CollPlan& plan, const transport::CallSignature& sig) {
  if (plan.nchannels > 1) {
    std::lock_guard<std::mutex> lock(job_mu_);
    job_args_ = &args;
    job_plan_ = plan;
    job_sig_ = sig;
    job_pending_ = plan.nchannels - 1;
    ++job_gen_;
  }
  if (plan.nchannels > 1) job_cv_.notify_all();
  Status st = RunChannel(0, args, plan, sig);
  if (plan.nchannels > 1) {
    std::unique_lock<std::mutex> lock(job_mu_);
    done_cv_.wait(lock, [&] { return job_pending_ == 0; });
  }
  return st;
}

Status Communicator::RunRingOrdered(const kernels::CollArgs& args, const transport::CallSignature& sig) {
  // The chain in ring order (the ranks in rank order, ChooseRing): a Reduce
  // to the last rank combines rank 0's value with rank 1's, then rank 2's...
  // as reduce_ordered does, and a Broadcast from it hands the result out.
  using kernels::Coll;
  const int last = order_[nranks_ - 1];
  const size_t elem = base::DataTypeSize(args.dtype);
  if (args.coll == Coll::kReduce && args.root == last) return RunRing(args, PlanRingCollective(args, nranks_, geometry_), sig);
  kernels::CollArgs reduce = args;
  reduce.coll = Coll::kReduce;
  reduce.root = last;
  void* result = args.recv;  // where the full result lands on every rank
  const size_t full = static_cast<size_t>(args.count) * elem * (args.coll == Coll::kReduceScatter ? nranks_ : 1);
  if (args.coll == Coll::kReduceScatter || (args.coll == Coll::kReduce && rank_ != args.root)) {
    if (ordered_scratch_.size() < full) ordered_scratch_.resize(full);
    result = ordered_scratch_.data();
  }
  if (args.coll == Coll::kReduceScatter) reduce.count = args.count * nranks_;
  reduce.recv = result;
  RETURN_IF_ERROR(RunRing(reduce, PlanRingCollective(reduce, nranks_, geometry_), sig));
  kernels::CollArgs bcast = reduce;
  bcast.coll = Coll::kBroadcast;
  bcast.send = result;
  RETURN_IF_ERROR(RunRing(bcast, PlanRingCollective(bcast, nranks_, geometry_), sig));
  if (args.coll == Coll::kReduceScatter && args.count > 0) {
    std::memmove(args.recv, static_cast<const char*>(result) + static_cast<size_t>(rank_) * args.count * elem,
                 static_cast<size_t>(args.count) * elem);
  }
  return Status();
}

Status Communicator::Finalize() {
  std::lock_guard<std::mutex> run_lock(run_mu_);
  if (finalized_) return base::InvalidUsage("the communicator was already finalized");
  finalized_ = true;  // host collectives finish inside Run(): nothing is pending
  if (gpu_) RETURN_IF_ERROR(gpu_->Synchronize());  // GPU: wait for the enqueued work
  return AsyncError();
}

void Communicator::Abort() {
  abort_.store(true);
  const std::string why = "rank " + std::to_string(rank_) + "'s communicator was aborted (ringoCommAbort)";
  AbortTransports(base::RemoteError(why).WithOrigin(rank_, why));
  std::lock_guard<std::mutex> run_lock(run_mu_);  // waits for a running collective to return
  if (gpu_) (void)gpu_->Synchronize();             // the kernels see the flag and return
}

Status Communicator::AsyncError() const {
  if (!gpu_ && !failed_.load(std::memory_order_acquire)) return Status();
  std::lock_guard<std::mutex> lock(error_mu_);
  if (!async_error_.ok() || !gpu_) return async_error_;
  return gpu_->KernelError();
}

}  // namespace ringo::collectives
