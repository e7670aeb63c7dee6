#include "collectives/engines/gpu_wire.h"

#include <algorithm>
#include <functional>
#include <string>

#include "base/device/dtype.h"
#include "base/logging.h"
#include "collectives/engines/wire.h"
#include "kernels/cuda/launch.h"
#include "kernels/wire.h"

namespace ringo::collectives {

using base::RedOp;
using base::Status;
using kernels::Wire;

namespace {

// Steps of one exchange per point-to-point kernel: each step adds a send
// lane and a receive lane, within the kernel's kMaxP2pLanes.
constexpr int kStepsPerBatch = kernels::gpu::kMaxP2pLanes / 2;

}  // namespace

GpuWire::GpuWire(const EngineSetup& setup, std::shared_ptr<GpuRank> gpu, PointToPoint* p2p)
    : rank_(setup.rank),
      nranks_(setup.nranks),
      gpu_(std::move(gpu)),
      p2p_(p2p),
      net_(static_cast<size_t>(setup.nranks), 0),
      piece_(WireEngine::PieceElems(setup.nranks)) {
  const std::vector<bool>& net = setup.connector->spec().net;
  for (int r = 0; r < nranks_ && r < static_cast<int>(net.size()); ++r) net_[r] = net[r] ? 1 : 0;
  slot_bytes_ = (4 * piece_ + 255) / 256 * 256;
}

base::StatusOr<std::unique_ptr<GpuWire>> GpuWire::Make(const EngineSetup& setup, std::shared_ptr<GpuRank> gpu,
                                                        PointToPoint* p2p) {
  std::unique_ptr<GpuWire> w(new GpuWire(setup, std::move(gpu), p2p));
  const int64_t slots = 3 * static_cast<int64_t>(w->nranks_) + 2;
  const std::vector<uint8_t> zeros(static_cast<size_t>(slots * w->slot_bytes_), 0);
  ASSIGN_OR_RETURN(w->scratch_, base::DeviceCopy::Of(setup.device, zeros.data(), zeros.size()));
  std::vector<kernels::gpu::WireSource> sources(static_cast<size_t>(w->nranks_));
  for (int r = 0; r < w->nranks_; ++r) {
    sources[r].bytes = w->In(r);
    sources[r].wired = r != w->rank_ && w->net_[r] != 0 ? 1 : 0;
    sources[r].reserved = 0;
  }
  ASSIGN_OR_RETURN(w->sources_, base::DeviceCopy::Of(setup.device, sources.data(),
                                                      sources.size() * sizeof(kernels::gpu::WireSource)));
  return w;
}

uint8_t* GpuWire::Slot(int64_t i) const { return static_cast<uint8_t*>(scratch_.get()) + i * slot_bytes_; }

// Premul-sum (whose scalar may live in device memory) stays on the ring, exact.
bool GpuWire::Takes(Call& call) {
  return nranks_ > 1 && call.wire != 0 && WireApplies(call.args) && call.args.op != RedOp::kPreMulSum;
}

void GpuWire::LogOnce(int wire) {
  if (logged_) return;
  logged_ = true;
  std::string net, local;
  for (int r = 0; r < nranks_; ++r) {
    if (r == rank_) continue;
    std::string& list = net_[r] ? net : local;
    list += (list.empty() ? "" : ",") + std::to_string(r);
  }
  const char* name = kernels::WireName(static_cast<Wire>(wire));
  RINGO_LOG(INFO) << "rank " << rank_ << ": wire " << name
                  << " on the GPU (RINGO_GPU_WIRE=1; not yet verified on a GPU): contributions to ranks "
                  << (net.empty() ? "none" : net) << " (network) in " << name << ", to ranks "
                  << (local.empty() ? "none" : local) << " (this host) in fp32; every summed shard sent once in "
                  << name;
}

Status GpuWire::Run(Call& call) {
  const kernels::CollArgs& a = call.args;
  const Wire wire = static_cast<Wire>(call.wire);
  LogOnce(call.wire);
  const size_t esize = base::DataTypeSize(a.dtype);
  const float scale = a.op == RedOp::kAvg ? 1.0f / static_cast<float>(nranks_) : 1.0f;
  const bool all_reduce = a.coll == kernels::Coll::kAllReduce;
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  std::vector<WireShard> shards(static_cast<size_t>(nranks_));
  int64_t longest = 0;
  for (int q = 0; q < nranks_; ++q) {
    shards[q] = WireShardOf(a, q, nranks_);
    longest = std::max(longest, shards[q].len);
  }
  const int64_t rounds = (longest + piece_ - 1) / piece_;
  auto len_of = [&](int q, int64_t j) { return std::max<int64_t>(0, std::min(piece_, shards[q].len - j * piece_)); };
  auto wire_to = [&](int r) { return net_[r] ? wire : Wire::kNone; };
  // Once something is enqueued the peers may wait for this rank: a failure
  // from then on fails the communicator (a stream refused before it does not).
  auto enqueue = [&](const std::function<Status()>& launch) {
    Status st = gpu_->Enqueue(call.stream, call.capturing, call.capture_id, launch);
    if (st.ok()) call.fatal = true;
    return st;
  };
  // One exchange, N - 1 steps (at step s to rank + s, from rank - s, as the
  // host engine orders them), kStepsPerBatch steps to a kernel.
  auto exchange = [&](const std::function<void(int to, int from, std::vector<P2pOp>*)>& step_ops) -> Status {
    for (int first = 1; first < nranks_; first += kStepsPerBatch) {
      std::vector<P2pOp> ops;
      for (int s = first; s < nranks_ && s < first + kStepsPerBatch; ++s) {
        step_ops((rank_ + s) % nranks_, (rank_ + nranks_ - s) % nranks_, &ops);
      }
      if (ops.empty()) continue;
      P2pCall p2p_call;
      p2p_call.stream = call.stream;
      p2p_call.capturing = call.capturing;
      p2p_call.capture_id = call.capture_id;
      p2p_call.wait = call.wait;
      p2p_call.collective = true;
      Status st = p2p_->Run(ops, p2p_call);
      call.fatal = call.fatal || p2p_call.fatal || st.ok();
      RETURN_IF_ERROR(st);
    }
    return Status();
  };
  namespace gpu = kernels::gpu;
  for (int64_t j = 0; j < rounds; ++j) {
    const int64_t n_mine = len_of(rank_, j);
    // Every rank's piece of its shard, and this rank's own as fp32.
    for (int q = 0; q < nranks_; ++q) {
      const int64_t n = len_of(q, j);
      if (n == 0) continue;
      const void* src = send + static_cast<size_t>(shards[q].begin + j * piece_) * esize;
      const Wire w = q == rank_ ? Wire::kNone : wire_to(q);
      uint8_t* dst = q == rank_ ? In(rank_) : Out(q);
      RETURN_IF_ERROR(enqueue([&] { return gpu::LaunchWireEncode(w, a.dtype, src, n, scale, dst, call.stream); }));
    }
    RETURN_IF_ERROR(exchange([&](int to, int from, std::vector<P2pOp>* ops) {
      const int64_t n_to = len_of(to, j);
      if (n_to > 0) ops->push_back({true, to, Out(to), nullptr, static_cast<size_t>(kernels::WireBytes(wire_to(to), n_to))});
      if (n_mine > 0) {
        ops->push_back({false, from, nullptr, In(from), static_cast<size_t>(kernels::WireBytes(wire_to(from), n_mine))});
      }
    }));
    if (n_mine > 0) {
      RETURN_IF_ERROR(enqueue([&] {
        return gpu::LaunchWireSum(static_cast<const gpu::WireSource*>(sources_.get()), nranks_, wire, n_mine, Acc(),
                                  call.stream);
      }));
    }
    if (!all_reduce) {
      if (n_mine > 0) {
        char* dst = recv + static_cast<size_t>(j * piece_) * esize;
        RETURN_IF_ERROR(
            enqueue([&] { return gpu::LaunchWireDecode(Wire::kNone, Acc(), n_mine, a.dtype, dst, call.stream); }));
      }
      continue;
    }
    // All-reduce: the summed piece rounded once, to every rank (this one's
    // own output decoded from the same bytes).
    if (n_mine > 0) {
      RETURN_IF_ERROR(enqueue(
          [&] { return gpu::LaunchWireEncode(wire, base::DataType::kFloat32, Acc(), n_mine, 1.0f, Result(), call.stream); }));
    }
    RETURN_IF_ERROR(exchange([&](int to, int from, std::vector<P2pOp>* ops) {
      if (n_mine > 0) ops->push_back({true, to, Result(), nullptr, static_cast<size_t>(kernels::WireBytes(wire, n_mine))});
      const int64_t n_from = len_of(from, j);
      if (n_from > 0) {
        ops->push_back({false, from, nullptr, Gathered(from), static_cast<size_t>(kernels::WireBytes(wire, n_from))});
      }
    }));
    for (int q = 0; q < nranks_; ++q) {
      const int64_t n = len_of(q, j);
      if (n == 0) continue;
      const uint8_t* bytes = q == rank_ ? Result() : Gathered(q);
      char* dst = recv + static_cast<size_t>(shards[q].begin + j * piece_) * esize;
      RETURN_IF_ERROR(enqueue([&] { return gpu::LaunchWireDecode(wire, bytes, n, a.dtype, dst, call.stream); }));
    }
  }
  return Status();
}

}  // namespace ringo::collectives
