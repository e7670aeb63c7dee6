// The compressed wire on a GPU communicator: the host wire engine's
// algorithm (wire.h: reduce-scatter by direct exchange, each contribution
// rounded once on its way, the summed shard once), its shards and rounds
// (WireShardOf, WireEngine::PieceElems), with the encoding, the fp32 sums
// and the decoding done by kernels on the caller's stream
// (kernels/cuda/launch.h's LaunchWireEncode, LaunchWireSum,
// LaunchWireDecode, which run kernels/wire.h's codecs) and the exchanges
// by the communicator's GPU point-to-point engine. A GPU rank's result has
// the bits a host rank's would.
//
// Each round, on the stream: encode every peer's piece of its shard (in the
// wire where the pair crosses the network, fp32 within a host) and this
// rank's own (fp32); one exchange; the sum kernel; for reduce-scatter, the
// sum into the output; for all-reduce, the sum encoded once, a second
// exchange sending it to every rank, and every rank's piece decoded into
// the output. Everything is enqueued; the host waits only where the
// point-to-point engine connects a pair the first time.
//
// Opt-in, never run on a GPU yet: only RINGO_GPU_WIRE=1 builds it (GPU
// communicators otherwise send uncompressed and ringoCommSetWire refuses
// them). Unlike the host engine it does not overlap a round's exchange with
// the next round's encoding (one stream orders them).
#ifndef RINGO_COLLECTIVES_ENGINES_GPU_WIRE_H_
#define RINGO_COLLECTIVES_ENGINES_GPU_WIRE_H_

#include <memory>
#include <vector>

#include "base/cuda.h"
#include "collectives/engines/engine.h"
#include "collectives/engines/gpu_rank.h"
#include "collectives/engines/setup.h"

namespace ringo::collectives {

class GpuWire : public Engine {
 public:
  // Allocates the scratch on the rank's GPU (blocking). `p2p`: the
  // communicator's GPU point-to-point engine. Built only where some pair of
  // ranks crosses the network.
  static base::StatusOr<std::unique_ptr<GpuWire>> Make(const EngineSetup& setup, std::shared_ptr<GpuRank> gpu,
                                                       PointToPoint* p2p);

  const char* name() const override { return "wire"; }
  bool Takes(Call& call) override;
  base::Status Run(Call& call) override;
  void Abort(const base::Status&, uint64_t) override {}  // the point-to-point engine's kernels stop

 private:
  GpuWire(const EngineSetup& setup, std::shared_ptr<GpuRank> gpu, PointToPoint* p2p);
  // Slot `i` of the scratch: 4 * piece_ bytes, enough for a piece in any format.
  uint8_t* Slot(int64_t i) const;
  uint8_t* Out(int q) const { return Slot(q); }                         // to peer q
  uint8_t* In(int r) const { return Slot(nranks_ + r); }                // from rank r (own: fp32)
  uint8_t* Gathered(int q) const { return Slot(2 * nranks_ + q); }      // rank q's summed piece
  float* Acc() const { return reinterpret_cast<float*>(Slot(3 * nranks_)); }
  uint8_t* Result() const { return Slot(3 * nranks_ + 1); }             // this rank's, in the wire
  void LogOnce(int wire);

  const int rank_;
  const int nranks_;
  std::shared_ptr<GpuRank> gpu_;
  PointToPoint* p2p_;
  std::vector<char> net_;   // by rank: the pair crosses the network
  const int64_t piece_;     // elements of each shard a round moves
  int64_t slot_bytes_ = 0;
  base::DeviceCopy scratch_;  // 3 * nranks + 2 slots
  base::DeviceCopy sources_;  // nranks WireSources: In(r), wired where net_[r]
  bool logged_ = false;
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_GPU_WIRE_H_
