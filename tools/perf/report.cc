#include "tools/perf/report.h"

#include <cstdarg>

namespace ringo::perf {
namespace {

std::string Printf(const char* format, ...) __attribute__((format(printf, 1, 2)));

std::string Printf(const char* format, ...) {
  char buf[512];
  va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(buf, sizeof(buf), format, args);
  va_end(args);
  if (n < 0) return std::string();
  if (static_cast<size_t>(n) < sizeof(buf)) return std::string(buf, n);
  std::string big(static_cast<size_t>(n) + 1, '\0');
  va_start(args, format);
  std::vsnprintf(big.data(), big.size(), format, args);
  va_end(args);
  big.resize(n);
  return big;
}

std::string WrongText(int64_t wrong) {
  return wrong < 0 ? std::string("N/A") : std::to_string(wrong);
}

std::string FormatMeasurement(const Measurement& m) {
  if (!m.measured) return Printf("  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
  return Printf("  %7s  %6.2f  %6.2f  %5s", FormatTime(m.time_us).c_str(), m.algbw, m.busbw,
                WrongText(m.wrong).c_str());
}

std::string CsvMeasurement(const Measurement& m) {
  if (!m.measured) return ",,,,";
  return Printf(",%.3f,%.6f,%.6f,%s", m.time_us, m.algbw, m.busbw, WrongText(m.wrong).c_str());
}

// Empty where there is no figure (percentiles without --median).
std::string CsvOptionalTime(double time_us) {
  return time_us < 0 ? std::string(",") : Printf(",%.3f", time_us);
}

// nccl-tests' first line; nThread/nGpus/agg iters/graph are fixed here (one
// rank per process, no aggregation, no CUDA graphs) but kept for parsers.
std::string ParametersLine(const Options& o) {
  const bool factor = o.step_factor > 1;
  return Printf(
      "# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
      "agg iters: 1 validation: %d graph: 0\n",
      o.min_bytes, o.max_bytes, factor ? o.step_factor : o.step_bytes, factor ? "factor" : "bytes",
      o.warmup_iters, o.iters, o.check ? 1 : 0);
}

// Figures come with the machine and the build that made them.
std::string MachineLines(const Options& o, const RunInfo& info) {
  return Printf("# %s, %s %s, build %s, %d ranks, %s\n", info.library.c_str(),
                info.program.c_str(), CollectiveName(o.collective), info.build_mode.c_str(),
                info.nranks, info.host_memory ? "host memory" : "device memory") +
         Printf("# Machine: %s, %d cores\n", info.hostname.c_str(), info.cores);
}

const char* AverageText(Average a) {
  switch (a) {
    case Average::kRank0: return "rank 0's";
    case Average::kMean: return "the mean";
    case Average::kMin: return "the min";
    case Average::kMax: return "the max";
  }
  return "?";
}

// What the time column is, since --median changes it.
std::string TimeLine(const Options& o, const RunInfo& info) {
  std::string per_rank =
      o.graph_launches > 0
          ? (o.median ? Printf("median over %d launches of a CUDA graph of %d iterations, divided by %d "
                               "(p10, p90 and mean in the CSV)",
                               o.graph_launches, o.iters, o.iters)
                      : Printf("mean of %d back-to-back launches of a CUDA graph of %d iterations, per iteration",
                               o.graph_launches, o.iters))
      : o.median ? Printf("median of %d one-iteration timings (p10, p90 and mean in the CSV)", o.iters)
                 : Printf("mean of %d back-to-back iterations", o.iters);
  // GPU: CUDA events recorded on the rank's stream around the batch (or each
  // iteration); host: the wall clock around calls that return when done.
  const char* clock = info.host_memory ? "" : ", from CUDA events on each rank's stream";
  return Printf("# Time: per rank the %s after %d warm-up%s; over ranks %s (-a %d)\n",
                per_rank.c_str(), o.warmup_iters, clock, AverageText(o.average),
                static_cast<int>(o.average));
}

std::string DeviceLines(const RunInfo& info) {
  std::string out = "# Using devices\n";
  for (const RankInfo& r : info.ranks) {
    // nccl-tests: "device  0 [0000:07:00.0] NVIDIA H100 80GB HBM3".
    const std::string where = r.cuda_device < 0  ? "[host memory]"
                              : r.device.empty() ? "[cuda]"
                                                 : r.device;
    out += Printf("#  Rank %2d Group %2d Pid %6d on %10s device %2d %s\n", r.rank, 0, r.pid,
                  r.hostname.c_str(), r.cuda_device, where.c_str());
  }
  return out;
}

std::string ColumnTitles() {
  return Printf(
             "# %10s  %12s  %8s  %6s  %6s           out-of-place                       "
             "in-place          \n",
             "", "", "", "", "") +
         Printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size",
                "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
                "algbw", "busbw", "#wrong") +
         Printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
                "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                "(GB/s)", "");
}

}  // namespace

std::string FormatTime(double time_us) {
  if (time_us >= 10000.0) return Printf("%7.0f", time_us);
  if (time_us >= 100.0) return Printf("%7.1f", time_us);
  return Printf("%7.2f", time_us);
}

std::string FormatHeader(const Options& options, const RunInfo& info) {
  return ParametersLine(options) + "#\n" + MachineLines(options, info) + TimeLine(options, info) +
         "#\n" + DeviceLines(info) + "#\n" + ColumnTitles();
}

std::string FormatRow(const Row& row) {
  return Printf("%12zu  %12zu  %8s  %6s  %6d", row.bytes, row.count, row.type.c_str(),
                row.redop.c_str(), row.root) +
         FormatMeasurement(row.out_of_place) + FormatMeasurement(row.in_place) +
         (row.wire_fraction > 0 && row.out_of_place.measured ? Printf("  %6.2f", row.out_of_place.busbw * row.wire_fraction)
                                                              : std::string()) +
         "\n";
}

std::string FormatFooter(int64_t out_of_bounds, double avg_busbw) {
  return Printf("# Out of bounds values : %lld %s\n", static_cast<long long>(out_of_bounds),
                out_of_bounds ? "FAILED" : "OK") +
         Printf("# Avg bus bandwidth    : %g\n", avg_busbw) + "#\n";
}

std::string CsvHeader() {
  return "size,count,type,redop,root,"
         "time_us,algbw_gbs,busbw_gbs,wrong,"
         "inplace_time_us,inplace_algbw_gbs,inplace_busbw_gbs,inplace_wrong,"
         "time_p10_us,time_p90_us,inplace_time_p10_us,inplace_time_p90_us,"
         "time_mean_us,inplace_time_mean_us\n";
}

// The percentiles and means go last so that readers of the first 13 columns are unaffected.
std::string CsvRow(const Row& row) {
  return Printf("%zu,%zu,%s,%s,%d", row.bytes, row.count, row.type.c_str(), row.redop.c_str(),
                row.root) +
         CsvMeasurement(row.out_of_place) + CsvMeasurement(row.in_place) +
         CsvOptionalTime(row.out_of_place.time_p10_us) +
         CsvOptionalTime(row.out_of_place.time_p90_us) +
         CsvOptionalTime(row.in_place.time_p10_us) + CsvOptionalTime(row.in_place.time_p90_us) +
         CsvOptionalTime(row.out_of_place.time_mean_us) + CsvOptionalTime(row.in_place.time_mean_us) + "\n";
}

const char* BuildMode() {
#if defined(__OPTIMIZE__) && defined(NDEBUG)
  return "opt";
#elif defined(__OPTIMIZE__)
  return "opt+asserts";
#else
  return "unoptimized";
#endif
}

void Reporter::Header(const Options& options, const RunInfo& info) {
  if (!is_main_) return;
  std::fputs(FormatHeader(options, info).c_str(), stdout);
  std::fflush(stdout);
}

void Reporter::Note(const std::string& text) {
  if (!is_main_) return;
  std::printf("# %s\n", text.c_str());
  std::fflush(stdout);
}

void Reporter::AddRow(const Row& row) {
  for (const Measurement* m : {&row.out_of_place, &row.in_place}) {
    if (!m->measured) continue;
    busbw_sum_ += m->busbw;
    ++busbw_count_;
  }
  if (!is_main_) return;
  std::fputs(FormatRow(row).c_str(), stdout);
  for (const Measurement* m : {&row.out_of_place, &row.in_place}) {
    if (!m->measured || m->cuda_calls.empty()) continue;
    std::fprintf(stdout, "#  CUDA runtime calls, %zu B %s: %s\n", row.bytes,
                 m == &row.out_of_place ? "out of place" : "in place", m->cuda_calls.c_str());
  }
  std::fflush(stdout);  // a row as soon as it is measured, even when piped
  if (csv_ != nullptr) {
    std::fputs(CsvRow(row).c_str(), csv_);
    std::fflush(csv_);
  }
}

void Reporter::Footer(int64_t out_of_bounds) {
  if (!is_main_) return;
  const double avg = busbw_count_ ? busbw_sum_ / busbw_count_ : 0.0;
  std::fputs(FormatFooter(out_of_bounds, avg).c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace ringo::perf
