// The compressed wire on a GPU communicator: the host wire engine's
// algorithm (wire.h: reduce-scatter by direct exchange, each contribution
// rounded once on its way, the summed shard once), its shards and rounds
// (WireShardOf, WireEngine::PieceElems), run as a staged schedule: each
// round, on the caller's stream, a kernel encodes every peer's piece of its
// shard (in the wire where the pair crosses the network, fp32 within a
// host) and this rank's own (fp32); one exchange (the communicator's GPU
// point-to-point engine); a kernel sums the contributions in fp32 in rank
// order; for reduce-scatter a kernel writes the sum into the output; for
// all-reduce a kernel encodes the sum once, a second exchange sends it to
// every rank, and a kernel decodes every rank's piece into the output.
// Everything is enqueued; the host waits only where the point-to-point
// engine connects a pair the first time.
//
// The stages' work is kernels/wire.h's unit functions: the kernels
// (kernels/cuda/ring_wire.cu) run one per thread; the host stages
// (MakeOnHost: RINGO_WIRE_ENGINE=staged on a host communicator) loop over
// them on host memory, so that the schedule the GPU runs is tested where no
// GPU is (wire_test compares its bits with the host engine's).
//
// Opt-in on GPUs, never run on one yet: only RINGO_GPU_WIRE=1 builds it
// (GPU communicators otherwise send uncompressed and ringoCommSetWire
// refuses them). Unlike the host engine it does not overlap a round's
// exchange with the next round's encoding (one stream orders them).
#ifndef RINGO_COLLECTIVES_ENGINES_GPU_WIRE_H_
#define RINGO_COLLECTIVES_ENGINES_GPU_WIRE_H_

#include <memory>
#include <vector>

#include "collectives/engines/engine.h"
#include "collectives/engines/gpu_rank.h"
#include "collectives/engines/setup.h"
#include "collectives/engines/wire.h"
#include "kernels/wire.h"

namespace ringo::collectives {

// Where the stages run: kernels on the call's stream, or loops on the host.
class WireStages {
 public:
  virtual ~WireStages() = default;
  // The scratch (`bytes` given at Make) and the sources table, in the
  // stages' memory.
  virtual uint8_t* scratch() const = 0;
  virtual const kernels::WireSource* sources() const = 0;
  // out = the `n` values at `src` times `scale`, in `w`.
  virtual base::Status Encode(Call& call, kernels::Wire w, base::DataType dtype, const void* src, int64_t n,
                              float scale, uint8_t* out) = 0;
  // acc = the sum of the sources' first `n` values.
  virtual base::Status Sum(Call& call, int nsources, kernels::Wire w, int64_t n, float* acc) = 0;
  // dst = the `n` values at `in` (in `w`) as `dtype`.
  virtual base::Status Decode(Call& call, kernels::Wire w, const uint8_t* in, int64_t n, base::DataType dtype,
                              void* dst) = 0;
};

class GpuWire : public Engine {
 public:
  // On the rank's GPU: allocates the scratch there (blocking). `p2p`: the
  // communicator's GPU point-to-point engine. Built only where some pair of
  // ranks crosses the network.
  static base::StatusOr<std::unique_ptr<GpuWire>> Make(const EngineSetup& setup, std::shared_ptr<GpuRank> gpu,
                                                       PointToPoint* p2p);
  // The same schedule on host memory, over the host point-to-point engine.
  static std::unique_ptr<GpuWire> MakeOnHost(const EngineSetup& setup, PointToPoint* p2p);

  const char* name() const override { return "wire"; }
  bool Takes(Call& call) override;
  base::Status Run(Call& call) override;
  void Abort(const base::Status&, uint64_t) override {}  // the point-to-point engine wakes its waits

 private:
  GpuWire(const EngineSetup& setup, PointToPoint* p2p, bool on_gpu);
  int64_t ScratchBytes() const { return (3 * static_cast<int64_t>(nranks_) + 2) * slot_bytes_; }
  std::vector<kernels::WireSource> SourcesAt(uint8_t* scratch) const;
  // Slot `i` of the scratch: 4 * piece_ bytes, enough for a piece in any format.
  uint8_t* Slot(int64_t i) const { return stages_->scratch() + i * slot_bytes_; }
  uint8_t* Out(int q) const { return Slot(q); }                     // to peer q
  uint8_t* In(int r) const { return Slot(nranks_ + r); }            // from rank r (own: fp32)
  uint8_t* Gathered(int q) const { return Slot(2 * nranks_ + q); }  // rank q's summed piece
  float* Acc() const { return reinterpret_cast<float*>(Slot(3 * nranks_)); }
  uint8_t* Result() const { return Slot(3 * nranks_ + 1); }         // this rank's, in the wire
  void LogOnce(int wire);

  const int rank_;
  const int nranks_;
  const bool on_gpu_;
  const SharedSettings shared_;
  PointToPoint* p2p_;
  std::vector<char> net_;  // by rank: the pair crosses the network
  const int64_t piece_;    // elements of each shard a round moves
  int64_t slot_bytes_ = 0;
  std::unique_ptr<WireStages> stages_;
  WireRounds cut_;  // the call's shards and rounds
  bool logged_ = false;
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_GPU_WIRE_H_
