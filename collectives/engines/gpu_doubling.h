// Recursive doubling on a GPU communicator (doubling_plan.h's steps, as the
// host engine runs them): each step a point-to-point kernel on the caller's
// stream (the communicator's GPU point-to-point engine: this rank's partial
// result out, the peer's into a scratch buffer), then the reduction kernel
// (kernels/cuda/launch.h's LaunchReduceKernel) combining the two partials,
// lower rank's first, so every rank holds the same bits. Everything is
// enqueued on the stream; the host waits only where the point-to-point
// engine connects a pair the first time it is used.
//
// Opt-in, never run on a GPU yet: only RINGO_ALGO=doubling builds it (GPU
// communicators otherwise run the ring), for all-reduces up to 256 KiB with
// sum, product, min or max (avg and premul-sum, which scale each input
// first, stay on the ring). Unlike the host engine's messages, the GPU
// point-to-point kernel's carry no call signature: mismatched calls of one
// size are not named (the kernel names a size mismatch).
#ifndef RINGO_COLLECTIVES_ENGINES_GPU_DOUBLING_H_
#define RINGO_COLLECTIVES_ENGINES_GPU_DOUBLING_H_

#include <memory>

#include "base/cuda.h"
#include "collectives/engines/engine.h"
#include "collectives/engines/gpu_rank.h"
#include "collectives/engines/setup.h"

namespace ringo::collectives {

class GpuDoubling : public Engine {
 public:
  static constexpr int64_t kMaxBytes = 256 * 1024;

  // Allocates the scratch buffer on the rank's GPU (blocking). `p2p`: the
  // communicator's GPU point-to-point engine.
  static base::StatusOr<std::unique_ptr<GpuDoubling>> Make(const EngineSetup& setup, std::shared_ptr<GpuRank> gpu,
                                                           PointToPoint* p2p);

  const char* name() const override { return "recursive doubling"; }
  bool Takes(Call& call) override;
  base::Status Run(Call& call) override;
  void Abort(const base::Status&, uint64_t) override {}  // the point-to-point engine's kernels stop

 private:
  GpuDoubling(const EngineSetup& setup, std::shared_ptr<GpuRank> gpu, PointToPoint* p2p);

  const int rank_;
  const int nranks_;
  std::shared_ptr<GpuRank> gpu_;
  PointToPoint* p2p_;
  base::DeviceCopy scratch_;  // kMaxBytes: the peer's partial result
  bool logged_ = false;
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_GPU_DOUBLING_H_
