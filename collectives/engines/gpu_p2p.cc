#include "collectives/engines/gpu_p2p.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <string>
#include <utility>

#include "collectives/engines/gpu_placement.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/p2p_types.h"

namespace ringo::collectives {

using base::Status;
using kernels::gpu::P2pKernelArgs;
using kernels::gpu::P2pLaneKind;

GpuP2p::GpuP2p(const EngineSetup& setup, std::shared_ptr<GpuRank> gpu)
    : rank_(setup.rank),
      nranks_(setup.nranks),
      connector_(setup.connector),
      geometry_{static_cast<uint64_t>((P2pSlotBytes(setup.settings) + 15) / 16 * 16), 0, 0},
      gpu_(std::move(gpu)),
      gpu_scope_peers_(setup.gpu_scope_peers),
      send_(setup.nranks),
      recv_(setup.nranks) {}

GpuP2p::~GpuP2p() { (void)gpu_->Synchronize(); }

Status GpuP2p::Connect(const std::vector<int>& send_to, const std::vector<int>& recv_from,
                       const std::atomic<bool>* abort) {
  std::vector<transport::PairKey> sends, recvs;
  auto want = [&](const std::vector<int>& peers, const auto& have, std::vector<transport::PairKey>* out) {
    for (int p : peers) {
      const transport::PairKey key{p, transport::kP2pLane};
      if (p != rank_ && have[p] == nullptr && std::find(out->begin(), out->end(), key) == out->end()) {
        out->push_back(key);
      }
    }
  };
  want(send_to, send_, &sends);
  want(recv_from, recv_, &recvs);
  if (sends.empty() && recvs.empty()) return Status();
  ASSIGN_OR_RETURN(std::vector<transport::FifoLink> links,
                   connector_->Connect(sends, recvs, geometry_, /*gpu=*/true, abort));
  std::lock_guard<std::mutex> lock(links_mu_);
  for (transport::FifoLink& l : links) {
    auto& slot = l.sending ? send_[l.peer] : recv_[l.peer];
    slot = std::make_unique<transport::FifoLink>(std::move(l));
  }
  return Status();
}

Status GpuP2p::Run(const std::vector<P2pOp>& ops, P2pCall& call) {
  // Lanes: this rank's copies to itself, then each peer's sends and receives.
  std::map<std::pair<int, int>, std::vector<const P2pOp*>> lanes;  // (kind, peer) -> operations in order
  std::vector<const P2pOp*> self_sends, self_recvs;
  std::vector<int> send_to, recv_from;
  for (const P2pOp& op : ops) {
    if (op.peer == rank_) {
      (op.send ? self_sends : self_recvs).push_back(&op);
      continue;
    }
    lanes[{op.send ? 0 : 1, op.peer}].push_back(&op);
    (op.send ? send_to : recv_from).push_back(op.peer);
  }
  const size_t nlanes = lanes.size() + (self_sends.empty() ? 0 : 1);
  const size_t nops = ops.size() - self_sends.size();
  if (nlanes > static_cast<size_t>(kernels::gpu::kMaxP2pLanes) || nops > static_cast<size_t>(kernels::gpu::kMaxP2pOps)) {
    return base::InvalidUsage("a GPU point-to-point batch takes at most " + std::to_string(kernels::gpu::kMaxP2pOps) +
                              " operations with " + std::to_string(kernels::gpu::kMaxP2pLanes) +
                              " peer directions; this one has " + std::to_string(nops) + " with " +
                              std::to_string(nlanes) + ": split the group");
  }
  if (nlanes == 0) return Status();
  RETURN_IF_ERROR(Connect(send_to, recv_from, call.wait.local_abort));

  auto args = std::make_unique<P2pKernelArgs>();  // about 13 KB: not on the stack
  args->rank = rank_;
  int op_index = 0;
  auto add_lane = [&](P2pLaneKind kind, int peer, const transport::FifoLink* link) -> kernels::gpu::P2pLane& {
    kernels::gpu::P2pLane& lane = args->lanes[args->nlanes++];
    lane.kind = kind;
    lane.peer = peer;
    if (link != nullptr) {
      lane.fifo =
          kernels::gpu::DeviceFifoAt(link->header, link->geometry, !link->sending, peer, nullptr, link->slots);
      lane.fifo.gpu_scope = GpuScopeOf(gpu_scope_peers_, *link);
      if (link->medium == transport::Medium::kNet) {  // the kernel marks its launch ended there
        lane.fifo.launch_ended = reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(link->header) +
                                                             offsetof(transport::FifoHeader, device_ended));
      }
    }
    lane.first_op = op_index;
    return lane;
  };
  if (!self_sends.empty()) {
    kernels::gpu::P2pLane& lane = add_lane(P2pLaneKind::kSelf, rank_, nullptr);
    for (size_t i = 0; i < self_sends.size(); ++i) {
      args->ops[op_index++] = {self_sends[i]->send_buf, self_recvs[i]->recv_buf, self_sends[i]->bytes};
      ++lane.nops;
    }
  }
  for (const auto& [key, list] : lanes) {
    const bool send = key.first == 0;
    const int peer = key.second;
    kernels::gpu::P2pLane& lane = add_lane(send ? P2pLaneKind::kSend : P2pLaneKind::kRecv, peer,
                                           send ? send_[peer].get() : recv_[peer].get());
    for (const P2pOp* op : list) {
      args->ops[op_index++] = {op->send_buf, op->recv_buf, op->bytes};
      ++lane.nops;
    }
  }
  const Status st = gpu_->Enqueue(call.stream, call.capturing, call.capture_id, [&] {
    const kernels::gpu::KernelGuard guard = gpu_->Guard();
    RETURN_IF_ERROR(kernels::gpu::LaunchP2pKernel(*args, call.stream, guard));
    // A kernel cannot wake a sleeping proxy: the mark does, and keeps the
    // proxy of a network pair awake until the kernel marks its launch ended
    // (as GpuRing::Run: launched kernels only).
    for (const auto& [key, list] : lanes) {
      const transport::FifoLink* l = key.first == 0 ? send_[key.second].get() : recv_[key.second].get();
      if (l != nullptr && l->medium == transport::Medium::kNet) {
        transport::MarkDeviceLaunch(static_cast<transport::FifoHeader*>(l->memory->base()), guard.launch);
      }
    }
    return Status();
  });
  // A launch that failed after connections were made leaves the peers waiting.
  call.fatal = st.code() == base::Code::kCudaError;
  return st;
}

void GpuP2p::Abort(const Status& why, uint64_t seq) {
  std::vector<uint32_t*> words;
  {
    std::lock_guard<std::mutex> lock(links_mu_);
    for (const auto* side : {&send_, &recv_}) {
      for (const auto& l : *side) {
        if (l == nullptr) continue;
        char* base = reinterpret_cast<char*>(l->header);
        words.push_back(reinterpret_cast<uint32_t*>(
            base + (l->sending ? offsetof(transport::FifoHeader, sender_aborted)
                               : offsetof(transport::FifoHeader, receiver_aborted))));
      }
    }
  }
  gpu_->RaiseAbort();
  gpu_->RaiseAbortWords(words);
}

}  // namespace ringo::collectives
