#include "collectives/engines/gpu_ring.h"

#include <cstddef>
#include <string>

#include "base/logging.h"
#include "collectives/engines/gpu_placement.h"
#include "kernels/cuda/launch.h"

namespace ringo::collectives {

using base::Status;
using base::StatusOr;

namespace {

// The abort word this rank writes in a FIFO it sends on (sending) or
// receives on, as a device address.
uint32_t* OwnAbortWord(const transport::FifoLink& l) {
  char* base = reinterpret_cast<char*>(l.header);
  return reinterpret_cast<uint32_t*>(base + (l.sending ? offsetof(transport::FifoHeader, sender_aborted)
                                                       : offsetof(transport::FifoHeader, receiver_aborted)));
}

// Where a kernel marks its launch ended in a FIFO the network proxy serves,
// as a device address; null for other FIFOs.
uint64_t* LaunchEndedWord(const transport::FifoLink& l) {
  if (l.medium != transport::Medium::kNet) return nullptr;
  return reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(l.header) + offsetof(transport::FifoHeader, device_ended));
}

// The ring's geometry; where any pair goes over the network (across hosts,
// or every pair under RINGO_SHM_DISABLE) the Simple protocol alone, every
// rank alike: the proxy moves whole slots, and network FIFOs have no LL lines.
DeviceGeometry SimpleAcrossHosts(const EngineSetup& setup) {
  DeviceGeometry g = setup.gpu;
  bool net = setup.gpu_hosts_spanned;
  if (setup.connector != nullptr) {
    for (bool n : setup.connector->spec().net) net = net || n;
  }
  if (net) g.proto = ProtoChoice::kSimple;
  return g;
}

// How an edge's FIFO is held, for the log.
std::string EdgeMemory(const transport::FifoLink& l) {
  if (l.medium == transport::Medium::kNet) {
    return l.slots != nullptr ? "GPU memory over verbs (GPUDirect RDMA)" : "pinned host memory over the network";
  }
  return transport::MediumName(l.medium);
}

}  // namespace

GpuRing::GpuRing(const EngineSetup& setup, std::shared_ptr<GpuRank> gpu)
    : rank_(setup.rank),
      nranks_(setup.nranks),
      pos_(setup.pos),
      order_(setup.ring.order),
      geometry_(SimpleAcrossHosts(setup)),
      gpu_(std::move(gpu)) {}

