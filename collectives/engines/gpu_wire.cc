#include "collectives/engines/gpu_wire.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "base/cuda.h"
#include "base/device/dtype.h"
#include "base/logging.h"
#include "collectives/engines/wire.h"
#include "kernels/cuda/launch.h"

namespace ringo::collectives {

using base::DataType;
using base::RedOp;
using base::Status;
using kernels::Wire;

namespace {

// Steps of one exchange per point-to-point call: each step adds a send lane
// and a receive lane, within the GPU kernel's kMaxP2pLanes.
constexpr int kStepsPerBatch = kernels::gpu::kMaxP2pLanes / 2;

// The kernels, enqueued on the call's stream.
class GpuStages : public WireStages {
 public:
  GpuStages(std::shared_ptr<GpuRank> gpu, base::DeviceCopy scratch)
      : gpu_(std::move(gpu)), scratch_(std::move(scratch)) {}
  void SetSources(base::DeviceCopy sources) { sources_ = std::move(sources); }

  uint8_t* scratch() const override { return static_cast<uint8_t*>(scratch_.get()); }
  const kernels::WireSource* sources() const override {
    return static_cast<const kernels::WireSource*>(sources_.get());
  }
  Status Encode(Call& call, Wire w, DataType dtype, const void* src, int64_t n, float scale, uint8_t* out) override {
    return Enqueue(call, [&] { return kernels::gpu::LaunchWireEncode(w, dtype, src, n, scale, out, call.stream); });
  }
  Status Sum(Call& call, int nsources, Wire w, int64_t n, float* acc) override {
    return Enqueue(call, [&] { return kernels::gpu::LaunchWireSum(sources(), nsources, w, n, acc, call.stream); });
  }
  Status Decode(Call& call, Wire w, const uint8_t* in, int64_t n, DataType dtype, void* dst) override {
    return Enqueue(call, [&] { return kernels::gpu::LaunchWireDecode(w, in, n, dtype, dst, call.stream); });
  }

 private:
  // Once something is enqueued the peers may wait for this rank: a failure
  // from then on fails the communicator (a stream refused before it does not).
  Status Enqueue(Call& call, const std::function<Status()>& launch) {
    Status st = gpu_->Enqueue(call.stream, call.capturing, call.capture_id, launch);
    if (st.ok()) call.fatal = true;
    return st;
  }
  std::shared_ptr<GpuRank> gpu_;
  base::DeviceCopy scratch_;
  base::DeviceCopy sources_;
};

// The same units in loops, on host memory, at once.
class HostStages : public WireStages {
 public:
  explicit HostStages(int64_t bytes) : scratch_(static_cast<size_t>(bytes), 0) {}
  void SetSources(std::vector<kernels::WireSource> sources) { sources_ = std::move(sources); }

  uint8_t* scratch() const override { return const_cast<uint8_t*>(scratch_.data()); }
  const kernels::WireSource* sources() const override { return sources_.data(); }
  Status Encode(Call& call, Wire w, DataType dtype, const void* src, int64_t n, float scale, uint8_t* out) override {
    call.fatal = true;
    const int64_t units = kernels::WireEncodeUnits(w, n);
    for (int64_t u = 0; u < units; ++u) kernels::WireEncodeUnit(w, dtype, src, n, scale, out, u);
    return Status();
  }
  Status Sum(Call& call, int nsources, Wire w, int64_t n, float* acc) override {
    call.fatal = true;
    for (int64_t i = 0; i < n; ++i) acc[i] = kernels::WireSumAt(sources_.data(), nsources, w, i);
    return Status();
  }
  Status Decode(Call& call, Wire w, const uint8_t* in, int64_t n, DataType dtype, void* dst) override {
    call.fatal = true;
    for (int64_t i = 0; i < n; ++i) kernels::WireStore(dtype, dst, i, kernels::WireDecodeAt(w, in, i));
    return Status();
  }

