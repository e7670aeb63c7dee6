// The benchmark one rank runs on an initialised communicator: for each
// datatype, op and size, an out-of-place and an in-place measurement, each
// -w warm-up iterations, a one-element all-reduce as barrier, -n timed
// iterations, then (with -c 1) one verified run. Every rank calls it; only
// the Reporter of rank 0 prints.
#ifndef RINGO_TOOLS_PERF_BENCH_H_
#define RINGO_TOOLS_PERF_BENCH_H_

#include <cstdint>

#include "base/status.h"
#include "ringo/ringo.h"
#include "tools/perf/backend.h"
#include "tools/perf/options.h"
#include "tools/perf/report.h"

namespace ringo::perf {

// Totals over all ranks; every rank gets the same values.
struct BenchTotals {
  int64_t wrong = 0;          // wrong elements over every verified run
  int64_t out_of_bounds = 0;  // guard bytes changed next to receive buffers
};

// Runs the whole benchmark collectively on `comm` (rank `rank` of `nranks`),
// buffers from `backend`. Blocking; errors name the failing call. A failure
// on one rank can leave the others blocked in a collective until Ringo's
// timeout: the caller aborts the communicator.
base::StatusOr<BenchTotals> RunBenchmark(const Options& options, ringoComm_t comm, int rank,
                                         int nranks, Backend* backend, Reporter* reporter);

// A Status for a failed ringo* call, with ringoGetLastError's message.
base::Status RingoStatus(ringoResult_t result, const char* call, ringoComm_t comm);

}  // namespace ringo::perf

#endif  // RINGO_TOOLS_PERF_BENCH_H_
