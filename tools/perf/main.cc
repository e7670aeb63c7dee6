// ringo-perf: Ringo's all_reduce_perf. Parses nccl-tests' flags, finds the
// ranks (-np fork, or a launcher's environment), creates the communicator and
// runs the benchmark. Exit status: 0 all right, 1 wrong results or a failure,
// 2 bad usage.
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "base/config.h"
#include "ringo/ringo.h"
#include "tools/perf/driver.h"
#include "tools/perf/launcher.h"
#include "tools/perf/options.h"
#include "tools/perf/ringo_comm.h"

namespace ringo::perf {
namespace {

constexpr char kProgram[] = "ringo-perf";
constexpr std::chrono::seconds kIdFileDeadline{60};

// Everything one rank does after it has the unique id. `after_init` runs once
// ringoCommInitRankConfig has returned, whatever it returned.
int RunRank(const Options& o, int rank, int nranks, const ringoUniqueId& id, std::FILE* csv,
            const std::function<void()>& after_init) {
  ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
  // The benchmark allocates host buffers (GPU buffers are not in ringo-perf
  // yet), so its communicators use host memory whether or not --host is given.
  config.device_kind = RINGO_DEVICE_HOST;
  ringoComm_t comm = nullptr;
  const ringoResult_t init = ringoCommInitRankConfig(&comm, nranks, id, rank, &config);
  after_init();
  if (init != ringoSuccess) {
    std::fprintf(stderr, "%s: rank %d: %s\n", kProgram, rank,
                 RingoStatus(init, "ringoCommInitRankConfig", nullptr).message().c_str());
    return kExitFailure;
  }
  RingoCommunicator communicator(comm);
  const base::Status queried = communicator.Query();
  if (!queried.ok()) {
    std::fprintf(stderr, "%s: rank %d: %s\n", kProgram, rank, queried.message().c_str());
    communicator.Abort();
    return kExitFailure;
  }
  const int rc = BenchmarkRank(kProgram, o, &communicator, csv);
  if (!communicator.aborted()) {  // a failure has aborted (and released) it
    ringoCommFinalize(comm);
    ringoCommDestroy(comm);
  }
  return rc;
}

int RunLocalRanks(const Options& o) {
  // Forking under a launcher would start N ranks per launched process.
  auto env = DetectRanks(base::GetConfig());
  if (!env.ok()) return UsageError(kProgram, env.status().message());
  if (env->size > 1) {
    return UsageError(kProgram, "-np starts its own ranks; do not combine it with a launcher (" +
                                    env->launcher + " started " + std::to_string(env->size) +
                                    ")");
  }
  if (HasRoot(o.collective) && o.root >= o.num_procs) {
    return UsageError(kProgram, "-r " + std::to_string(o.root) + " is not a rank of " +
                                    std::to_string(o.num_procs));
  }
  auto csv = OpenCsv(o.csv_path);
  if (!csv.ok()) return UsageError(kProgram, csv.status().message());
  return RunForked(o.num_procs, [&](int rank, const ringoUniqueId& id) {
    return RunRank(o, rank, o.num_procs, id, csv->get(), [] {});
  });
}

int RunLaunchedRank(const Options& o) {
  auto env = DetectLaunch(base::GetConfig());
  if (!env.ok()) return UsageError(kProgram, env.status().message());
  if (HasRoot(o.collective) && o.root >= env->size) {
    return UsageError(kProgram, "-r " + std::to_string(o.root) + " is not a rank of " +
                                    std::to_string(env->size));
  }
  CsvFile csv;
  if (env->rank == 0) {
    auto opened = OpenCsv(o.csv_path);
    if (!opened.ok()) return UsageError(kProgram, opened.status().message());
    csv = std::move(*opened);
  }
  auto id = ObtainUniqueId(*env, kIdFileDeadline);
  if (!id.ok()) {
    std::fprintf(stderr, "%s: rank %d: %s\n", kProgram, env->rank, id.status().message().c_str());
    return kExitFailure;
  }
  return RunRank(o, env->rank, env->size, *id, csv.get(), [&] { ReleaseUniqueId(*env); });
}

int Main(int argc, char** argv) {
  auto options = ParseOptions(std::vector<std::string>(argv + 1, argv + argc));
  if (!options.ok()) return UsageError(kProgram, options.status().message());
  if (options->help) {
    std::fputs(Usage(kProgram).c_str(), stdout);
    return 0;
  }
  return options->num_procs > 0 ? RunLocalRanks(*options) : RunLaunchedRank(*options);
}

}  // namespace
}  // namespace ringo::perf

int main(int argc, char** argv) { return ringo::perf::Main(argc, argv); }
