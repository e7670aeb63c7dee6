#include "trainer/ring_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "trainer/comm.h"

namespace ringo::train {

double RingModel::PredictMs(double bytes, int nranks) const {
  if (nranks <= 1 || !valid) return 0;
  const double steps = 2.0 * (nranks - 1);
  return steps * (alpha_us * 1e-3 + bytes / (nranks * beta_gbs * 1e9) * 1e3);
}

double RingModel::PredictDoublingMs(double bytes, int nranks) const {
  if (nranks <= 1 || !valid) return 0;
  int pow2 = 1, rounds = 0;
  while (pow2 * 2 <= nranks) {
    pow2 *= 2;
    ++rounds;
  }
  const double steps = rounds + (pow2 != nranks ? 2 : 0);
  return steps * (alpha_us * 1e-3 + bytes / (beta_gbs * 1e9) * 1e3);
}

RingModel FitRingModel(const std::vector<CalibrationPoint>& points, int nranks) {
  RingModel m;
  if (points.size() < 2 || nranks < 2) return m;
  // Minimise sum (a + b S - t)^2: the sizes that cost most are fitted best
  // (relative errors would let a size that runs from the caches, many
  // times faster per byte, pull the line off the ones that stream from memory).
  double sw = 0, ss = 0, sss = 0, st = 0, sst = 0;
  for (const CalibrationPoint& p : points) {
    const double w = 1.0;
    sw += w;
    ss += w * p.bytes;
    sss += w * p.bytes * p.bytes;
    st += w * p.ms;
    sst += w * p.bytes * p.ms;
  }
  const double det = sw * sss - ss * ss;
  double a = det != 0 ? (sss * st - ss * sst) / det : 0;
  double b = det != 0 ? (sw * sst - ss * st) / det : 0;
  if (a < 0 || det == 0) {  // through the origin
    a = 0;
    b = sst / sss;
  }
  if (!(b > 0)) return m;
  const double steps = 2.0 * (nranks - 1);
  m.alpha_us = a / steps * 1e3;
  m.beta_gbs = steps / (nranks * b) * 1e-6;  // b in ms per byte
  m.valid = true;
  return m;
}

double MaxFitError(const RingModel& model, const std::vector<CalibrationPoint>& points,
                   int nranks) {
  double worst = 0;
  for (const CalibrationPoint& p : points) {
    worst = std::max(worst, std::fabs(model.PredictMs(p.bytes, nranks) / p.ms - 1));
  }
  return worst;
}

std::vector<size_t> CalibrationSizes(const std::vector<size_t>& bucket_bytes, size_t elem_bytes) {
  std::vector<size_t> sizes;
  const size_t cap = size_t{256} << 20;
  size_t largest = 0;
  for (size_t b : bucket_bytes) largest = std::max(largest, b);
  const size_t top = std::min(cap, std::max<size_t>(largest, size_t{4} << 20));
  for (size_t s = size_t{256} << 10;; s *= 4) {
    sizes.push_back(std::min(s, cap));
    if (s >= top || s >= cap) break;
  }
  for (size_t b : bucket_bytes) {
    if (b >= (size_t{256} << 10)) sizes.push_back(std::min(b, cap) / elem_bytes * elem_bytes);
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

std::vector<CalibrationPoint> SelectFitPoints(const std::vector<CalibrationPoint>& points,
                                              const std::vector<size_t>& bucket_bytes, double* lo,
                                              double* hi) {
  constexpr double kMiB = 1048576.0;
  double small = 0, large = 0;
  for (size_t b : bucket_bytes) {
    if (b < kMiB) continue;
    small = small == 0 ? b : std::min(small, static_cast<double>(b));
    large = std::max(large, static_cast<double>(b));
  }
  auto within = [&](double from, double to) {
    std::vector<CalibrationPoint> out;
    for (const CalibrationPoint& p : points) {
      if (p.bytes >= from * 0.999 && p.bytes <= to * 1.001) out.push_back(p);
    }
    *lo = from;
    *hi = to;
    return out;
  };
  std::vector<CalibrationPoint> fit;
  if (large > 0) {
    fit = within(small, large);
    if (fit.size() < 3) fit = within(std::max(kMiB, small / 4), large * 4);
  }
  if (fit.size() < 2) fit = within(kMiB, 1e300);
  if (fit.size() < 2) fit = within(0, 1e300);
  if (!fit.empty()) {
    *lo = fit.front().bytes;
    *hi = fit.back().bytes;
  }
  return fit;
}

base::StatusOr<std::vector<CalibrationPoint>> Calibrate(ringoComm_t comm, ringoComm_t meta_comm,
                                                        ringoDataType_t dtype, size_t dtype_bytes,
                                                        const std::vector<size_t>& sizes,
                                                        Compute* device, Compute::Stream stream) {
  const size_t largest = *std::max_element(sizes.begin(), sizes.end());
  void* buf = nullptr;
  if (device != nullptr) {
    buf = device->AllocBytes(largest);
  } else {
    RETURN_IF_ERROR(RingoCall(ringoMemAlloc(&buf, largest), "ringoMemAlloc", nullptr));
  }
  // Three sweeps, each size after a barrier; per size the median of a
  // sweep's calls, then the fastest sweep's: a rank switched out for a
  // scheduler slice (other work on a shared machine) spoils one sweep, not the fit.
  std::vector<CalibrationPoint> points(sizes.size());
  std::vector<double> times;
  base::Status status;
  for (int sweep = 0; sweep < 3 && status.ok(); ++sweep) {
    for (size_t k = 0; k < sizes.size() && status.ok(); ++k) {
      const size_t count = sizes[k] / dtype_bytes;
      // About 64 MiB moved per size, at least 5 and at most 40 timed calls.
      const int iters = static_cast<int>(std::clamp<size_t>((size_t{64} << 20) / sizes[k], 5, 40));
      double barrier = 0;
      status = AllReduceDoubles(meta_comm, &barrier, 1, ringoSum);
      times.clear();
      for (int i = -2; i < iters && status.ok(); ++i) {
        const auto start = std::chrono::steady_clock::now();
        status = RingoCall(ringoAllReduce(buf, buf, count, dtype, ringoAvg, comm, stream),
                           "calibration ringoAllReduce", comm);
        if (device != nullptr && status.ok()) {
          device->Synchronize(stream);
          status = device->Error();
        }
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        if (i >= 0) times.push_back(ms);
      }
      if (!status.ok()) break;
      std::sort(times.begin(), times.end());
      const double median = times[times.size() / 2];
      points[k].bytes = static_cast<double>(count * dtype_bytes);
      points[k].ms = sweep == 0 ? median : std::min(points[k].ms, median);
    }
  }
  if (device != nullptr) {
    device->FreeBytes(buf);
  } else {
    (void)ringoMemFree(buf);
  }
  RETURN_IF_ERROR(status);
  std::vector<double> ms(points.size());
  for (size_t i = 0; i < points.size(); ++i) ms[i] = points[i].ms;
  RETURN_IF_ERROR(AllReduceDoubles(meta_comm, ms.data(), ms.size(), ringoMax));
  for (size_t i = 0; i < points.size(); ++i) points[i].ms = ms[i];
  return points;
}

}  // namespace ringo::train
