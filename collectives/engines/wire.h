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
// (N-1)/N of the buffer out in each phase, in N - 1 steps of one peer each
// way (rank + s, rank - s), as a ring's links carry it. The engine runs over the
// communicator's point-to-point engine, in rounds of a bounded piece of each
// shard, so its scratch memory does not grow with the buffer; each round's
// exchange (its reduce-scatter and the previous round's all-gather, in one
// batch) runs on a thread of the engine's while the calling thread encodes
// the next round and writes out the one before.
//
// Premul-sum's scalar is applied in fp32 before compression, as avg's 1/N.
// Small fp32 all-reduces that recursive doubling is predicted to finish
// sooner go to it, exact (WireLeavesToDoubling).
// Every rank must set the same wire (as with the datatype); other calls
// (integer types, fp64, min, max, product, the other collectives) run on
// the other engines, exact.
#ifndef RINGO_COLLECTIVES_ENGINES_WIRE_H_
#define RINGO_COLLECTIVES_ENGINES_WIRE_H_

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

#include "collectives/engines/engine.h"
#include "collectives/engines/setup.h"
#include "kernels/wire.h"

namespace ringo::collectives {

// Shard q of a call: the elements [begin, begin + len) of the input that
// rank q sums (and, for reduce-scatter, receives).
struct WireShard {
  int64_t begin = 0;
  int64_t len = 0;
};

// Shard q of `args` among `nranks` ranks: for all-reduce, equal shards of
// whole kernels::kWireBlock blocks (the last ones shorter or empty); for
// reduce-scatter, rank q's part. Host and GPU ranks split alike.
WireShard WireShardOf(const kernels::CollArgs& args, int q, int nranks);

// A call's shards and the rounds that move them, `piece` elements of each
// shard a round (WireEngine::PieceElems), as both wire engines cut them.
struct WireRounds {
  std::vector<WireShard> shards;  // by rank
  int64_t piece = 0;
  int64_t rounds = 0;
  // Cuts `args` (reusing the shards' memory).
  void Cut(const kernels::CollArgs& args, int nranks, int64_t piece_elems);
  // The elements of shard q that round j moves.
  int64_t Len(int q, int64_t j) const { return std::max<int64_t>(0, std::min(piece, shards[q].len - j * piece)); }
};

// Whether the wire applies to a call of this shape: all-reduce or
// reduce-scatter of fp32, bf16 or fp16 with sum, avg or premul-sum.
bool WireApplies(const kernels::CollArgs& args);

// What rank `rank`'s input to `args` (an all-reduce or reduce-scatter the
// wire applies to) amounts to once sent in `wire`, in the input's units,
// into `out` (args.count elements of args.dtype for all-reduce, nranks
// times that for reduce-scatter): each shard bound for a rank across the
// network (`net`, by rank) rounded as the wire engines round it, the others
// copied. For error feedback.
void WireRoundContribution(const kernels::CollArgs& args, int wire, int rank, int nranks,
                           const std::vector<bool>& net, void* out);

// Whether the wire engines leave `a` to recursive doubling (exact): the
// small fp32 all-reduces it is predicted to finish sooner
// (topology::WireYieldsToDoubling; every one up to its limit under
// RINGO_ALGO=doubling), where it runs (not under RINGO_DETERMINISTIC or
// another RINGO_ALGO). bf16 and fp16 buffers keep the wire, as doubling
// would round their partial sums at every step.
bool WireLeavesToDoubling(const kernels::CollArgs& a, int wire, int nranks, const SharedSettings& settings);

// The INFO log's account of which peers a rank's contributions reach
// compressed (`net`: by rank, the pair crosses the network).
std::string WireEdgesSaid(int rank, const std::vector<char>& net, kernels::Wire wire);

// What each input value is multiplied by, in fp32, before it is encoded:
// avg's 1/N, premul-sum's scalar (from args.scalar), 1 for sum.
float WireInputScale(const kernels::CollArgs& args, int nranks);

class WireEngine : public Engine {
 public:
  // `p2p`: the communicator's point-to-point engine, which carries the
  // exchange. Built only where some pair of ranks crosses the network.
  WireEngine(const EngineSetup& setup, PointToPoint* p2p);

  const char* name() const override { return "wire"; }
  // Every call the wire applies to but those WireLeavesToDoubling.
  bool Takes(Call& call) override;
  base::Status Run(Call& call) override;
  void Abort(const base::Status&, uint64_t) override {}  // the point-to-point engine wakes its waits

  // The elements of each shard one round moves, for `nranks` ranks.
  static int64_t PieceElems(int nranks);


 private:
  void LogOnce(kernels::Wire wire);

  // Runs one batch of the point-to-point engine at a time on a thread of
  // its own.
  class Exchanger {
   public:
    explicit Exchanger(PointToPoint* p2p);
    ~Exchanger();
    // Runs `batches` in order (until one fails).
    void Start(const std::vector<std::vector<P2pOp>>* batches, P2pCall* call);
    base::Status Wait();

   private:
    void Loop();
    PointToPoint* const p2p_;
    std::mutex mu_;
    std::condition_variable cv_;
    const std::vector<std::vector<P2pOp>>* batches_ = nullptr;  // GUARDED_BY(mu_)
    P2pCall* call_ = nullptr;                  // GUARDED_BY(mu_)
    bool busy_ = false;                        // GUARDED_BY(mu_)
    bool stop_ = false;                        // GUARDED_BY(mu_)
    base::Status status_;                      // GUARDED_BY(mu_)
    std::thread thread_;
  };

  // One round's buffers, by peer (three rounds are in flight).
  struct Buffers {
    std::vector<std::vector<uint8_t>> out;       // reduce-scatter: to each peer
    std::vector<std::vector<uint8_t>> in;        // reduce-scatter: from each peer
    std::vector<uint8_t> result;                 // this rank's summed piece, in the wire
    std::vector<std::vector<uint8_t>> gathered;  // all-gather: each peer's summed piece
  };

  const int rank_;
  const int nranks_;
  PointToPoint* const p2p_;
  const SharedSettings shared_;  // the settings WireLeavesToDoubling reads
  std::vector<char> net_;  // by rank: the pair crosses the network
  bool logged_ = false;
  std::unique_ptr<Exchanger> exchanger_;  // made at the first call
  // Scratch, kept between calls.
  Buffers sets_[3];
  WireRounds cut_;  // the call's shards and rounds
  std::vector<float> acc_, tmp_, spread_;
  std::vector<std::vector<P2pOp>> steps_;  // one exchange's batches, by step
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_WIRE_H_
