// The communicator's calls: a collective goes to the first engine that
// takes it, a batch of sends and receives to the point-to-point engine; a
// failure anywhere fails the communicator and tells the peers.
#include "collectives/communicator.h"

#include <cstring>
#include <string>

#include "base/cuda.h"
#include "base/logging.h"
#include "collectives/engines/host_tagged.h"
#include "kernels/coll_signature.h"

namespace ringo::collectives {

using base::Status;
using base::StatusOr;

namespace {

const char* CollName(kernels::Coll c) {
  static const char* const kNames[] = {"AllReduce", "ReduceScatter", "AllGather", "Broadcast", "Reduce"};
  return kNames[static_cast<int>(c)];
}

}  // namespace

Communicator::~Communicator() {
  observer_.reset();  // stops answering control requests about this communicator
  // GPU engines wait for this rank's kernels before their memory goes; host
  // engines stop their threads.
  engines_.clear();
  p2p_.reset();
  tagged_.reset();
  // What this rank posted for its peers on other hosts goes out before the
  // connections close (a collective returns once its slots are posted).
  if (connector_ != nullptr) connector_->Shutdown(!failed_.load() && !abort_.load(), timeout_ms_);
}

transport::WaitContext Communicator::MakeWait(const char* coll) const {
  transport::WaitContext wait = wait_;
  wait.coll = coll;
  wait.seq = sequence_;
  return wait;
}

Status Communicator::CheckUsableSlow() const {
  std::string excluded;
  if (agreement_ != nullptr && agreement_->Excluded(&excluded)) return base::InvalidUsage(excluded);
  if (revoked_.load()) return base::InvalidUsage("the communicator was revoked (ringoCommRevoke): shrink or destroy it");
  if (finalized_) return base::InvalidUsage("the communicator was finalized");
  Status failed = AsyncError();
  if (!failed.ok()) return failed.WithContext("the communicator failed earlier; abort or destroy it");
  if (abort_.load()) return base::InvalidUsage("the communicator was aborted");
  return Status();
}

Status Communicator::Finish(const Status& st, bool fatal) {
  std::string excluded;
  if (!st.ok() && agreement_ != nullptr && agreement_->Excluded(&excluded)) return base::InvalidUsage(excluded);
  if (!st.ok() && fatal) Fail(st);
  if (!failed_.load(std::memory_order_acquire)) return st;
  Status first = AsyncError();  // the first failure of any thread (a ring channel's), in time order
  return first.ok() ? st : first;
}

Status Communicator::WithDiagnosis(Status st, uint64_t seq) const {
  // A failure relayed from the rank where it started carries that rank's
  // diagnosis cut to the fault notice's size: this rank's own goes with it.
  if (st.ok() || observer_ == nullptr) return st;
  const std::string mine = observer_->DiagnosisOf(seq);
  if (mine.empty() || st.message().find(mine) != std::string::npos) return st;
  Status out(st.code(), st.message() + "\n" + mine);
  return st.origin() >= 0 ? out.WithOrigin(st.origin(), st.origin_message(), st.origin_seq()) : out;
}

namespace {

bool Rooted(kernels::Coll c) { return c == kernels::Coll::kBroadcast || c == kernels::Coll::kReduce; }

}  // namespace

void Communicator::SetTraceLabel(const char* label) {
  if (label == nullptr) label = "";
  std::strncpy(label_, label, sizeof(label_) - 1);
  label_[sizeof(label_) - 1] = '\0';
}

Status Communicator::CheckCapture(void* stream) const {
  // A host collective runs inside the call: a graph would hold nothing of it.
  // (The C API asks before it refuses any stream on a host communicator.)
  if (device_ >= 0 || stream == nullptr || !cuda_visible_ || !base::StreamCapturing(stream)) return Status();
  return base::InvalidUsage(
      "the stream is being captured into a CUDA graph, but this is a host-memory communicator, whose "
      "collectives run inside the call and cannot be replayed: capture only GPU communicators' calls");
}

Status Communicator::Run(const kernels::CollArgs& args, void* stream, const OpTrace& trace) {
  std::lock_guard<std::mutex> run_lock(run_mu_);
  RETURN_IF_ERROR(CheckUsable());
  Call call;
  call.args = args;
  call.seq = ++sequence_;
  call.stream = stream;
  call.wait = MakeWait(CollName(args.coll));
  if (check_ && nranks_ > 1) call.sig = kernels::MakeSignature(args, call.seq);
  FlightRecorder& recorder = observer_->recorder();
  TraceEntry* entry = nullptr;
  if (recorder.on()) {
    entry = recorder.Begin(static_cast<TraceOp>(args.coll), call.seq, args.count, Rooted(args.coll) ? args.root : -1,
                           static_cast<uint8_t>(args.dtype), kernels::Reduces(args.coll) ? static_cast<uint8_t>(args.op) : 0,
                           trace.group, trace.called, trace.group == 0 ? trace.called : 0, label_);
  }
  for (const auto& engine : engines_) {
    if (engine->Takes(call)) {
      GpuLaunch gpu;
      Status st = BeginGpuLaunch(entry != nullptr, stream, &gpu);
      if (!st.ok()) {  // refused: the communicator is as it was
        recorder.Finish(entry, TraceState::kFailed);
        --sequence_;
        return st;
      }
      st = engine->Run(call);
      recorder.Finish(entry, !st.ok() ? TraceState::kFailed : gpu.state);
      EndGpuLaunch(gpu, stream, st.ok() && entry != nullptr ? entry->id : 0, 1);
      return WithDiagnosis(Finish(st, call.fatal), call.seq);
    }
  }
  recorder.Finish(entry, TraceState::kFailed);
  return base::Internal("no engine takes this collective");
}

Status Communicator::BeginGpuLaunch(bool recorded, void* stream, GpuLaunch* g) {
  *g = GpuLaunch();
  if (device_ < 0) return Status();  // host: done when the call returns
  if (base::StreamCapturing(stream)) {
    if (gpu_hosts_) {
      return base::InvalidUsage(
          "this GPU communicator spans hosts: its calls cannot be captured into a CUDA graph (the network "
          "proxy moves each slot as a kernel posts it, and a replay would not tell it); call it eagerly");
    }
    g->state = TraceState::kCaptured;  // recorded once, at capture
    return Status();
  }
  g->state = TraceState::kEnqueued;
  GpuTimes* times = observer_->gpu_times();
  if (recorded && times != nullptr) g->slot = times->Before(stream);
  return Status();
}

void Communicator::EndGpuLaunch(const GpuLaunch& g, void* stream, uint64_t first, size_t n) {
  if (g.slot < 0) return;
  if (first != 0) {
    observer_->gpu_times()->After(g.slot, stream, first, n);
  } else {
    observer_->gpu_times()->Cancel(g.slot);  // the launch failed or was refused
  }
}

Status Communicator::RunP2p(const std::vector<P2pOp>& ops, void* stream, const OpTrace& trace) {
  std::lock_guard<std::mutex> run_lock(run_mu_);
  RETURN_IF_ERROR(CheckUsable());
  RETURN_IF_ERROR(PointToPoint::CheckSelf(rank_, ops));  // a call that cannot run leaves the communicator as it was
  P2pCall call;
  call.stream = stream;
  call.wait = MakeWait("point-to-point");
  FlightRecorder& recorder = observer_->recorder();
  // One entry per send and receive (a group of many makes many); the
  // entries of one batch are consecutive.
  uint64_t first = 0;
  if (recorder.on()) {
    const uint64_t started = trace.group == 0 && trace.called != 0 ? trace.called : TraceTicks();
    for (const P2pOp& op : ops) {
      TraceEntry* e = recorder.Begin(op.send ? TraceOp::kSend : TraceOp::kRecv, 0, static_cast<int64_t>(op.bytes),
                                     op.peer, static_cast<uint8_t>(base::DataType::kInt8), 0, trace.group,
                                     trace.called, started, label_);
      if (first == 0) first = e->id;
    }
  }
  GpuLaunch gpu;
  Status st = BeginGpuLaunch(first != 0, stream, &gpu);
  if (!st.ok()) {
    recorder.FinishBatch(first, ops.size(), TraceState::kFailed);
    return st;
  }
  st = p2p_->Run(ops, call);
  recorder.FinishBatch(first, ops.size(), !st.ok() ? TraceState::kFailed : gpu.state);
  EndGpuLaunch(gpu, stream, st.ok() ? first : 0, ops.size());
  return Finish(st, call.fatal);
}

Status Communicator::RunTagged(bool send, void* buf, size_t bytes, int peer, int32_t tag, int* source,
                               const OpTrace& trace) {
  std::lock_guard<std::mutex> run_lock(run_mu_);
  RETURN_IF_ERROR(CheckUsable());
  if (tagged_ == nullptr) {
    return base::InvalidUsage(std::string(send ? "ringoSendTagged" : "ringoRecvTagged") +
                              (device_ >= 0 ? " runs on host communicators only"
                                            : " needs a communicator made with config->tagged_p2p = 1"));
  }
  const transport::WaitContext wait = MakeWait(send ? "ringoSendTagged" : "ringoRecvTagged");
  FlightRecorder& recorder = observer_->recorder();
  TraceEntry* entry = nullptr;
  if (recorder.on()) {
    entry = recorder.Begin(send ? TraceOp::kSend : TraceOp::kRecv, 0, static_cast<int64_t>(bytes), peer,
                           static_cast<uint8_t>(base::DataType::kInt8), 0, trace.group, trace.called,
                           trace.called != 0 ? trace.called : TraceTicks(), label_);
  }
  const Status st = send ? tagged_->Send(buf, bytes, peer, tag, wait)
                         : tagged_->Recv(buf, bytes, peer, tag, source, wait);
  recorder.Finish(entry, st.ok() ? TraceState::kDone : TraceState::kFailed);
  return Finish(st, tagged_->fatal());
}

void Communicator::Fail(const Status& st) {
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!async_error_.ok()) return;
    async_error_ = st;
    failed_.store(true, std::memory_order_release);
  }
  RINGO_LOG(WARN) << "rank " << rank_ << ": " << st.ToString();
  abort_.store(true);  // stops this rank's other waits
  AbortEngines(st);    // tells the peers, and through them every rank, where it started
  DumpTrace(st.code() == base::Code::kTimeout ? "timeout" : "fault");
}

