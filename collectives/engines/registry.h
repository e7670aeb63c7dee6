// Every engine a communicator may run, and the one place that builds them:
// tables of factories (registry.cc), each deciding from the setup whether
// its engine applies and connecting it. A new engine is a new file and one
// line in a table: the collective engines (the communicator asks them in
// the reverse of the table's order, the most specific first, and runs the
// first that takes the call), the point-to-point engines (the first that
// applies is the communicator's), and tagged point-to-point.
#ifndef RINGO_COLLECTIVES_ENGINES_REGISTRY_H_
#define RINGO_COLLECTIVES_ENGINES_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "collectives/engines/board_state.h"
#include "collectives/engines/engine.h"
#include "collectives/engines/gpu_rank.h"
#include "collectives/engines/host_tagged.h"
#include "collectives/engines/residence.h"
#include "collectives/engines/setup.h"

namespace ringo::collectives {

struct EngineSet {
  // Where the communicator's buffers live and its calls run.
  std::unique_ptr<Residence> residence;
  std::vector<std::unique_ptr<Engine>> engines;  // in the order they are asked
  std::unique_ptr<PointToPoint> p2p;
  // Tagged point-to-point, where a rank asked for it and it applies; else
  // null, and why a tagged call is refused.
  std::unique_ptr<HostTagged> tagged;
  std::string tagged_refusal;
  // What engines share, made by the first factory that needs it.
  std::shared_ptr<BoardState> board;
  std::shared_ptr<GpuRank> gpu;

  // The engine named `name` built so far, or null (factories that wrap
  // another look it up).
  Engine* Find(const std::string& name) const;
  // Whether some engine reports errors after its call returned (GPU kernels).
  bool asynchronous() const;
  // Tells every engine's peers why this rank stops (`why`, in collective
  // `seq`) and ends this rank's waits. Any thread; does not wait.
  void Abort(const base::Status& why, uint64_t seq) const;
  // Destroys the engines (GPU engines wait for their kernels first, host
  // engines stop their threads), then point-to-point, the tagged pairs and
  // what they shared; the residence stays.
  void ReleaseEngines();
};

// Prepares the residence (residence.h), then builds and connects every
// engine that applies, then the tagged pairs where they apply: collective
// over the communicator's ranks (every rank builds the same ones in the
// same order, and a rank that failed to connect fails every rank's setup).
base::StatusOr<EngineSet> ConnectEngines(EngineSetup* setup);

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_REGISTRY_H_
