#include "tools/perf/driver.h"

#include <cerrno>
#include <cstring>
#include <vector>

#include "tools/perf/backend.h"
#include "tools/perf/bench.h"
#include "tools/perf/report.h"

namespace ringo::perf {

int UsageError(const std::string& program, const std::string& message) {
  std::fprintf(stderr, "%s: %s\nTry '%s --help'.\n", program.c_str(), message.c_str(),
               program.c_str());
  return kExitUsage;
}

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

base::Status CheckSupport(const Options& o, SupportFn supports) {
  const std::vector<base::RedOp> ops =
      HasOp(o.collective) ? o.ops : std::vector<base::RedOp>{base::RedOp::kSum};
  base::Status first;
  for (base::DataType type : o.types) {
    for (base::RedOp op : ops) {
      const base::Status s = supports(o.collective, type, op);
      if (s.ok()) return s;
      if (first.ok()) first = s;
    }
  }
  return first;
}

int BenchmarkRank(const std::string& program, const Options& o, Communicator* comm, std::FILE* csv,
                  const BackendFactory& make_backend) {
  const int rank = comm->rank();
  auto totals = [&]() -> base::StatusOr<BenchTotals> {
    HostAllocator registered{[comm](size_t bytes) { return comm->AllocRegistered(bytes); },
                             [comm](void* ptr) { comm->FreeRegistered(ptr); }};
    ASSIGN_OR_RETURN(
        std::unique_ptr<Backend> backend,
        make_backend(comm->CudaDevice(), o.local_register == 1 ? &registered : nullptr));
    Reporter reporter(rank == 0, rank == 0 ? csv : nullptr);
    return RunBenchmark(o, program, comm, backend.get(), &reporter);
  }();
  if (!totals.ok()) {
    std::fprintf(stderr, "%s: rank %d: %s\n", program.c_str(), rank,
                 totals.status().message().c_str());
    std::fflush(stderr);
    comm->Abort();  // wakes peers blocked on us, where the library can
    return kExitFailure;
  }
  return totals->wrong > 0 || totals->out_of_bounds > 0 ? kExitFailure : 0;
}

}  // namespace ringo::perf
