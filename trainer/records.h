// What a run measures: per step and rank, per bucket and step, and the
// evaluations; plain data shared by the training loop and the report.
#ifndef RINGO_TRAINER_RECORDS_H_
#define RINGO_TRAINER_RECORDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/grad_sync.h"
#include "trainer/ring_model.h"

namespace ringo::train {

// One step of one rank. Sent between ranks as kFields doubles.
struct StepRecord {
  double step = 0, epoch = 0;
  double data_ms = 0;     // gathering and normalising the shard
  double fwd_ms = 0;      // forward passes (and the loss)
  double bwd_ms = 0;      // backward passes (all-reduces overlapping them included)
  double exposed_ms = 0;  // waiting for the all-reduces after the backward pass
  double opt_ms = 0;      // the optimizer step
  double step_ms = 0;     // all of it
  double loss = 0;        // this rank's mean loss over its samples of the step
  double acc = 0;         // this rank's training accuracy over them
  double lr = 0;
  static constexpr int kFields = 11;
  void ToDoubles(double* out) const;
  void FromDoubles(const double* in);
};

// One evaluation (the same on every rank).
struct EvalRecord {
  int64_t step = 0;
  int epoch = 0;
  double test_acc = 0;
  double train_loss = 0;  // mean over the ranks' samples since the last evaluation
  double train_acc = 0;
};

struct RunInfo {
  std::string name;  // "2 ranks" / "1 rank (baseline)"
  int nranks = 1;
  int global_batch = 0, micro = 0, accum = 1;
  std::string model;
  size_t params = 0;
  std::string compute;
  GradDtype grad_dtype = GradDtype::kFp32;
  int wire = 0;  // a ringoWire_t (--wire)
  bool error_feedback = false;
  bool overlap = true;
  bool sync_bn = false;
  std::vector<Bucket> buckets;
  std::vector<CalibrationPoint> calibration;
  RingModel fit;
  double fit_error = 0;
  double fit_lo = 0, fit_hi = 0;  // the sizes fitted (bytes)
  double baseline_sps = 0;        // 1-rank samples/s of the same global batch, if known
  int64_t steps = 0;
  double final_test_acc = -1;
  double wall_s = 0;
  // Gathered from every rank: steps[rank][i], and bucket timings
  // bucket_times[rank][i * buckets + b].
  std::vector<std::vector<StepRecord>> rank_steps;
  std::vector<std::vector<BucketTiming>> rank_buckets;
  std::vector<EvalRecord> evals;
  // --elastic: what each recovery did ("step 40: rank 2 lost; 3 ranks go on
  // from step 40, 12.3 ms"), and this process's rank at the end (the one
  // that reports is the final rank 0).
  std::vector<std::string> recoveries;
  int final_rank = 0;
};

}  // namespace ringo::train

#endif  // RINGO_TRAINER_RECORDS_H_
