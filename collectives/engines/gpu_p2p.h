// The point-to-point engine of a GPU communicator: a batch of sends and
// receives (one ringoSend/ringoRecv, or a group's, and the all-to-all,
// gather and scatter built on them) becomes one point-to-point kernel on
// the caller's stream (kernels/cuda/p2p_types.h: a block per peer and
// direction, operations on one pair and direction in issue order, copies
// to oneself in a block of their own), after the pairs it needs are
// connected (lane transport::kP2pLane of the connector, GPU media;
// blocking, on the host, the first time a pair is used). A receive of
// another size than its send fails the kernel with a size mismatch
// (ringoCommGetAsyncError).
//
// Release: as with NCCL, every rank must destroy its communicator only once
// its peers have no kernel using its FIFOs.
#ifndef RINGO_COLLECTIVES_ENGINES_GPU_P2P_H_
#define RINGO_COLLECTIVES_ENGINES_GPU_P2P_H_

#include <memory>
#include <vector>

#include "base/status.h"
#include "collectives/engines/engine.h"
#include "collectives/engines/gpu_rank.h"
#include "collectives/engines/setup.h"
#include "transport/connect/connector.h"

namespace ringo::collectives {

class GpuP2p : public PointToPoint {
 public:
  GpuP2p(const EngineSetup& setup, std::shared_ptr<GpuRank> gpu);
  ~GpuP2p() override;

  // Connects what `ops` need, then enqueues them on call.stream.
  // InvalidUsage for a batch beyond one kernel's lanes or operations.
  base::Status Run(const std::vector<P2pOp>& ops, P2pCall& call) override;
  void Abort(const base::Status& why, uint64_t seq) override;

 private:
  base::Status Connect(const std::vector<int>& send_to, const std::vector<int>& recv_from,
                       const std::atomic<bool>* abort);

  const int rank_;
  const int nranks_;
  transport::Connector* const connector_;
  const transport::FifoGeometry geometry_;
  std::shared_ptr<GpuRank> gpu_;
  std::vector<uint8_t> gpu_scope_peers_;  // EngineSetup::gpu_scope_peers
  std::mutex links_mu_;  // links appear under it (Abort reads them from any thread)
  std::vector<std::unique_ptr<transport::FifoLink>> send_;  // by peer; null until connected
  std::vector<std::unique_ptr<transport::FifoLink>> recv_;
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_GPU_P2P_H_
