// ompi-perf: ringo-perf's benchmark (same flags, loop, verification and
// columns) driving Open MPI on host buffers (allreduce: MPI_Allreduce;
// sendrecv: MPI_Sendrecv to rank + 1 from rank - 1; alltoall:
// MPI_Alltoall), the peer that bench/compare measures Ringo against. Start it with mpirun; the MPI
// settings under test (algorithm, BTL, malloc tuning) come from mpirun's
// --mca flags and environment. Exit status as ringo-perf's.
#include <mpi.h>

#include <climits>
#include <cstdio>
#include <string>
#include <vector>

#include "base/config.h"
#include "tools/perf/communicator.h"
#include "tools/perf/driver.h"
#include "launch/launch_env.h"
#include "tools/perf/options.h"

namespace ringo::perf {
namespace {

using base::DataType;
using base::RedOp;
using base::Status;

constexpr char kProgram[] = "ompi-perf";

// MPI's types for Ringo's; false where MPI has none (float16, bfloat16).
bool MpiType(DataType type, MPI_Datatype* out) {
  switch (type) {
    case DataType::kInt8: *out = MPI_INT8_T; return true;
    case DataType::kUint8: *out = MPI_UINT8_T; return true;
    case DataType::kInt32: *out = MPI_INT32_T; return true;
    case DataType::kUint32: *out = MPI_UINT32_T; return true;
    case DataType::kInt64: *out = MPI_INT64_T; return true;
    case DataType::kUint64: *out = MPI_UINT64_T; return true;
    case DataType::kFloat32: *out = MPI_FLOAT; return true;
    case DataType::kFloat64: *out = MPI_DOUBLE; return true;
    case DataType::kFloat16:
    case DataType::kBFloat16:
    case DataType::kFloat8E4M3:
    case DataType::kFloat8E5M2: return false;
  }
  return false;
}

// False for avg: MPI has no averaging operator.
bool MpiOp(RedOp op, MPI_Op* out) {
  switch (op) {
    case RedOp::kSum: *out = MPI_SUM; return true;
    case RedOp::kProd: *out = MPI_PROD; return true;
    case RedOp::kMax: *out = MPI_MAX; return true;
    case RedOp::kMin: *out = MPI_MIN; return true;
    case RedOp::kAvg:
    case RedOp::kPreMulSum: return false;
  }
  return false;
}

Status MpiSupports(Collective c, DataType type, RedOp op) {
  MPI_Datatype t;
  MPI_Op o;
  if (c != Collective::kAllReduce && c != Collective::kSendRecv && c != Collective::kAllToAll) {
    return base::InvalidUsage(std::string("unsupported: ") + kProgram + " runs allreduce, sendrecv and alltoall, not " +
                              CollectiveName(c));
  }
  if (!MpiType(type, &t)) {
    // Data movement does not care what the bytes are.
    if (c != Collective::kAllReduce) return Status();
    return base::InvalidUsage(std::string("unsupported: MPI has no ") +
                              base::DataTypeName(type) + " datatype");
  }
  if (c == Collective::kAllReduce && !MpiOp(op, &o)) return base::InvalidUsage("unsupported: MPI has no avg operator");
  return Status();
}

Status MpiStatus(int err, const char* call) {
  if (err == MPI_SUCCESS) return Status();
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(err, text, &len);
  return base::RemoteError(std::string(call) + " failed: " + std::string(text, len));
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string Library() const override {
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    MPI_Get_library_version(version, &len);
    std::string name(version, len);
    // "Open MPI v4.1.4, package: ..., ident: ...": the name and version only.
    const size_t comma = name.find(',');
    if (comma != std::string::npos) name.resize(comma);
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    return name;
  }
  Status Supports(Collective c, DataType type, RedOp op) const override {
    return MpiSupports(c, type, op);
  }
  // Out of place as given; in place with MPI_IN_PLACE, MPI's spelling of it.
  Status Issue(Collective c, const void* send, void* recv, size_t count, DataType type, RedOp op,
               int, void*) override {
    MPI_Datatype t;
    MPI_Op o;
    if (c == Collective::kSendRecv || c == Collective::kAllToAll) {
      RETURN_IF_ERROR(MpiSupports(c, type, op));
      // Bytes, whatever the type (MPI has no half types).
      const size_t bytes = count * base::DataTypeSize(type);
      if (bytes > static_cast<size_t>(INT_MAX)) {
        return base::InvalidUsage("MPI takes an int count; " + std::to_string(bytes) + " bytes is too many");
      }
      const int n = static_cast<int>(bytes);
      if (c == Collective::kSendRecv) {
        const int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
        return MpiStatus(MPI_Sendrecv(send, n, MPI_BYTE, next, 0, recv, n, MPI_BYTE, prev, 0, MPI_COMM_WORLD,
                                      MPI_STATUS_IGNORE),
                         "MPI_Sendrecv");
      }
      return MpiStatus(MPI_Alltoall(send == recv ? MPI_IN_PLACE : send, n, MPI_BYTE, recv, n, MPI_BYTE,
                                    MPI_COMM_WORLD),
                       "MPI_Alltoall");
    }
    if (c != Collective::kAllReduce || !MpiType(type, &t) || !MpiOp(op, &o)) {
      return MpiSupports(c, type, op);
    }
    if (count > static_cast<size_t>(INT_MAX)) {
      return base::InvalidUsage("MPI_Allreduce takes an int count; " + std::to_string(count) +
                                " elements is too many");
    }
    return MpiStatus(MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv,
                                   static_cast<int>(count), t, o, MPI_COMM_WORLD),
                     "MPI_Allreduce");
  }
  void Abort() override { MPI_Abort(MPI_COMM_WORLD, kExitFailure); }

