// ringo-perf: Ringo's all_reduce_perf. Parses nccl-tests' flags, finds the
// ranks (-np fork, -np with --threads for threads of this process, or a
// launcher's environment), puts each on its GPU (--ranks-per-gpu) or on host
// memory (--host, or no GPU), creates the communicator and runs the
// benchmark. Under RINGO_REQUIRE_GPU=1 a rank that would measure host memory
// fails instead. Exit status: 0 all right, 1 wrong results or a failure, 2
// bad usage.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/config.h"
#include "base/cuda.h"
#include "ringo/ringo.h"
#include "tools/perf/cuda_backend.h"
#include "tools/perf/devices.h"
#include "tools/perf/driver.h"
#include "launch/launch_env.h"
#include "launch/rendezvous.h"
#include "tools/perf/launcher.h"
#include "tools/perf/options.h"
#include "tools/perf/ringo_comm.h"

namespace ringo::perf {
namespace {

constexpr char kProgram[] = "ringo-perf";
constexpr std::chrono::seconds kIdFileDeadline{60};

// A rank's benchmark on its communicator, which it finalizes and destroys.
int RunCommunicator(const Options& options, int rank, ringoComm_t comm, std::FILE* csv) {
  RingoCommunicator communicator(comm);
  base::Status queried = communicator.Query();
  Options o = options;
  if (queried.ok() && o.wire >= 0) queried = RingoStatus(ringoCommSetWire(comm, o.wire), "ringoCommSetWire", comm);
  if (queried.ok()) queried = RingoStatus(ringoCommGetWire(comm, &o.wire), "ringoCommGetWire", comm);
  if (queried.ok() && base::GetConfig().require_gpu && communicator.CudaDevice() < 0) {
    queried = base::InvalidUsage(
        "RINGO_REQUIRE_GPU=1, but this rank's communicator uses host memory (no usable GPU, "
        "--host, or "
        "RINGO_DEVICE=host)");
  }
  if (!queried.ok()) {
    std::fprintf(stderr, "%s: rank %d: %s\n", kProgram, rank, queried.message().c_str());
    communicator.Abort();
    return kExitFailure;
  }
  const int rc = BenchmarkRank(kProgram, o, &communicator, csv, MakeCudaOrHostBackend);
  if (!communicator.aborted()) {  // a failure has aborted (and released) it
    ringoCommFinalize(comm);
    ringoCommDestroy(comm);
  }
  return rc;
}

// Everything one rank does after it has the unique id, on CUDA device
// `cuda_device` (-1: host memory). `after_init` runs once
// ringoCommInitRankConfig has returned, whatever it returned (or once the
// rank has failed before it).
int RunRank(const Options& o, int rank, int nranks, const ringoUniqueId& id, std::FILE* csv,
            int cuda_device, const std::function<void()>& after_init) {
  ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
  config.device_kind = RINGO_DEVICE_HOST;
  if (cuda_device >= 0) {
    const base::Status used = UseCudaDevice(cuda_device);
    if (!used.ok()) {
      after_init();
      std::fprintf(stderr, "%s: rank %d: %s\n", kProgram, rank, used.message().c_str());
      return kExitFailure;
    }
    // AUTO, not CUDA: the library then takes GPU memory when every rank can
    // (on one host or several), host memory otherwise or under
    // RINGO_DEVICE=host, and the backend follows whatever the communicator
    // reports.
    config.device_kind = RINGO_DEVICE_AUTO;
  }
  ringoComm_t comm = nullptr;
  const ringoResult_t init = ringoCommInitRankConfig(&comm, nranks, id, rank, &config);
  after_init();
  if (init != ringoSuccess) {
    std::fprintf(stderr, "%s: rank %d: %s\n", kProgram, rank,
                 RingoStatus(init, "ringoCommInitRankConfig", nullptr).message().c_str());
    return kExitFailure;
  }
  return RunCommunicator(o, rank, comm, csv);
}

// This process's rank among its host's, as the launcher says it
// (torchrun's LOCAL_RANK, Open MPI's, Slurm's), else `rank`.
int LocalRank(int rank) {
  for (const char* name : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') {
      char* end = nullptr;
      const long r = std::strtol(v, &end, 10);
      if (*end == '\0' && r >= 0 && r < (1 << 20)) return static_cast<int>(r);
    }
  }
  return rank;
}

// Where GPUs are visible and --host is not given: whether `nranks` ranks fit
// them at --ranks-per-gpu, and -R 1 (host memory) is not asked for.
base::Status CheckGpuUse(const Options& o, int nranks, int devices) {
  RETURN_IF_ERROR(CheckDeviceCount(nranks, o.ranks_per_gpu, devices));
  if (o.local_register == 1) {
    return base::InvalidUsage(
        "-R 1 takes the buffers from ringoMemAlloc, which is host memory, but " +
        std::to_string(devices) +
        " GPU(s) are visible and ringo-perf uses GPU buffers there: add --host, or leave -R "
        "out");
  }
  return base::Status();
}

// RINGO_REQUIRE_GPU=1 where no GPU would be used: the usage error, else "".
std::string GpuRequiredButUnused(const Options& o, int devices, const std::string& why_none) {
  if (!base::GetConfig().require_gpu) return "";
  if (o.host_memory) return "RINGO_REQUIRE_GPU=1 contradicts --host";
  if (devices == 0) return "RINGO_REQUIRE_GPU=1, but no GPU is usable: " + why_none;
  return "";
}

// -np N --threads: the N ranks are threads of this process, made by one
// ringoCommInitAll (rank r on GPU RankDevice(r), or all on host memory where
// no GPU is visible), each benchmarking on its own thread and stream.
int RunThreadRanks(const Options& o) {
  const base::CudaProbe& probe = base::ProbeCuda();  // no fork follows: this process may use CUDA
  const int devices = probe.device_count;
  if (o.host_memory && devices > 0) {
    return UsageError(
        kProgram,
        "--threads takes the GPUs where they are visible (ringoCommInitAll); for host memory "
        "there, leave --threads out");
  }
  const std::string required = GpuRequiredButUnused(o, devices, probe.reason);
  if (!required.empty()) return UsageError(kProgram, required);
  if (devices > 0) {
    const base::Status fits = CheckGpuUse(o, o.num_procs, devices);
    if (!fits.ok()) return UsageError(kProgram, fits.message());
  }
  auto csv = OpenCsv(o.csv_path);
  if (!csv.ok()) return UsageError(kProgram, csv.status().message());
  const int n = o.num_procs;
  std::vector<int> devlist(n, -1);
  for (int r = 0; r < n && devices > 0; ++r) devlist[r] = RankDevice(r, o.ranks_per_gpu, devices);
  std::vector<ringoComm_t> comms(n, nullptr);
  const ringoResult_t init =
      ringoCommInitAll(comms.data(), n, devices > 0 ? devlist.data() : nullptr);
  if (init != ringoSuccess) {
    std::fprintf(stderr, "%s: %s\n", kProgram,
                 RingoStatus(init, "ringoCommInitAll", nullptr).message().c_str());
    return kExitFailure;
  }
  std::vector<int> results(n, kExitFailure);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      if (devlist[r] >= 0) {
        const base::Status used = UseCudaDevice(devlist[r]);
        if (!used.ok()) {
          std::fprintf(stderr, "%s: rank %d: %s\n", kProgram, r, used.message().c_str());
          ringoCommAbort(comms[r]);  // its peers wait for it otherwise
          return;
        }
      }
      results[r] = RunCommunicator(o, r, comms[r], csv->get());
    });
  }
  for (std::thread& t : threads) t.join();
  return *std::max_element(results.begin(), results.end());
}

