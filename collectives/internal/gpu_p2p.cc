#include "collectives/internal/gpu_p2p.h"

#include <map>
#include <memory>
#include <string>
#include <utility>

namespace ringo::collectives::internal {

using base::Status;
using kernels::gpu::P2pKernelArgs;
using kernels::gpu::P2pLaneKind;

Status GpuP2p::Run(const std::vector<P2pOp>& ops, void* stream, GpuComm& gpu) {
  // Lanes: this rank's copies to itself, then each peer's sends and receives.
  std::map<std::pair<int, int>, std::vector<const P2pOp*>> lanes;  // (kind, peer) -> operations in order
  std::vector<const P2pOp*> self_sends, self_recvs;
  std::vector<int> send_to, recv_from;
  for (const P2pOp& op : ops) {
    if (op.peer == spec_.rank) {
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
  RETURN_IF_ERROR(links_.Connect(send_to, recv_from));

  auto args = std::make_unique<P2pKernelArgs>();  // about 13 KB: not on the stack
  args->rank = spec_.rank;
  int op_index = 0;
  auto add_lane = [&](P2pLaneKind kind, int peer, const transport::P2pFifo* fifo) -> kernels::gpu::P2pLane& {
    kernels::gpu::P2pLane& lane = args->lanes[args->nlanes++];
    lane.kind = kind;
    lane.peer = peer;
    if (fifo != nullptr) lane.fifo = ToDeviceFifo(*fifo, kind == P2pLaneKind::kRecv, peer);
    lane.first_op = op_index;
    return lane;
  };
  if (!self_sends.empty()) {
    kernels::gpu::P2pLane& lane = add_lane(P2pLaneKind::kSelf, spec_.rank, nullptr);
    for (size_t i = 0; i < self_sends.size(); ++i) {
      args->ops[op_index++] = {self_sends[i]->send_buf, self_recvs[i]->recv_buf, self_sends[i]->bytes};
      ++lane.nops;
    }
  }
  for (const auto& [key, list] : lanes) {
    const bool send = key.first == 0;
    const int peer = key.second;
    kernels::gpu::P2pLane& lane =
        add_lane(send ? P2pLaneKind::kSend : P2pLaneKind::kRecv, peer, send ? links_.send(peer) : links_.recv(peer));
    for (const P2pOp* op : list) {
      args->ops[op_index++] = {op->send_buf, op->recv_buf, op->bytes};
      ++lane.nops;
    }
  }
  return gpu.EnqueueP2p(*args, stream);
}

}  // namespace ringo::collectives::internal
