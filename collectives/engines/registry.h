// Every engine a communicator may run, and the one place that builds them:
// a table of factories (registry.cc), each deciding from the setup whether
// its engine applies and connecting it. A new engine is a new file and one
// line in that table; the communicator asks the engines in the reverse of
// the table's order, the most specific first, and runs the first that takes
// the call.
#ifndef RINGO_COLLECTIVES_ENGINES_REGISTRY_H_
#define RINGO_COLLECTIVES_ENGINES_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "collectives/engine.h"
#include "collectives/engines/board_state.h"
#include "collectives/engines/gpu_rank.h"
#include "collectives/engines/setup.h"

namespace ringo::collectives {

struct EngineSet {
  std::vector<std::unique_ptr<Engine>> engines;  // in the order they are asked
  std::unique_ptr<PointToPoint> p2p;
  // What engines share, made by the first factory that needs it.
  std::shared_ptr<BoardState> board;
  std::shared_ptr<GpuRank> gpu;

  // The engine named `name` built so far, or null (factories that wrap
  // another look it up).
  Engine* Find(const std::string& name) const;
};

// Builds and connects every engine that applies (collective over the
// communicator's ranks: every rank builds the same ones in the same order).
base::StatusOr<EngineSet> ConnectEngines(const EngineSetup& setup);

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_REGISTRY_H_
