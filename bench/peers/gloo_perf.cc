// gloo-perf: ringo-perf's benchmark (same flags, loop, verification and
// columns) driving Gloo's ring all-reduce (gloo::allreduce, the algorithm
// PyTorch's CPU process group uses) over TCP on 127.0.0.1: the peer that
// bench/compare measures Ringo against. -np N forks N ranks that meet in a
// gloo::rendezvous::FileStore in a fresh temporary folder. Exit status as
// ringo-perf's.
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/config.h"
#include "tools/perf/communicator.h"
#include "tools/perf/driver.h"
#include "launch/fork.h"
#include "launch/launch_env.h"
#include "tools/perf/options.h"

namespace ringo::perf {
namespace {

using base::DataType;
using base::RedOp;
using base::Status;

constexpr char kProgram[] = "gloo-perf";
using ReduceFn = void (*)(void*, const void*, const void*, size_t);

// Gloo's element-wise functions, as PyTorch's ProcessGroupGloo passes them.
template <typename T>
ReduceFn GlooFunction(RedOp op) {
  switch (op) {
    case RedOp::kSum: return static_cast<ReduceFn>(&gloo::sum<T>);
    case RedOp::kProd: return static_cast<ReduceFn>(&gloo::product<T>);
    case RedOp::kMax: return static_cast<ReduceFn>(&gloo::max<T>);
    case RedOp::kMin: return static_cast<ReduceFn>(&gloo::min<T>);
    case RedOp::kAvg: return nullptr;
  }
  return nullptr;
}

Status GlooSupports(Collective c, DataType type, RedOp op) {
  if (c != Collective::kAllReduce) {
    return base::InvalidUsage(std::string("unsupported: ") + kProgram +
                              " runs allreduce only, not " + CollectiveName(c));
  }
  if (type == DataType::kBFloat16) return base::InvalidUsage("unsupported: Gloo has no bfloat16");
  if (op == RedOp::kAvg) return base::InvalidUsage("unsupported: Gloo has no avg operator");
  return Status();
}

class GlooCommunicator final : public Communicator {
 public:
  explicit GlooCommunicator(std::shared_ptr<gloo::Context> context)
      : context_(std::move(context)) {}

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  std::string Library() const override { return "Gloo ring allreduce (TCP 127.0.0.1)"; }
  Status Supports(Collective c, DataType type, RedOp op) const override {
    return GlooSupports(c, type, op);
  }
  Status Issue(Collective c, const void* send, void* recv, size_t count, DataType type, RedOp op,
               int, void*) override {
    RETURN_IF_ERROR(GlooSupports(c, type, op));
    if (count == 0) return Status();  // nothing moves; Gloo wants at least one element
    try {
      switch (type) {
        case DataType::kInt8: Run<int8_t>(send, recv, count, op); break;
        case DataType::kUint8: Run<uint8_t>(send, recv, count, op); break;
        case DataType::kInt32: Run<int32_t>(send, recv, count, op); break;
        case DataType::kUint32: Run<uint32_t>(send, recv, count, op); break;
        case DataType::kInt64: Run<int64_t>(send, recv, count, op); break;
        case DataType::kUint64: Run<uint64_t>(send, recv, count, op); break;
        case DataType::kFloat16: Run<gloo::float16>(send, recv, count, op); break;
        case DataType::kFloat32: Run<float>(send, recv, count, op); break;
        case DataType::kFloat64: Run<double>(send, recv, count, op); break;
        case DataType::kBFloat16: break;  // rejected above
      }
    } catch (const std::exception& e) {
      return base::RemoteError(std::string("gloo::allreduce failed: ") + e.what());
    }
    return Status();
  }
  // Gloo has no abort: closing the connections makes blocked peers fail.
  void Abort() override {
    try {
      context_->closeConnections();
    } catch (const std::exception&) {
    }
  }

 private:
  // In place: the output alone (Gloo reads it as the input too).
  template <typename T>
  void Run(const void* send, void* recv, size_t count, RedOp op) {
    gloo::AllreduceOptions opts(context_);
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    if (send != recv) opts.setInput(static_cast<T*>(const_cast<void*>(send)), count);
    opts.setOutput(static_cast<T*>(recv), count);
    opts.setReduceFunction(GlooFunction<T>(op));
    gloo::allreduce(opts);
  }

