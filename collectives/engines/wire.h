// The wire engine: floating-point sums between hosts in a compressed wire
// format (kernels/wire.h), with an error that does not grow with the rank
// count (docs/wire.md).
//
// A ring forwards partial sums, so a format narrower than the data would
// round them again at every hop: N - 1 roundings of a growing sum. This
// engine never forwards a partial sum. For all-reduce and reduce-scatter of
// fp32, bf16 or fp16 with sum or avg, on a communicator whose wire is set
// and whose ranks span hosts:
//
//   1. reduce-scatter by direct exchange: every rank sends the shard of its
//      input that rank q owns straight to q, in the wire format where the
//      pair crosses the network and in fp32 within a host; q sums the N
//      contributions in fp32, in rank order;
//   2. all-reduce only: each owner rounds its summed shard to the wire
//      format once and sends those bytes to every rank (itself included, so
//      every rank holds the same bits).
//
// So each contribution is rounded at most once on its way, and the result
// once more: the error is bounded by two roundings of the wire format (plus
// fp32 summation) whatever N is. Data moved per rank is the ring's:
// (N-1)/N of the buffer out in each phase. The engine runs over the
// communicator's point-to-point engine, in rounds of a bounded piece of each
// shard, so its scratch memory does not grow with the buffer.
//
// Every rank must set the same wire (as with the datatype); other calls
// (integer types, min, max, product, premul-sum, the other collectives) run
// on the other engines, exact.
#ifndef RINGO_COLLECTIVES_ENGINES_WIRE_H_
#define RINGO_COLLECTIVES_ENGINES_WIRE_H_

#include <cstdint>
#include <vector>

#include "collectives/engines/engine.h"
#include "collectives/engines/setup.h"
#include "kernels/wire.h"

namespace ringo::collectives {

// Whether the wire applies to a call of this shape.
bool WireApplies(const kernels::CollArgs& args);

class WireEngine : public Engine {
 public:
  // `p2p`: the communicator's point-to-point engine, which carries the
  // exchange. Built only where some pair of ranks crosses the network.
  WireEngine(const EngineSetup& setup, PointToPoint* p2p);

  const char* name() const override { return "wire"; }
  bool Takes(Call& call) override {
    return call.wire != 0 && WireApplies(call.args);
  }
  base::Status Run(Call& call) override;
  void Abort(const base::Status&, uint64_t) override {}  // the point-to-point engine wakes its waits

  // The elements of each shard one round moves, for `nranks` ranks.
  static int64_t PieceElems(int nranks);

 private:
  void LogOnce(kernels::Wire wire);

  const int rank_;
  const int nranks_;
  PointToPoint* const p2p_;
  std::vector<char> net_;  // by rank: the pair crosses the network
  bool logged_ = false;
  // Scratch, kept between calls.
  std::vector<std::vector<uint8_t>> out_;  // by peer
  std::vector<std::vector<uint8_t>> in_;   // by peer
  std::vector<float> acc_, tmp_;
  std::vector<P2pOp> ops_;
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_WIRE_H_
