// What every benchmark program (ringo-perf, the peers of bench/peers) does
// around RunBenchmark: usage errors, the CSV file, checking its flags against
// what its library runs, and one rank's run with its exit status.
#ifndef RINGO_TOOLS_PERF_DRIVER_H_
#define RINGO_TOOLS_PERF_DRIVER_H_

#include <cstdio>
#include <memory>
#include <string>

#include "base/status.h"
#include "tools/perf/backend.h"
#include "tools/perf/communicator.h"
#include "tools/perf/options.h"

namespace ringo::perf {

// Exit statuses: 0 all right, 1 wrong results or a failure, 2 bad usage.
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Prints "<program>: <message>" and a --help hint to stderr; returns kExitUsage.
int UsageError(const std::string& program, const std::string& message);

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using CsvFile = std::unique_ptr<std::FILE, FileCloser>;

// Opens --csv FILE and writes its header; an empty path gives a null file.
// Open it before any rank starts, so a bad path is a usage error and not a
// rank 0 failure that leaves the others waiting in a collective.
base::StatusOr<CsvFile> OpenCsv(const std::string& path);

// OK when `supports` accepts the collective with at least one of the
// requested (type, op) pairs (the others are skipped with a note); else its
// reason, for a usage error.
base::Status CheckSupport(const Options& options, SupportFn supports);

// One rank's whole benchmark on `comm`, with the Backend `make_backend`
// makes for comm->CudaDevice(); rank 0 prints and writes `csv` (may be NULL).
// A failure is printed as "<program>: rank R: ..." and aborts `comm`.
// Returns the exit status.
int BenchmarkRank(const std::string& program, const Options& options, Communicator* comm,
                  std::FILE* csv, const BackendFactory& make_backend = MakeBackend);

}  // namespace ringo::perf

#endif  // RINGO_TOOLS_PERF_DRIVER_H_
