// One rank of ringo-train: loads its data, joins the communicators, trains,
// measures, and (rank 0) reports. Communication goes through
// include/ringo/ringo.h only.
#ifndef RINGO_TRAINER_TRAINER_H_
#define RINGO_TRAINER_TRAINER_H_

#include "base/status.h"
#include "ringo/ringo.h"
#include "trainer/options.h"
#include "trainer/records.h"

namespace ringo::train {

// Trains rank `rank` of `nranks` (the ranks meet through `id`). On rank 0,
// *info holds the whole run's measurements afterwards (every rank's). An
// error names the failing call and, for a peer's failure, the peer.
base::Status TrainRank(const Options& options, int rank, int nranks, const ringoUniqueId& id,
                       RunInfo* info);

// The learning rate of `step` (0-based) of `total`: the linear scaling rule
// (lr x global batch / base batch) reached after a linear warm-up from lr,
// then a cosine decay to zero, or constant.
double LearningRate(const Options& options, int global_batch, int64_t step, int64_t total,
                    int64_t steps_per_epoch);

}  // namespace ringo::train

#endif  // RINGO_TRAINER_TRAINER_H_
