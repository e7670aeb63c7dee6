// How ringo-train's ranks meet: -np forks local ranks around one unique id;
// under mpirun, srun or torchrun rank and size come from the launcher's
// environment (launch/launch_env.h, the same rules as ringo-perf) and the
// id from RINGO_COMM_ID, MASTER_ADDR/MASTER_PORT or a file in /tmp.
#ifndef RINGO_TRAINER_LAUNCH_H_
#define RINGO_TRAINER_LAUNCH_H_

#include <functional>

#include "base/status.h"
#include "ringo/ringo.h"

namespace ringo::train {

using RankMain = std::function<int(int rank, int nranks, const ringoUniqueId& id)>;

// -np N: one id (its rendezvous listener lives in this process), N forked
// ranks; 0 when all exit 0, else the first failure's status. A rank that
// dies is named by this process; the survivors report their own errors.
// With `elastic`, a rank killed by a signal does not end the others (they
// shrink and go on) and the result is theirs.
int RunLocalRanks(int nranks, const RankMain& rank_main, bool elastic = false);

// One rank started by a launcher (or alone): rank, size and id from the
// environment, then rank_main.
int RunLaunchedRank(const RankMain& rank_main);

}  // namespace ringo::train

#endif  // RINGO_TRAINER_LAUNCH_H_