StatusOr<std::unique_ptr<GpuRing>> GpuRing::Connect(const EngineSetup& setup, std::shared_ptr<GpuRank> gpu) {
  if (setup.nranks > kernels::kMaxInlineRanks) {
    return base::InvalidUsage("GPU communicators take at most " + std::to_string(kernels::kMaxInlineRanks) +
                              " ranks");
  }
  std::unique_ptr<GpuRing> ring(new GpuRing(setup, std::move(gpu)));
  const DeviceSlices slices = MaxDeviceSlices(setup.gpu);  // for the protocol choice
  ring->max_simple_slice_ = slices.simple;
  ring->max_ll_slice_ = slices.ll;
  const int n = setup.nranks;
  const int nch = setup.gpu.nchannels;
  if (n == 1) return ring;
  const int prev = setup.ring.order[(setup.pos + n - 1) % n];
  const int next = setup.ring.order[(setup.pos + 1) % n];
  std::vector<transport::PairKey> sends, recvs;
  for (int c = 0; c < nch; ++c) {
    sends.push_back({next, c});
    recvs.push_back({prev, c});
  }
  transport::FifoGeometry geometry;
  geometry.slot_bytes = static_cast<uint64_t>(setup.gpu.slot_bytes);
  geometry.ll_slot_bytes = static_cast<uint64_t>(setup.gpu.ll_slot_bytes);
  ASSIGN_OR_RETURN(ring->links_, setup.connector->Connect(sends, recvs, geometry, /*gpu=*/true, setup.abort));
  ring->channels_.resize(nch);
  for (int c = 0; c < nch; ++c) {
    const transport::FifoLink& out = ring->links_[c];
    const transport::FifoLink& in = ring->links_[nch + c];
    ring->channels_[c].send = kernels::gpu::DeviceFifoAt(out.header, out.geometry, false, next, nullptr, out.slots);
    ring->channels_[c].recv = kernels::gpu::DeviceFifoAt(in.header, in.geometry, true, prev, nullptr, in.slots);
    ring->channels_[c].send.launch_ended = LaunchEndedWord(out);
    ring->channels_[c].recv.launch_ended = LaunchEndedWord(in);
    ring->channels_[c].send.gpu_scope = GpuScopeOf(setup.gpu_scope_peers, out);
    ring->channels_[c].recv.gpu_scope = GpuScopeOf(setup.gpu_scope_peers, in);
    ring->abort_words_.push_back(OwnAbortWord(out));
    ring->abort_words_.push_back(OwnAbortWord(in));
    for (const transport::FifoLink* l : {&out, &in}) {
      if (l->medium == transport::Medium::kNet) {
        ring->net_fifos_.emplace_back(c, static_cast<transport::FifoHeader*>(l->memory->base()));
      }
    }
  }
  ASSIGN_OR_RETURN(ring->device_channels_,
                   base::DeviceCopy::Of(setup.device, ring->channels_.data(),
                                        sizeof(kernels::gpu::DeviceChannel) * ring->channels_.size()));
  RINGO_LOG(INFO) << "rank " << setup.rank << ": GPU ring connected, prev " << prev << " ("
                  << EdgeMemory(ring->links_[nch]) << ") next " << next << " (" << EdgeMemory(ring->links_[0])
                  << "), " << nch << " channel(s)" << (setup.gpu_hosts_spanned ? ", Simple protocol (across hosts)" : "");
  return ring;
}

GpuRing::~GpuRing() {
  (void)gpu_->Synchronize();  // the kernels end before their FIFOs go
}

DevicePlan GpuRing::Plan(const kernels::CollArgs& args) const {
  return PlanDeviceCollective(args, nranks_, geometry_, max_simple_slice_, max_ll_slice_);
}

Status GpuRing::Run(Call& call) {
  if (call.args.count == 0) return Status();  // every rank skips it alike
  const DevicePlan plan = Plan(call.args);
  kernels::gpu::DeviceCollArgs a;
  a.ring = kernels::MakeRingArgs(call.args, rank_, nranks_, pos_, order_.data(), plan.nchannels, plan.slice_bytes);
  a.proto = plan.proto;
  const Status st = gpu_->Enqueue(call.stream, call.capturing, call.capture_id, [&] {
    const kernels::gpu::KernelGuard guard = gpu_->Guard();
    RETURN_IF_ERROR(kernels::gpu::LaunchRingKernel(
        a, channels_.data(), static_cast<const kernels::gpu::DeviceChannel*>(device_channels_.get()),
        plan.nchannels, call.stream, guard));
    // A kernel cannot wake a sleeping proxy: the mark does, and keeps the
    // proxy awake until the kernel marks its launch ended (a kernel that
    // ended first has already: then nothing runs). Only launched kernels
    // are marked, so a refused launch leaves no proxy spinning.
    for (const auto& [channel, h] : net_fifos_) {
      if (channel < plan.nchannels) transport::MarkDeviceLaunch(h, guard.launch);
    }
    return Status();
  });
  // A launch that failed after the arguments were accepted leaves the peers
  // waiting for this rank.
  call.fatal = st.code() == base::Code::kCudaError;
  return st;
}

void GpuRing::Abort(const Status& why, uint64_t seq) {
  gpu_->RaiseAbort();
  gpu_->RaiseAbortWords(abort_words_);  // the neighbours' kernels stop waiting on this rank
}

}  // namespace ringo::collectives