int RunLocalRanks(const Options& o) {
  // Forking under a launcher would start N ranks per launched process.
  auto env = launch::DetectRanks(base::GetConfig());
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
  if (o.threads) return RunThreadRanks(o);
  const GpuCount probe = o.host_memory ? GpuCount{} : ProbeGpusInChild();
  const int devices = probe.devices;
  const std::string required = GpuRequiredButUnused(o, devices, probe.reason);
  if (!required.empty()) return UsageError(kProgram, required);
  if (devices > 0) {
    const base::Status fits = CheckGpuUse(o, o.num_procs, devices);
    if (!fits.ok()) return UsageError(kProgram, fits.message());
  }
  auto csv = OpenCsv(o.csv_path);
  if (!csv.ok()) return UsageError(kProgram, csv.status().message());
  return RunForked(o.num_procs, [&](int rank, const ringoUniqueId& id) {
    const int device = devices > 0 ? RankDevice(rank, o.ranks_per_gpu, devices) : -1;
    return RunRank(o, rank, o.num_procs, id, csv->get(), device, [] {});
  }, o.bind_to_core);
}

int RunLaunchedRank(const Options& o) {
  auto env = launch::DetectLaunch(base::GetConfig());
  if (!env.ok()) return UsageError(kProgram, env.status().message());
  if (HasRoot(o.collective) && o.root >= env->size) {
    return UsageError(kProgram, "-r " + std::to_string(o.root) + " is not a rank of " +
                                    std::to_string(env->size));
  }
  // No fork follows, so this process may initialise CUDA itself.
  const int devices = o.host_memory ? 0 : base::ProbeCuda().device_count;
  const std::string required = GpuRequiredButUnused(o, devices, base::ProbeCuda().reason);
  if (!required.empty()) return UsageError(kProgram, required);
  // Ranks on several hosts (as far as the launcher says) take their GPU by
  // their rank on this host where the launcher gives it, and are counted
  // against this host's GPUs by the communicator, not here.
  const int local_rank = LocalRank(env->rank);
  if (devices > 0) {
    const base::Status fits = env->all_local ? CheckGpuUse(o, env->size, devices) : CheckGpuUse(o, 1, devices);
    if (!fits.ok()) return UsageError(kProgram, fits.message());
  }
  CsvFile csv;
  if (env->rank == 0) {
    auto opened = OpenCsv(o.csv_path);
    if (!opened.ok()) return UsageError(kProgram, opened.status().message());
    csv = std::move(*opened);
  }
  auto id = launch::ObtainUniqueId(*env, "ringo-perf", kIdFileDeadline);
  if (!id.ok()) {
    std::fprintf(stderr, "%s: rank %d: %s\n", kProgram, env->rank, id.status().message().c_str());
    return kExitFailure;
  }
  const int device = devices > 0 ? RankDevice(env->all_local ? env->rank : local_rank, o.ranks_per_gpu, devices) : -1;
  return RunRank(o, env->rank, env->size, *id, csv.get(), device, [&] { launch::ReleaseUniqueId(*env, "ringo-perf"); });
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
