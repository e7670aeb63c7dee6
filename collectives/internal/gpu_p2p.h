// The point-to-point engine of a GPU communicator: a batch of sends and
// receives (one ringoSend/ringoRecv, or a group's, and the all-to-all,
// gather and scatter built on them) becomes one point-to-point kernel on the
// caller's stream (kernels/cuda/p2p_types.h: a block per peer and direction,
// operations on one pair and direction in issue order, copies to oneself in
// a block of their own), after the connections it needs are made
// (transport/p2p_peers.h; blocking, on the host, the first time a pair is
// used). Matching is NCCL's: the k-th send from s to r meets the k-th
// receive r posts from s; a receive of another size than its send fails the
// kernel with a size mismatch (ringoCommGetAsyncError).
//
// Thread safety: Run by the communicator's one thread.
#ifndef RINGO_COLLECTIVES_INTERNAL_GPU_P2P_H_
#define RINGO_COLLECTIVES_INTERNAL_GPU_P2P_H_

#include <vector>

#include "base/status.h"
#include "collectives/internal/gpu_comm.h"
#include "collectives/p2p_engine.h"
#include "transport/bootstrap/exchange.h"
#include "transport/cuda/p2p_peers.h"

namespace ringo::collectives::internal {

class GpuP2p {
 public:
  GpuP2p(transport::Exchange* exchange, const transport::GpuPeerSpec& spec) : spec_(spec), links_(exchange, spec) {}

  // Connects what `ops` need, then enqueues them on `stream` through `gpu`.
  // InvalidUsage for a batch beyond one kernel's lanes or operations.
  base::Status Run(const std::vector<P2pOp>& ops, void* stream, GpuComm& gpu);

 private:
  transport::GpuPeerSpec spec_;
  transport::GpuPeerLinks links_;
};

}  // namespace ringo::collectives::internal

#endif  // RINGO_COLLECTIVES_INTERNAL_GPU_P2P_H_
