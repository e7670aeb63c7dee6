// The ring all-reduce cost model t = 2(N-1)(alpha + S/(N beta)), its fit to
// measured (size, time) points, and the calibration that measures them over
// the public API.
#ifndef RINGO_TRAINER_RING_MODEL_H_
#define RINGO_TRAINER_RING_MODEL_H_

#include <cstddef>
#include <string>
#include <vector>

#include "base/status.h"
#include "trainer/compute.h"
#include "ringo/ringo.h"

namespace ringo::train {

struct RingModel {
  double alpha_us = 0;  // per step
  double beta_gbs = 0;  // GB/s (1e9 bytes) per direction
  bool valid = false;
  // Predicted all-reduce time of `bytes` over `nranks` ranks, in ms (0 for one rank).
  double PredictMs(double bytes, int nranks) const;
  // The same on the same links by recursive doubling (Ringo's small
  // all-reduces across hosts, docs/network.md): with p the largest power of
  // two not above N, (log2 p + 2 [N != p]) (alpha + S / beta).
  double PredictDoublingMs(double bytes, int nranks) const;
};

struct CalibrationPoint {
  double bytes = 0;
  double ms = 0;  // median per call, slowest rank
};

// Least squares of t = a + b S over the points, turned
// into alpha = a / (2(N-1)), beta = 2(N-1) / (N b). Needs two sizes; a
// negative intercept is clamped to 0 (the fit is then redone for b alone).
RingModel FitRingModel(const std::vector<CalibrationPoint>& points, int nranks);
// Largest |predicted / measured - 1| over the points.
double MaxFitError(const RingModel& model, const std::vector<CalibrationPoint>& points, int nranks);

// Times ringoAllReduce (avg, `dtype`) of every size in `sizes` (bytes) on
// `comm`, on ringoMemAlloc buffers as the gradients are (with `device`: on
// its memory, each call queued on `stream` and waited for), with a warm-up;
// the median per size, then the slowest rank's (a max over `meta_comm`, a
// host communicator). Collective over both communicators.
base::StatusOr<std::vector<CalibrationPoint>> Calibrate(ringoComm_t comm, ringoComm_t meta_comm,
                                                        ringoDataType_t dtype, size_t dtype_bytes,
                                                        const std::vector<size_t>& sizes,
                                                        Compute* device = nullptr,
                                                        Compute::Stream stream = nullptr);

// The calibration sizes for buckets of `bucket_bytes` (on the wire): powers
// of 4 from 256 KiB to at least 4 MiB and past the largest bucket (at most
// 256 MiB), and every bucket's own size from 256 KiB up, each a multiple of
// `elem_bytes`, ascending.
std::vector<size_t> CalibrationSizes(const std::vector<size_t>& bucket_bytes, size_t elem_bytes);

// The points the model is fitted to: those in the range of the buckets of
// 1 MiB and more (a message that fits the caches runs much faster than one
// that streams from memory, which a straight line cannot follow, so the fit
// keeps to the sizes it predicts); widened to a quarter below and four times
// above when that leaves fewer than 3, then every size from 1 MiB, then all.
// *lo and *hi: the range fitted.
std::vector<CalibrationPoint> SelectFitPoints(const std::vector<CalibrationPoint>& points,
                                              const std::vector<size_t>& bucket_bytes, double* lo,
                                              double* hi);

}  // namespace ringo::train

#endif  // RINGO_TRAINER_RING_MODEL_H_
