// ringo-perf's output, in nccl-tests' layout so that scripts written for
// all_reduce_perf read it unchanged: '#' header lines, one row per size with
// out-of-place and in-place columns, a '#' footer. The format functions are
// pure; Reporter prints them on rank 0 and mirrors rows into a CSV file.
#ifndef RINGO_TOOLS_PERF_REPORT_H_
#define RINGO_TOOLS_PERF_REPORT_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "tools/perf/options.h"

namespace ringo::perf {

// One timed run (out-of-place or in-place) of one size.
struct Measurement {
  bool measured = true;  // false: not run (--no-inplace); printed as N/A
  double time_us = 0;    // per iteration: the mean, or with --median the median
  double algbw = 0;    // GB/s (1e9 bytes)
  double busbw = 0;    // GB/s
  int64_t wrong = -1;  // elements wrong over all ranks; -1 when not checked
  // --median: 10th and 90th percentiles of the per-iteration times; -1 otherwise.
  double time_p10_us = -1;
  double time_p90_us = -1;
  // --median: the mean of the same per-iteration times; -1 otherwise (the
  // time column is the mean then).
  double time_mean_us = -1;
  // --cuda-calls: rank 0's CUDA runtime calls per timed call, described
  // (base::DescribeCudaCalls); "" otherwise.
  std::string cuda_calls;
};

struct Row {
  size_t bytes = 0;
  size_t count = 0;
  std::string type;   // nccl-tests' name: "float", "half", ...
  std::string redop;  // "sum"..., or "none"
  int root = -1;      // -1 for collectives without one
  Measurement out_of_place;
  Measurement in_place;
  // --wire: the fraction of busbw's bytes the network carried for this row
  // (printed as a last column, wirebw); 0 where no wire applies.
  double wire_fraction = 0;
};

// One rank's line under "# Using devices", gathered from every rank.
struct RankInfo {
  int rank = 0;
  int pid = 0;
  int cuda_device = -1;
  std::string hostname;
  std::string device;  // a GPU's "[bus id] name" (Backend::DeviceDescription); "" on host
};

// What the header says besides the options.
struct RunInfo {
  int nranks = 1;
  std::string library;                 // "Ringo 0.1.2", "Open MPI v4.1.4"
  std::string program = "ringo-perf";  // the tool, as its header names it
  std::string hostname;                // of rank 0
  int cores = 0;          // online CPUs of rank 0's host
  std::string build_mode;
  bool host_memory = true;
  std::vector<RankInfo> ranks;
};

// nccl-tests' time column: 2 decimals below 100 us, 1 below 10 ms, 0 above.
std::string FormatTime(double time_us);
// The whole header: the nThread line, library, machine and build, how the
// time is taken, devices, column titles.
std::string FormatHeader(const Options& options, const RunInfo& info);
std::string FormatRow(const Row& row);
std::string FormatFooter(int64_t out_of_bounds, double avg_busbw);
std::string CsvHeader();
std::string CsvRow(const Row& row);

// The build this binary was compiled in: "opt", "opt+asserts" or "unoptimized".
const char* BuildMode();

// Prints on rank 0 only (every method is a no-op elsewhere); keeps the
// bus-bandwidth average of the footer. Rows also go to `csv` when it is not
// NULL (opened, given its CsvHeader and closed by the caller).
class Reporter {
 public:
  Reporter(bool is_main, std::FILE* csv) : is_main_(is_main), csv_(csv) {}

  void Header(const Options& options, const RunInfo& info);
  // A '#' line among the rows ("half sum: skipped: ...").
  void Note(const std::string& text);
  void AddRow(const Row& row);
  void Footer(int64_t out_of_bounds);

 private:
  bool is_main_;
  std::FILE* csv_;
  double busbw_sum_ = 0;
  int busbw_count_ = 0;
};

}  // namespace ringo::perf

#endif  // RINGO_TOOLS_PERF_REPORT_H_
