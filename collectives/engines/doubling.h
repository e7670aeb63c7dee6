// The recursive-doubling engine: small all-reduces across hosts in
// ceil(log2 N) exchanges instead of the ring's 2(N - 1) steps, over the
// communicator's point-to-point engine.
//
// With p the largest power of two not above N, the first 2(N - p) ranks
// pair up (even to odd) so that p ranks remain; in round k each remaining
// rank swaps its whole partial result with the rank whose index differs in
// bit k and combines the two, lower rank's first, so both hold the same
// bits; the odd ranks of the pairs hand the result back to their partners.
// t = (log2 p + 2 [N != p]) (alpha + S / beta) against the ring's
// 2(N - 1)(alpha + S / (N beta)): asked before the host engines where some
// pair of ranks crosses the network, it takes an all-reduce whose size the
// cost model (topology/cost_model.h) says runs faster this way, up to
// kMaxBytes, 256 KiB (RINGO_ALGO=doubling: every all-reduce up to kMaxBytes;
// ring, oneshot, direct: none; RINGO_DETERMINISTIC: none, whose results
// keep the ring's rank order).
//
// Where hosts hold several ranks, the all-reduce is hierarchical: each
// host's lowest rank combines its local ranks' inputs, the leaders run the
// doubling, and each sends the result back (HierarchicalSteps).
//
// Small all-gathers across hosts go the same way, by Bruck's algorithm:
// ceil(log2 N) steps for any N, at step k each rank sending the min(2^k,
// N - 2^k) blocks it holds to rank - 2^k and receiving as many from rank +
// 2^k, then rotating them into place: every rank moves (N - 1)/N of the
// output, as on the ring, in ceil(log2 N) steps instead of N - 1, so it is
// taken from 4 ranks up (at 2 and 3 the step counts are equal), for outputs
// up to kMaxBytes (RINGO_ALGO=doubling: from 2 ranks).
//
// Small reduce-scatters by recursive halving: the first 2(N - p) ranks fold
// in as for the all-reduce (each even one hands its whole input to the odd
// one after it, which then holds both ranks' blocks); the p remaining ranks
// halve their range of blocks log2 p times, each step sending the half they
// do not keep to the rank whose index differs in that bit and combining the
// half they keep with what arrives; the odd ranks of the pairs then send
// their partners' blocks. log2 p steps, 2 more where N is not a power of
// two, against the ring's N - 1: taken where that is fewer (4, 6, 7, 8
// ranks and up; RINGO_ALGO=doubling: from 2), inputs up to kMaxBytes.
//
// Each message carries the call's signature before its data, so ranks that
// called different collectives fail naming both calls.
#ifndef RINGO_COLLECTIVES_ENGINES_DOUBLING_H_
#define RINGO_COLLECTIVES_ENGINES_DOUBLING_H_

#include <cstdint>
#include <vector>

#include "collectives/engines/doubling_plan.h"
#include "collectives/engines/engine.h"
#include "collectives/engines/setup.h"
#include "topology/cost_model.h"

namespace ringo::collectives {

// Whether recursive doubling runs on a communicator with these settings
// (RINGO_ALGO unset or doubling, not under RINGO_DETERMINISTIC).
inline bool DoublingRuns(const SharedSettings& s) {
  return s.deterministic == 0 && (s.algorithm == Algorithm::kAuto || s.algorithm == Algorithm::kDoubling);
}

class Doubling : public Engine {
 public:
  // The largest all-reduce it takes, in bytes (the model's limit).
  static constexpr int64_t kMaxBytes = static_cast<int64_t>(topology::kDoublingMaxBytes);

  // `p2p`: the communicator's point-to-point engine, which carries the
  // exchanges. Built only for host communicators where some pair of ranks
  // crosses the network.
  Doubling(const EngineSetup& setup, PointToPoint* p2p);

  const char* name() const override { return "recursive doubling"; }
  bool Takes(Call& call) override;
  base::Status Run(Call& call) override;
  void Abort(const base::Status&, uint64_t) override {}  // the point-to-point engine wakes its waits

 private:
  // Swaps `bytes` of `mine` with `peer` (or only sends, or only receives)
  // behind the call's signature; the peer's data in `theirs_`.
  base::Status Swap(Call& call, int peer, bool send, bool recv, const void* mine, size_t bytes);
  // Sends `send_bytes` of `mine` to `to` and receives `recv_bytes` from
  // `from` (-1: none) at once, each behind the call's signature.
  base::Status Exchange(Call& call, int to, const void* mine, size_t send_bytes, int from, size_t recv_bytes);
  base::Status RunAllReduce(Call& call);
  base::Status RunAllGather(Call& call);
  base::Status RunReduceScatter(Call& call);

  const int rank_;
  const int nranks_;
  const bool forced_;   // RINGO_ALGO=doubling
  const bool enabled_;  // not RINGO_DETERMINISTIC, no other RINGO_ALGO
  // Every rank's memory domain (its host); hierarchical_ where some host
  // holds several ranks and there are several hosts: all-reduces then run
  // HierarchicalSteps (doubling_plan.h), the leaders' doubling alone on the network.
  std::vector<int> hosts_;
  bool hierarchical_ = false;
  std::vector<DoublingStep> steps_;  // this rank's all-reduce steps
  bool logged_ = false, logged_gather_ = false, logged_scatter_ = false;
  double alpha_us_ = 0, beta_gbps_ = 0;  // a network step
  PointToPoint* p2p_;
  std::vector<char> out_, theirs_;  // a message out and in: signature, then data
  std::vector<char> blocks_;        // an all-gather's blocks in Bruck's order; a reduce-scatter's partial sums
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_DOUBLING_H_
