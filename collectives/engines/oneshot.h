// The one-shot engine: small collectives among the ranks of one memory
// domain in a single exchange over the board (kernels/oneshot_executor.h), for
// the calls the planner sends there (PlanCollective: kOneShot).
#ifndef RINGO_COLLECTIVES_ENGINES_ONESHOT_H_
#define RINGO_COLLECTIVES_ENGINES_ONESHOT_H_

#include <memory>

#include "collectives/engines/engine.h"
#include "collectives/engines/board_state.h"
#include "collectives/engines/setup.h"

namespace ringo::collectives {

class OneShot : public Engine {
 public:
  OneShot(const EngineSetup& setup, std::shared_ptr<BoardState> board)
      : rank_(setup.rank), nranks_(setup.nranks), geometry_(setup.host), board_(std::move(board)) {}

  const char* name() const override { return "one-shot"; }
  bool Takes(Call& call) override {
    return HostPlan(call, nranks_, geometry_).algorithm == Algorithm::kOneShot;
  }
  base::Status Run(Call& call) override;
  void Abort(const base::Status& why, uint64_t seq) override { board_->board.WakeAll(); }

 private:
  const int rank_;
  const int nranks_;
  const CommGeometry geometry_;
  std::shared_ptr<BoardState> board_;
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_ONESHOT_H_