 private:
  int rank_ = 0;
  int size_ = 1;
};

std::string Help() {
  return FlagsUsage(kProgram) +
         "Runs MPI_Allreduce on host memory with ringo-perf's loop, verification and\n"
         "columns; only allreduce, and no float16/bfloat16 or avg (MPI has none).\n"
         "Start it with mpirun, e.g.\n"
         "  mpirun -np 2 --mca btl self,vader ompi-perf allreduce -b 8 -e 64M -f 2\n"
         "-np N is accepted when it equals mpirun's rank count. --host is implied.\n"
         "Exit status: 0 when every result is right, 1 on wrong results or a failure,\n"
         "2 on bad usage.\n";
}

// Rank 0 opens the CSV file; every rank learns whether it could.
int OpenCsvOnRankZero(const Options& o, int rank, CsvFile* csv) {
  int ok = 1;
  if (rank == 0) {
    auto opened = OpenCsv(o.csv_path);
    if (opened.ok()) {
      *csv = std::move(*opened);
    } else {
      ok = 0;
      UsageError(kProgram, opened.status().message());
    }
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return ok ? 0 : kExitUsage;
}

// Flags are checked before MPI_Init, on every rank alike; rank 0 alone says why.
int CheckUsage(base::StatusOr<Options>& options, base::StatusOr<launch::LaunchEnv>& env) {
  const bool speak = !env.ok() || env->rank == 0;
  const auto fail = [&](const std::string& message) {
    return speak ? UsageError(kProgram, message) : kExitUsage;
  };
  if (!env.ok()) return fail(env.status().message());
  if (!options.ok()) return fail(options.status().message());
  const Status supported = CheckSupport(*options, MpiSupports);
  if (!supported.ok()) return fail(supported.message());
  if (options->num_procs > 0 && env->launcher != "Open MPI") {
    return fail("it does not fork its ranks: start it as mpirun -np " +
                std::to_string(options->num_procs) + " " + kProgram + " ...");
  }
  if (options->num_procs > 0 && env->size != options->num_procs) {
    return fail("-np " + std::to_string(options->num_procs) + " but mpirun started " +
                std::to_string(env->size) + " ranks");
  }
  return 0;
}

int Main(int argc, char** argv) {
  auto options = ParseOptions(std::vector<std::string>(argv + 1, argv + argc));
  if (options.ok() && options->help) {
    std::fputs(Help().c_str(), stdout);
    return 0;
  }
  auto env = launch::DetectRanks(base::GetConfig());
  if (const int rc = CheckUsage(options, env); rc != 0) return rc;
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MpiCommunicator comm;
  CsvFile csv;
  int rc = OpenCsvOnRankZero(*options, comm.rank(), &csv);
  if (rc == 0) rc = BenchmarkRank(kProgram, *options, &comm, csv.get());
  csv.reset();
  MPI_Finalize();
  return rc;
}

}  // namespace
}  // namespace ringo::perf

int main(int argc, char** argv) { return ringo::perf::Main(argc, argv); }
