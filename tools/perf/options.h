// ringo-perf's command line: nccl-tests' flags (-b -e -f -i -n -w -c -o -d -r -a)
// plus -np, --threads, --host, --ranks-per-gpu, --median, --cuda-calls, --no-inplace and --csv, parsed into an
// Options value. Pure functions; no I/O. The peers of bench/peers take the same flags.
#ifndef RINGO_TOOLS_PERF_OPTIONS_H_
#define RINGO_TOOLS_PERF_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/device/dtype.h"
#include "base/status.h"
#include "tools/perf/pattern_math.h"

namespace ringo::perf {

// kSendRecv: nccl-tests' sendrecv_perf (each rank sends to rank + 1 and
// receives from rank - 1, one group); kAllToAll: alltoall_perf.
enum class Collective { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce, kSendRecv, kAllToAll };


// nccl-tests' -a: how each rank's time is combined into the one printed.
enum class Average : int { kRank0 = 0, kMean = 1, kMin = 2, kMax = 3 };

struct Options {
  Collective collective = Collective::kAllReduce;
  // nccl-tests' defaults.
  size_t min_bytes = size_t{32} << 20;
  size_t max_bytes = size_t{32} << 20;
  size_t step_bytes = size_t{1} << 20;
  size_t step_factor = 1;  // > 1: sizes multiply by it and step_bytes is ignored
  int iters = 20;
  int warmup_iters = 5;
  bool check = true;
  std::vector<base::RedOp> ops = {base::RedOp::kSum};
  std::vector<base::DataType> types = {base::DataType::kFloat32};
  int root = 0;
  Average average = Average::kMean;
  int num_procs = 0;  // -np: ranks to fork on this host; 0 when not given
  bool threads = false;  // --threads: the -np ranks are threads of this process (ringoCommInitAll)
  bool bind_to_core = false;  // --bind-to core: each -np rank on a CPU of its own (as mpirun's default)
  bool host_memory = false;  // --host: host memory even where a GPU is visible
  // --wire NAME: the communicator's wire format between hosts (a
  // ringoWire_t; -1: the communicator's own, RINGO_WIRE). RunCommunicator
  // sets it and stores the one in effect.
  int wire = -1;
  int ranks_per_gpu = 1;     // --ranks-per-gpu K: rank r on GPU (r / K) % visible GPUs
  bool median = false;    // --median: time each iteration, report the median
  bool cuda_calls = false;  // --cuda-calls: the library's CUDA runtime calls per timed call
  int graph_launches = 0;  // -G N: the -n iterations captured in a CUDA graph, launched N times
  bool in_place = true;   // --no-inplace: out-of-place measurements only
  int local_register = 0;  // -R 1: buffers from the library's allocator (ringoMemAlloc)
  std::string csv_path;
  bool help = false;  // -h/--help: print Usage(); the other fields are not validated
};

// Parses argv[1..] (the program name excluded). The first positional
// argument names the collective. Errors name the offending flag or value.
base::StatusOr<Options> ParseOptions(const std::vector<std::string>& args);

// ringo-perf's --help text: FlagsUsage, then how ranks are found and the exit status.
std::string Usage(const std::string& program);
// The usage line and the flags alone, for programs that share the flags.
std::string FlagsUsage(const std::string& program);

// "8", "1.5K", "64M", "2G" (binary multiples, as nccl-tests) -> bytes; an
// InvalidArgument for anything else, including negative and fractional byte counts.
base::StatusOr<size_t> ParseSize(const std::string& text);

// Every message size the run visits, min_bytes to max_bytes inclusive.
std::vector<size_t> MessageSizes(const Options& options);

const char* CollectiveName(Collective c);
// --wire's names, by ringoWire_t value ("?" for another value).
const char* WireName(int wire);
// Whether the collective takes a reduction operator / a root rank / runs
// in place (sendrecv does not: a rank would receive into what it is still
// sending).
bool HasOp(Collective c);
bool HasRoot(Collective c);
bool HasInPlace(Collective c);

}  // namespace ringo::perf

#endif  // RINGO_TOOLS_PERF_OPTIONS_H_