 private:
  std::vector<uint8_t> scratch_;
  std::vector<kernels::WireSource> sources_;
};

}  // namespace

GpuWire::GpuWire(const EngineSetup& setup, PointToPoint* p2p, bool on_gpu)
    : rank_(setup.rank),
      nranks_(setup.nranks),
      on_gpu_(on_gpu),
      shared_(setup.settings.shared),
      p2p_(p2p),
      net_(static_cast<size_t>(setup.nranks), 0),
      piece_(WireEngine::PieceElems(setup.nranks)) {
  const std::vector<bool>& net = setup.connector->spec().net;
  for (int r = 0; r < nranks_ && r < static_cast<int>(net.size()); ++r) net_[r] = net[r] ? 1 : 0;
  slot_bytes_ = (4 * piece_ + 255) / 256 * 256;
}

std::vector<kernels::WireSource> GpuWire::SourcesAt(uint8_t* scratch) const {
  std::vector<kernels::WireSource> sources(static_cast<size_t>(nranks_));
  for (int r = 0; r < nranks_; ++r) {
    sources[r].bytes = scratch + (nranks_ + r) * slot_bytes_;  // In(r)
    sources[r].wired = r != rank_ && net_[r] != 0 ? 1 : 0;
    sources[r].reserved = 0;
  }
  return sources;
}

base::StatusOr<std::unique_ptr<GpuWire>> GpuWire::Make(const EngineSetup& setup, std::shared_ptr<GpuRank> gpu,
                                                        PointToPoint* p2p) {
  RETURN_IF_ERROR(kernels::gpu::LoadWireKernels(setup.device));
  std::unique_ptr<GpuWire> w(new GpuWire(setup, p2p, true));
  const std::vector<uint8_t> zeros(static_cast<size_t>(w->ScratchBytes()), 0);
  ASSIGN_OR_RETURN(base::DeviceCopy scratch, base::DeviceCopy::Of(setup.device, zeros.data(), zeros.size()));
  const std::vector<kernels::WireSource> sources = w->SourcesAt(static_cast<uint8_t*>(scratch.get()));
  ASSIGN_OR_RETURN(base::DeviceCopy table, base::DeviceCopy::Of(setup.device, sources.data(),
                                                                 sources.size() * sizeof(kernels::WireSource)));
  auto stages = std::make_unique<GpuStages>(std::move(gpu), std::move(scratch));
  stages->SetSources(std::move(table));
  w->stages_ = std::move(stages);
  return w;
}

std::unique_ptr<GpuWire> GpuWire::MakeOnHost(const EngineSetup& setup, PointToPoint* p2p) {
  std::unique_ptr<GpuWire> w(new GpuWire(setup, p2p, false));
  auto stages = std::make_unique<HostStages>(w->ScratchBytes());
  stages->SetSources(w->SourcesAt(stages->scratch()));
  w->stages_ = std::move(stages);
  return w;
}

// On a GPU, premul-sum (whose scalar may live in device memory) stays on the
// ring, exact; on the host the scalar is read first, and the small fp32
// all-reduces go to recursive doubling, as with the host engine.
bool GpuWire::Takes(Call& call) {
  if (nranks_ < 2 || call.wire == 0 || !WireApplies(call.args)) return false;
  if (on_gpu_) return call.args.op != RedOp::kPreMulSum;
  return !WireLeavesToDoubling(call.args, call.wire, nranks_, shared_);
}

void GpuWire::LogOnce(int wire) {
  if (logged_) return;
  logged_ = true;
  RINGO_LOG(INFO) << "rank " << rank_ << ": wire " << kernels::WireName(static_cast<Wire>(wire))
                  << (on_gpu_ ? " on the GPU (RINGO_GPU_WIRE=1; not yet verified on a GPU)"
                              : " by the staged schedule (RINGO_WIRE_ENGINE=staged)")
                  << ": " << WireEdgesSaid(rank_, net_, static_cast<Wire>(wire));
}

Status GpuWire::Run(Call& call) {
  kernels::CollArgs a = call.args;
  const Wire wire = static_cast<Wire>(call.wire);
  LogOnce(call.wire);
  RETURN_IF_ERROR(ReadScalarNow(&a));  // a premul-sum reaches the host stages only (Takes)
  const size_t esize = base::DataTypeSize(a.dtype);
  if (on_gpu_ && (reinterpret_cast<uintptr_t>(a.send) % esize != 0 || reinterpret_cast<uintptr_t>(a.recv) % esize != 0)) {
    // As the ring refuses them, before anything is enqueued (the kernels'
    // typed loads would fault the context).
    return base::InvalidArgument("buffers must be aligned to the datatype's size (" + std::to_string(esize) + " bytes)");
  }
  const float scale = WireInputScale(a, nranks_);
  const bool all_reduce = a.coll == kernels::Coll::kAllReduce;
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  cut_.Cut(a, nranks_, piece_);
  const std::vector<WireShard>& shards = cut_.shards;
  auto len_of = [&](int q, int64_t j) { return cut_.Len(q, j); };
  auto wire_to = [&](int r) { return net_[r] ? wire : Wire::kNone; };
  // One exchange, N - 1 steps (at step s to rank + s, from rank - s, as the
  // host engine orders them), kStepsPerBatch steps to a call.
  auto exchange = [&](const std::function<void(int to, int from, std::vector<P2pOp>*)>& step_ops) -> Status {
    for (int first = 1; first < nranks_; first += kStepsPerBatch) {
      std::vector<P2pOp> ops;
      for (int s = first; s < nranks_ && s < first + kStepsPerBatch; ++s) {
        step_ops((rank_ + s) % nranks_, (rank_ + nranks_ - s) % nranks_, &ops);
      }
      if (ops.empty()) continue;
      P2pCall p2p_call = CollectiveExchange(call);
      Status st = p2p_->Run(ops, p2p_call);
      call.fatal = call.fatal || p2p_call.fatal || st.ok();
      RETURN_IF_ERROR(st);
    }
    return Status();
  };
  auto bytes = [](Wire w, int64_t n) { return static_cast<size_t>(kernels::WireBytes(w, n)); };
  for (int64_t j = 0; j < cut_.rounds; ++j) {
    const int64_t n_mine = len_of(rank_, j);
    // Every rank's piece of its shard, this rank's own as fp32.
    for (int q = 0; q < nranks_; ++q) {
      const int64_t n = len_of(q, j);
      if (n == 0) continue;
      const void* src = send + static_cast<size_t>(shards[q].begin + j * piece_) * esize;
      RETURN_IF_ERROR(stages_->Encode(call, q == rank_ ? Wire::kNone : wire_to(q), a.dtype, src, n, scale,
                                      q == rank_ ? In(rank_) : Out(q)));
    }
    RETURN_IF_ERROR(exchange([&](int to, int from, std::vector<P2pOp>* ops) {
      const int64_t n_to = len_of(to, j);
      if (n_to > 0) ops->push_back({true, to, Out(to), nullptr, bytes(wire_to(to), n_to)});
      if (n_mine > 0) ops->push_back({false, from, nullptr, In(from), bytes(wire_to(from), n_mine)});
    }));
    if (n_mine > 0) RETURN_IF_ERROR(stages_->Sum(call, nranks_, wire, n_mine, Acc()));
    if (!all_reduce) {
      if (n_mine > 0) {
        char* dst = recv + static_cast<size_t>(j * piece_) * esize;
        RETURN_IF_ERROR(stages_->Decode(call, Wire::kNone, reinterpret_cast<const uint8_t*>(Acc()), n_mine,
                                        a.dtype, dst));
      }
      continue;
    }
    // All-reduce: the summed piece rounded once, to every rank (this one's
    // own output decoded from the same bytes).
    if (n_mine > 0) RETURN_IF_ERROR(stages_->Encode(call, wire, DataType::kFloat32, Acc(), n_mine, 1.0f, Result()));
    RETURN_IF_ERROR(exchange([&](int to, int from, std::vector<P2pOp>* ops) {
      if (n_mine > 0) ops->push_back({true, to, Result(), nullptr, bytes(wire, n_mine)});
      const int64_t n_from = len_of(from, j);
      if (n_from > 0) ops->push_back({false, from, nullptr, Gathered(from), bytes(wire, n_from)});
    }));
    for (int q = 0; q < nranks_; ++q) {
      const int64_t n = len_of(q, j);
      if (n == 0) continue;
      char* dst = recv + static_cast<size_t>(shards[q].begin + j * piece_) * esize;
      RETURN_IF_ERROR(stages_->Decode(call, wire, q == rank_ ? Result() : Gathered(q), n, a.dtype, dst));
    }
  }
  return Status();
}

}  // namespace ringo::collectives
