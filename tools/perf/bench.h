// The benchmark one rank runs on a communicator: for each datatype, op and
// size, an out-of-place and an in-place measurement, each -w warm-up
// iterations, a one-element all-reduce as barrier, -n timed iterations (one
// batch, or each timed alone with --median), then (with -c 1) one verified
// run. Every rank calls it; only the Reporter of rank 0 prints. The library
// is behind the Communicator interface, so Ringo and its peers (bench/peers)
// are measured by the same code.
#ifndef RINGO_TOOLS_PERF_BENCH_H_
#define RINGO_TOOLS_PERF_BENCH_H_

#include <cstdint>
#include <string>

#include "base/status.h"
#include "tools/perf/backend.h"
#include "tools/perf/communicator.h"
#include "tools/perf/options.h"
#include "tools/perf/report.h"

namespace ringo::perf {

// Totals over all ranks; every rank gets the same values.
struct BenchTotals {
  int64_t wrong = 0;          // wrong elements over every verified run
  int64_t out_of_bounds = 0;  // guard bytes changed next to receive buffers
};

// Runs the whole benchmark collectively on `comm`, buffers from `backend`;
// `program` names the tool in the header ("ringo-perf"). (type, op) pairs
// that comm->Supports rejects are skipped with a note. Blocking; errors name
// the failing call. A failure on one rank can leave the others blocked in a
// collective: the caller aborts the communicator.
base::StatusOr<BenchTotals> RunBenchmark(const Options& options, const std::string& program,
                                         Communicator* comm, Backend* backend, Reporter* reporter);

}  // namespace ringo::perf

#endif  // RINGO_TOOLS_PERF_BENCH_H_
