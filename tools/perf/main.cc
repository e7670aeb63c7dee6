// ringo-perf: Ringo's all_reduce_perf. Parses nccl-tests' flags, finds the
// ranks (-np fork, or a launcher's environment), creates the communicator and
// runs the benchmark. Exit status: 0 all right, 1 wrong results or a failure,
// 2 bad usage.
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/config.h"
#include "ringo/ringo.h"
#include "tools/perf/backend.h"
#include "tools/perf/bench.h"
#include "tools/perf/launcher.h"
#include "tools/perf/options.h"
#include "tools/perf/report.h"

namespace ringo::perf {
namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr std::chrono::seconds kIdFileDeadline{60};

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using CsvFile = std::unique_ptr<std::FILE, FileCloser>;

int UsageError(const std::string& message) {
  std::fprintf(stderr, "ringo-perf: %s\nTry 'ringo-perf --help'.\n", message.c_str());
  return kExitUsage;
}

// Opened before any rank starts, so a bad path is a usage error and not a
// rank 0 failure that leaves the others waiting in a collective.
base::StatusOr<CsvFile> OpenCsv(const std::string& path) {
  if (path.empty()) return CsvFile();
  CsvFile file(std::fopen(path.c_str(), "w"));
  if (!file) {
    return base::InvalidArgument("cannot write --csv file " + path + ": " + std::strerror(errno));
  }
  std::fputs(CsvHeader().c_str(), file.get());
  std::fflush(file.get());
  return file;
}

base::StatusOr<BenchTotals> BenchmarkOn(const Options& o, ringoComm_t comm, int rank, int nranks,
                                        std::FILE* csv) {
  int device = -1;
  RETURN_IF_ERROR(RingoStatus(ringoCommCuDevice(comm, &device), "ringoCommCuDevice", comm));
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, MakeBackend(device));
  Reporter reporter(rank == 0, rank == 0 ? csv : nullptr);
  return RunBenchmark(o, comm, rank, nranks, backend.get(), &reporter);
}

// Everything one rank does after it has the unique id. `after_init` runs once
// ringoCommInitRankConfig has returned, whatever it returned.
int RunRank(const Options& o, int rank, int nranks, const ringoUniqueId& id, std::FILE* csv,
            const std::function<void()>& after_init) {
  ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
  config.device_kind = o.host_memory ? RINGO_DEVICE_HOST : RINGO_DEVICE_AUTO;
  ringoComm_t comm = nullptr;
  const ringoResult_t init = ringoCommInitRankConfig(&comm, nranks, id, rank, &config);
  after_init();
  if (init != ringoSuccess) {
    std::fprintf(stderr, "ringo-perf: rank %d: %s\n", rank,
                 RingoStatus(init, "ringoCommInitRankConfig", nullptr).message().c_str());
    return kExitFailure;
  }
  auto totals = BenchmarkOn(o, comm, rank, nranks, csv);
  if (!totals.ok()) {
    std::fprintf(stderr, "ringo-perf: rank %d: %s\n", rank, totals.status().message().c_str());
    ringoCommAbort(comm);  // wakes peers blocked on us with ringoRemoteError
    return kExitFailure;
  }
  ringoCommFinalize(comm);
  ringoCommDestroy(comm);
  return totals->wrong > 0 || totals->out_of_bounds > 0 ? kExitFailure : 0;
}

int RunLocalRanks(const Options& o) {
  // Forking under a launcher would start N ranks per launched process.
  auto env = DetectRanks(base::GetConfig());
  if (!env.ok()) return UsageError(env.status().message());
  if (env->size > 1) {
    return UsageError("-np starts its own ranks; do not combine it with a launcher (" +
                      env->launcher + " started " + std::to_string(env->size) + ")");
  }
  if (HasRoot(o.collective) && o.root >= o.num_procs) {
    return UsageError("-r " + std::to_string(o.root) + " is not a rank of " +
                      std::to_string(o.num_procs));
  }
  auto csv = OpenCsv(o.csv_path);
  if (!csv.ok()) return UsageError(csv.status().message());
  return RunForked(o.num_procs, [&](int rank, const ringoUniqueId& id) {
    return RunRank(o, rank, o.num_procs, id, csv->get(), [] {});
  });
}

int RunLaunchedRank(const Options& o) {
  auto env = DetectLaunch(base::GetConfig());
  if (!env.ok()) return UsageError(env.status().message());
  if (HasRoot(o.collective) && o.root >= env->size) {
    return UsageError("-r " + std::to_string(o.root) + " is not a rank of " +
                      std::to_string(env->size));
  }
  CsvFile csv;
  if (env->rank == 0) {
    auto opened = OpenCsv(o.csv_path);
    if (!opened.ok()) return UsageError(opened.status().message());
    csv = std::move(*opened);
  }
  auto id = ObtainUniqueId(*env, kIdFileDeadline);
  if (!id.ok()) {
    std::fprintf(stderr, "ringo-perf: rank %d: %s\n", env->rank, id.status().message().c_str());
    return kExitFailure;
  }
  return RunRank(o, env->rank, env->size, *id, csv.get(), [&] { ReleaseUniqueId(*env); });
}

int Main(int argc, char** argv) {
  auto options = ParseOptions(std::vector<std::string>(argv + 1, argv + argc));
  if (!options.ok()) return UsageError(options.status().message());
  if (options->help) {
    std::fputs(Usage("ringo-perf").c_str(), stdout);
    return 0;
  }
  return options->num_procs > 0 ? RunLocalRanks(*options) : RunLaunchedRank(*options);
}

}  // namespace
}  // namespace ringo::perf

int main(int argc, char** argv) { return ringo::perf::Main(argc, argv); }
