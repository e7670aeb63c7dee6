// RINGO_DETERMINISTIC on the ring, as a wrapper: a reduction runs as a
// chain in rank order (a Reduce to the last rank, which combines rank 0's
// value with rank 1's, then rank 2's..., then a Broadcast from it), so its
// result's bits do not depend on the ring's order or the channel count;
// every other collective runs on the ring as it is. The ring is the ranks
// in rank order under this setting (ChooseRing).
#ifndef RINGO_COLLECTIVES_ENGINES_ORDERED_H_
#define RINGO_COLLECTIVES_ENGINES_ORDERED_H_

#include <memory>
#include <vector>

#include "collectives/engines/engine.h"
#include "collectives/engines/host_ring.h"

namespace ringo::collectives {

class Ordered : public Engine {
 public:
  explicit Ordered(std::unique_ptr<HostRing> ring, const CommGeometry& geometry)
      : ring_(std::move(ring)), geometry_(geometry) {}

  const char* name() const override { return "ordered ring"; }
  bool Takes(Call& call) override { return true; }
  base::Status Run(Call& call) override;
  void Abort(const base::Status& why, uint64_t seq) override { ring_->Abort(why, seq); }

 private:
  std::unique_ptr<HostRing> ring_;
  const CommGeometry geometry_;
  std::vector<char> scratch_;  // the full result where a rank's output holds less of it
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_ORDERED_H_