  std::shared_ptr<gloo::Context> context_;
};

int RunRank(const Options& o, int rank, int nranks, const std::string& store_dir, const std::string& address,
            std::FILE* csv) {
  std::shared_ptr<gloo::rendezvous::Context> context;
  try {
    auto device = gloo::transport::tcp::CreateDevice(gloo::transport::tcp::attr(address.c_str()));
    gloo::rendezvous::FileStore store(store_dir);
    context = std::make_shared<gloo::rendezvous::Context>(rank, nranks);
    context->setTimeout(std::chrono::milliseconds(base::GetConfig().timeout_ms));
    context->connectFullMesh(store, device);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: rank %d: Gloo rendezvous failed: %s\n", kProgram, rank, e.what());
    return kExitFailure;
  }
  GlooCommunicator comm(context);
  return BenchmarkRank(kProgram, o, &comm, csv);
}

std::string Help() {
  return FlagsUsage(kProgram) +
         "Runs Gloo's ring all-reduce (gloo::allreduce) over TCP on 127.0.0.1 on host\n"
         "memory with ringo-perf's loop, verification and columns; only allreduce, no\n"
         "bfloat16 or avg (Gloo has none). -np N forks N ranks (one without -np);\n"
         "--host is implied. RINGO_TIMEOUT_MS bounds every Gloo operation.\n"
         "Across hosts: start one process per rank with a launcher's rank and size\n"
         "(as ringo-perf), --gloo-store DIR (a folder every rank sees: the FileStore)\n"
         "and --gloo-addr ADDRESS (this rank's address on the network to use).\n"
         "Exit status: 0 when every result is right, 1 on wrong results or a failure,\n"
         "2 on bad usage.\n";
}

int Main(int argc, char** argv) {
  // gloo-perf's own flags, for ranks on several hosts.
  std::vector<std::string> args;
  std::string shared_store, address = "127.0.0.1";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--gloo-store" || a == "--gloo-addr") && i + 1 < argc) {
      (a == "--gloo-store" ? shared_store : address) = argv[++i];
    } else {
      args.push_back(a);
    }
  }
  auto options = ParseOptions(args);
  if (!options.ok()) return UsageError(kProgram, options.status().message());
  if (options->help) {
    std::fputs(Help().c_str(), stdout);
    return 0;
  }
  const Status supported = CheckSupport(*options, GlooSupports);
  if (!supported.ok()) return UsageError(kProgram, supported.message());
  auto env = launch::DetectRanks(base::GetConfig());
  if (!env.ok()) return UsageError(kProgram, env.status().message());
  if (env->size > 1) {
    if (shared_store.empty()) {
      return UsageError(kProgram, "ranks started by " + env->launcher + " need --gloo-store DIR (and --gloo-addr)");
    }
    auto csv = OpenCsv(env->rank == 0 ? options->csv_path : "");
    if (!csv.ok()) return UsageError(kProgram, csv.status().message());
    return RunRank(*options, env->rank, env->size, shared_store, address, csv->get());
  }
  const int nranks = options->num_procs > 0 ? options->num_procs : 1;
  auto csv = OpenCsv(options->csv_path);
  if (!csv.ok()) return UsageError(kProgram, csv.status().message());

  char dir_template[] = "/tmp/gloo-perf-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) {
    std::perror("gloo-perf: mkdtemp");
    return kExitFailure;
  }
  const std::string store_dir = dir_template;
  const int rc = launch::RunForkedRanks(
      kProgram, nranks, [&](int rank) { return RunRank(*options, rank, nranks, store_dir, address, csv->get()); },
      options->bind_to_core);
  std::error_code ignored;
  std::filesystem::remove_all(store_dir, ignored);
  return rc;
}

}  // namespace
}  // namespace ringo::perf

int main(int argc, char** argv) { return ringo::perf::Main(argc, argv); }
