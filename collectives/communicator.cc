// The communicator's calls: a collective goes to the first engine that
// takes it, a batch of sends and receives to the point-to-point engine; a
// failure anywhere fails the communicator and tells the peers.
#include "collectives/communicator.h"

#include <cstring>
#include <string>

#include "base/logging.h"
#include "kernels/coll_signature.h"
#include "collectives/engines/wire.h"
#include "kernels/wire.h"

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
  engines_.ReleaseEngines();
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

Status Communicator::CheckCapture(void* stream) const { return engines_.residence->CheckCapture(stream); }

Status Communicator::SetWire(int wire) {
  if (!kernels::ValidWire(wire)) {
    return base::InvalidArgument("wire " + std::to_string(wire) + " is not a ringoWire_t (0 to 4)");
  }
  if (kind() == DeviceKind::kCuda && wire != 0 && engines_.Find("wire") == nullptr) {
    return base::InvalidUsage(
        "GPU communicators do not compress unless RINGO_GPU_WIRE=1 (not yet verified on a GPU) and their ranks span "
        "hosts");
  }
  wire_.store(wire, std::memory_order_relaxed);
  return Status();
}

Status Communicator::WireRound(const kernels::CollArgs& args, void* out) {
  std::lock_guard<std::mutex> run_lock(run_mu_);
  RETURN_IF_ERROR(CheckUsable());
  const size_t elems = static_cast<size_t>(args.count) * (args.coll == kernels::Coll::kReduceScatter ? nranks_ : 1);
  const size_t bytes = elems * base::DataTypeSize(args.dtype);
  // What the all-reduce would send: nothing rounded where the wire engine
  // would not take it (no wire, no network, a small fp32 all-reduce left to
  // recursive doubling).
  Engine* engine = engines_.Find("wire");
  Call probe;
  probe.args = args;
  probe.wire = wire();
  if (engine == nullptr || connector_ == nullptr || probe.wire == 0 || !engine->Takes(probe)) {
    if (out != args.send && bytes > 0) std::memmove(out, args.send, bytes);
    return Status();
  }
  WireRoundContribution(args, wire(), rank_, nranks_, connector_->spec().net, out);
  return Status();
}

namespace {

// How `engine` runs `call`, for the hang diagnosis: its name, and for the
// wire engine the wire format (static strings).
const char* EngineLabel(const Engine& engine, const Call& call) {
  static const char* const kWires[] = {"wire none", "wire bf16", "wire fp16", "wire e4m3", "wire e5m2"};
  if (std::strcmp(engine.name(), "wire") == 0 && call.wire >= 0 && call.wire < 5) return kWires[call.wire];
  return engine.name();
}

}  // namespace

Status Communicator::Run(const kernels::CollArgs& args, void* stream, const OpTrace& trace) {
  std::lock_guard<std::mutex> run_lock(run_mu_);
  RETURN_IF_ERROR(CheckUsable());
  Call call;
  call.args = args;
  call.seq = ++sequence_;
  call.stream = stream;
  call.wait = MakeWait(CollName(args.coll));
  call.wire = wire_.load(std::memory_order_relaxed);
  if (check_ && nranks_ > 1) call.sig = kernels::MakeSignature(args, call.seq);
  FlightRecorder& recorder = observer_->recorder();
  TraceEntry* entry = nullptr;
  if (recorder.on()) {
    entry = recorder.Begin(static_cast<TraceOp>(args.coll), call.seq, args.count, Rooted(args.coll) ? args.root : -1,
                           static_cast<uint8_t>(args.dtype), kernels::Reduces(args.coll) ? static_cast<uint8_t>(args.op) : 0,
                           trace.group, trace.called, trace.group == 0 ? trace.called : 0, label_);
  }
  Residence& where = *engines_.residence;
  GpuTimes* times = observer_->gpu_times();
  for (const auto& engine : engines_.engines) {
    if (engine->Takes(call)) {
      Residence::Launch launch;
      Status st = where.BeginLaunch(times, entry != nullptr, stream, &launch);
      if (!st.ok()) {  // refused: the communicator is as it was
        recorder.Finish(entry, TraceState::kFailed);
        --sequence_;
        return st;
      }
      call.capturing = launch.capturing;
      call.capture_id = launch.capture_id;
      observer_->Running(EngineLabel(*engine, call));
      st = engine->Run(call);
      observer_->Running("");
      recorder.Finish(entry, !st.ok() ? TraceState::kFailed : launch.state);
      where.EndLaunch(times, launch, stream, st.ok() && entry != nullptr ? entry->id : 0, 1);
      return WithDiagnosis(Finish(st, call.fatal), call.seq);
    }
  }
  recorder.Finish(entry, TraceState::kFailed);
  return base::Internal("no engine takes this collective");
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
  Residence& where = *engines_.residence;
  GpuTimes* times = observer_->gpu_times();
  Residence::Launch launch;
  Status st = where.BeginLaunch(times, first != 0, stream, &launch);
  if (!st.ok()) {
    recorder.FinishBatch(first, ops.size(), TraceState::kFailed);
    return st;
  }
  call.capturing = launch.capturing;
  call.capture_id = launch.capture_id;
  st = engines_.p2p->Run(ops, call);
  recorder.FinishBatch(first, ops.size(), !st.ok() ? TraceState::kFailed : launch.state);
  where.EndLaunch(times, launch, stream, st.ok() ? first : 0, ops.size());
  return Finish(st, call.fatal);
}

