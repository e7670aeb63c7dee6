// ringo-train's tables (per rank, per bucket, calibration, summary), its CSV
// and the numbers the summary is made of.
#ifndef RINGO_TRAINER_REPORT_H_
#define RINGO_TRAINER_REPORT_H_

#include <cstdio>
#include <string>
#include <vector>

#include "base/status.h"
#include "trainer/predict.h"
#include "trainer/records.h"

namespace ringo::train {

// Steps left out of the averages: the first few (caches, page faults,
// the first direct all-reduce mapping its peers' buffers).
int WarmupSteps(int64_t steps);

struct RankSummary {
  double data_ms = 0, fwd_ms = 0, bwd_ms = 0, exposed_ms = 0, opt_ms = 0, step_ms = 0;
};
// Means over the steps after the warm-up.
RankSummary Summarise(const std::vector<StepRecord>& steps);

struct BucketSummary {
  double bytes = 0;  // on the wire
  double ready_ms = 0, start_ms = 0, wait_ms = 0, allreduce_ms = 0,
         convert_ms = 0;  // medians, slowest rank
  double model_ms = 0;
};
std::vector<BucketSummary> SummariseBuckets(const RunInfo& info);

// Samples per second of the run: the global batch over the slowest rank's mean step.
double Throughput(const RunInfo& info);

void PrintReport(const RunInfo& info, FILE* out);
// The what-if inputs measured by this run (its compute, its buckets, the fit as the link).
PredictInput MeasuredPredictInput(const RunInfo& info);

// One CSV for any number of runs: a row per step and rank, per bucket, step
// and rank, per evaluation, and per calibration size.
base::Status WriteCsv(const std::string& path, const std::vector<const RunInfo*>& runs);

}  // namespace ringo::train

#endif  // RINGO_TRAINER_REPORT_H_