void Communicator::DumpTrace(const char* reason) {
  if (observer_ == nullptr) return;
  const Status st = observer_->Dump(reason);
  if (!st.ok()) RINGO_LOG(WARN) << "rank " << rank_ << ": flight record not written: " << st.message();
}

void Communicator::AbortEngines(const Status& why) {
  if (pages_ != nullptr) pages_->Abort(why, sequence_);
  for (const auto& engine : engines_) engine->Abort(why, sequence_);
  if (p2p_ != nullptr) p2p_->Abort(why, sequence_);
  if (tagged_ != nullptr) tagged_->Abort(why, sequence_);
}

Status Communicator::CheckBuffer(const void* ptr, const char* name) const {
  if (ptr == nullptr) return base::InvalidArgument(std::string(name) + " is NULL");
  if (!cuda_visible_) return Status();  // host memory: no GPU in this process
  const int owner = base::PointerDevice(ptr);
  if (device_ < 0) {
    if (owner < 0) return Status();
    return base::InvalidArgument(std::string(name) + " is GPU memory, but this is a host communicator");
  }
  if (owner == device_) return Status();
  if (owner < 0) {
    return base::InvalidArgument(std::string(name) + " is host memory, but this is a GPU communicator on CUDA device " +
                                 std::to_string(device_) + ": pass memory from cudaMalloc on that device");
  }
  return base::InvalidArgument(std::string(name) + " is memory of CUDA device " + std::to_string(owner) +
                               ", but this communicator runs on CUDA device " + std::to_string(device_));
}

Status Communicator::Finalize() {
  std::lock_guard<std::mutex> run_lock(run_mu_);
  if (finalized_) return base::InvalidUsage("the communicator was already finalized");
  finalized_ = true;  // host collectives finish inside Run(): nothing is pending
  for (const auto& engine : engines_) RETURN_IF_ERROR(engine->Synchronize());  // GPU: the enqueued work
  return AsyncError();
}

void Communicator::Abort() {
  abort_.store(true);
  const std::string why = "rank " + std::to_string(rank_) + "'s communicator was aborted (ringoCommAbort)";
  AbortEngines(base::RemoteError(why).WithOrigin(rank_, why));
  DumpTrace("abort");
  std::lock_guard<std::mutex> run_lock(run_mu_);  // waits for a running collective to return
  for (const auto& engine : engines_) (void)engine->Synchronize();  // GPU kernels see the flag and return
}

Status Communicator::AsyncError() const {
  if (!async_engines_ && !failed_.load(std::memory_order_acquire)) return Status();
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!async_error_.ok()) return async_error_;
  }
  for (const auto& engine : engines_) RETURN_IF_ERROR(engine->AsyncError());
  return Status();
}

}  // namespace ringo::collectives