Status Communicator::RunTagged(bool send, void* buf, size_t bytes, int peer, int32_t tag, int* source,
                               const OpTrace& trace) {
  std::lock_guard<std::mutex> run_lock(run_mu_);
  RETURN_IF_ERROR(CheckUsable());
  RETURN_IF_ERROR(CheckTagged(send));
  HostTagged& tagged = *engines_.tagged;
  const transport::WaitContext wait = MakeWait(send ? "ringoSendTagged" : "ringoRecvTagged");
  FlightRecorder& recorder = observer_->recorder();
  TraceEntry* entry = nullptr;
  if (recorder.on()) {
    entry = recorder.Begin(send ? TraceOp::kSend : TraceOp::kRecv, 0, static_cast<int64_t>(bytes), peer,
                           static_cast<uint8_t>(base::DataType::kInt8), 0, trace.group, trace.called,
                           trace.called != 0 ? trace.called : TraceTicks(), label_);
  }
  const Status st = send ? tagged.Send(buf, bytes, peer, tag, wait) : tagged.Recv(buf, bytes, peer, tag, source, wait);
  recorder.Finish(entry, st.ok() ? TraceState::kDone : TraceState::kFailed);
  return Finish(st, tagged.fatal());
}

Status Communicator::CheckTagged(bool send) const {
  if (engines_.tagged != nullptr) return Status();
  return base::InvalidUsage(std::string(send ? "ringoSendTagged" : "ringoRecvTagged") + engines_.tagged_refusal);
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
  engines_.Abort(st, sequence_);  // tells the peers, and through them every rank, where it started
  DumpTrace(st.code() == base::Code::kTimeout ? "timeout" : "fault");
}

void Communicator::DumpTrace(const char* reason) {
  if (observer_ == nullptr) return;
  const Status st = observer_->Dump(reason);
  if (!st.ok()) RINGO_LOG(WARN) << "rank " << rank_ << ": flight record not written: " << st.message();
}

Status Communicator::CheckBuffer(const void* ptr, const char* name) const {
  return engines_.residence->CheckBuffer(ptr, name);
}

Status Communicator::Finalize() {
  std::lock_guard<std::mutex> run_lock(run_mu_);
  if (finalized_) return base::InvalidUsage("the communicator was already finalized");
  finalized_ = true;  // host collectives finish inside Run(): nothing is pending
  for (const auto& engine : engines_.engines) RETURN_IF_ERROR(engine->Synchronize());  // GPU: the enqueued work
  return AsyncError();
}

void Communicator::Abort() {
  abort_.store(true);
  const std::string why = "rank " + std::to_string(rank_) + "'s communicator was aborted (ringoCommAbort)";
  engines_.Abort(base::RemoteError(why).WithOrigin(rank_, why), sequence_);
  DumpTrace("abort");
  std::lock_guard<std::mutex> run_lock(run_mu_);  // waits for a running collective to return
  for (const auto& engine : engines_.engines) (void)engine->Synchronize();  // GPU kernels see the flag and return
}

Status Communicator::AsyncError() const {
  if (!async_engines_ && !failed_.load(std::memory_order_acquire)) return Status();
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!async_error_.ok()) return async_error_;
  }
  for (const auto& engine : engines_.engines) RETURN_IF_ERROR(engine->AsyncError());
  return Status();
}

}  // namespace ringo::collectives
