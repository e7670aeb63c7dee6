// The planner: FIFO geometry at init and, per collective, how many channels
// run and how large each chunk is. Pure functions of their inputs, so every
// rank computes the same plan.
#ifndef RINGO_COLLECTIVES_PLANNER_H_
#define RINGO_COLLECTIVES_PLANNER_H_

#include <cstdint>

#include "base/config.h"
#include "kernels/host_executor.h"

namespace ringo::collectives {

struct CommGeometry {
  int nchannels = 1;       // channels connected at init
  int64_t slot_bytes = 0;  // FIFO slot size
  int spin_count = 0;      // polls before sleeping
  bool fixed_channels = false;  // RINGO_NCHANNELS set: every collective uses them all
};

// Chosen at init from the configuration, the rank counts and the cores.
CommGeometry ChooseGeometry(const base::Config& config, int nranks, int local_ranks, int cores);

struct CollPlan {
  int nchannels = 1;        // channels this collective uses (<= geometry's)
  int64_t slice_bytes = 0;  // chunk size (<= slot size, a multiple of 64)
};

CollPlan PlanCollective(const kernels::CollArgs& args, int nranks, const CommGeometry& geometry);

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_PLANNER_H_
