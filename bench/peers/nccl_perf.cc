// nccl-perf: ringo-perf's benchmark (same flags, loop, verification on the
// device and columns) driving NCCL, loaded at run time with dlopen from
// libnccl.so.2 (the loader's search path, or --nccl-lib PATH), so that a
// GPU machine's own NCCL is measured beside Ringo by the project's own
// program and no NCCL is needed to build it. The -np N ranks are threads of
// this process, made by one ncclCommInitAll (rank r on GPU (r / K) % GPUs
// with --ranks-per-gpu K), each on its own thread and non-blocking stream.
// NCCL (since 2.5) refuses two ranks on one GPU; that refusal exits with
// status 3 and NCCL's message, so a caller can tell it from a failure.
//
//   nccl-perf [--nccl-lib PATH] allreduce -np 1 -b 8 -e 256M -f 4
//
// --host runs host buffers instead, for a library that takes them: Ringo's
// libnccl.so.2, measured this way beside ringo-perf --threads --host to see
// what the shim adds (nothing but a call).
//
// Exit status: 0 all right, 1 wrong results or a failure, 2 bad usage, 3
// NCCL refused the ranks (ncclCommInitAll failed). Without a visible GPU it
// prints why and exits 0 (1 under RINGO_REQUIRE_GPU=1).
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "base/config.h"
#include "base/cuda.h"
#include "tools/perf/communicator.h"
#include "tools/perf/cuda_backend.h"
#include "tools/perf/devices.h"
#include "tools/perf/driver.h"
#include "tools/perf/options.h"

namespace ringo::perf {
namespace {

using base::DataType;
using base::RedOp;
using base::Status;

constexpr char kProgram[] = "nccl-perf";
constexpr int kExitRefused = 3;

// NCCL's C ABI as nccl.h declares it; its datatype and op enums have the
// values of base::DataType and base::RedOp (Ringo's equal NCCL's).
using NcclComm = void*;
struct NcclApi {
  void* handle = nullptr;
  std::string path;
  int (*GetVersion)(int*) = nullptr;
  int (*CommInitAll)(NcclComm*, int, const int*) = nullptr;
  int (*CommDestroy)(NcclComm) = nullptr;
  int (*CommAbort)(NcclComm) = nullptr;
  const char* (*GetErrorString)(int) = nullptr;
  const char* (*GetLastError)(NcclComm) = nullptr;  // NCCL 2.13 and later; may be null
  int (*AllReduce)(const void*, void*, size_t, int, int, NcclComm, void*) = nullptr;
  int (*ReduceScatter)(const void*, void*, size_t, int, int, NcclComm, void*) = nullptr;
  int (*AllGather)(const void*, void*, size_t, int, NcclComm, void*) = nullptr;
  int (*Broadcast)(const void*, void*, size_t, int, int, NcclComm, void*) = nullptr;
  int (*Reduce)(const void*, void*, size_t, int, int, int, NcclComm, void*) = nullptr;
  // NCCL 2.7 and later (send/recv), 2.28 (all-to-all); may be null.
  int (*Send)(const void*, size_t, int, int, NcclComm, void*) = nullptr;
  int (*Recv)(void*, size_t, int, int, NcclComm, void*) = nullptr;
  int (*AlltoAll)(const void*, void*, size_t, int, NcclComm, void*) = nullptr;
  int (*GroupStart)() = nullptr;
  int (*GroupEnd)() = nullptr;

  std::string Error(int result, NcclComm comm) const {
    std::string text = GetErrorString != nullptr ? GetErrorString(result) : "NCCL error";
    text += " (" + std::to_string(result) + ")";
    if (GetLastError != nullptr) {
      const char* last = GetLastError(comm);
      if (last != nullptr && last[0] != '\0') text += ": " + std::string(last);
    }
    return text;
  }
};

template <typename Fn>
bool Find(void* handle, const char* name, Fn* fn, bool required, std::string* missing) {
  *fn = reinterpret_cast<Fn>(dlsym(handle, name));
  if (*fn == nullptr && required) *missing += std::string(missing->empty() ? "" : ", ") + name;
  return *fn != nullptr;
}

base::StatusOr<NcclApi> LoadNccl(const std::string& path) {
  NcclApi api;
  api.path = path;
  api.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (api.handle == nullptr) {
    const char* why = dlerror();
    return base::InvalidUsage("cannot load " + path + ": " + (why ? why : "dlopen failed") +
                              " (give --nccl-lib PATH or put its folder on LD_LIBRARY_PATH)");
  }
  std::string missing;
  Find(api.handle, "ncclGetVersion", &api.GetVersion, true, &missing);
  Find(api.handle, "ncclCommInitAll", &api.CommInitAll, true, &missing);
  Find(api.handle, "ncclCommDestroy", &api.CommDestroy, true, &missing);
  Find(api.handle, "ncclCommAbort", &api.CommAbort, true, &missing);
  Find(api.handle, "ncclGetErrorString", &api.GetErrorString, true, &missing);
  Find(api.handle, "ncclGetLastError", &api.GetLastError, false, &missing);
  Find(api.handle, "ncclAllReduce", &api.AllReduce, true, &missing);
  Find(api.handle, "ncclReduceScatter", &api.ReduceScatter, true, &missing);
  Find(api.handle, "ncclAllGather", &api.AllGather, true, &missing);
  Find(api.handle, "ncclBroadcast", &api.Broadcast, true, &missing);
  Find(api.handle, "ncclReduce", &api.Reduce, true, &missing);
  Find(api.handle, "ncclSend", &api.Send, false, &missing);
  Find(api.handle, "ncclRecv", &api.Recv, false, &missing);
  Find(api.handle, "ncclAlltoAll", &api.AlltoAll, false, &missing);
  Find(api.handle, "ncclGroupStart", &api.GroupStart, true, &missing);
  Find(api.handle, "ncclGroupEnd", &api.GroupEnd, true, &missing);
  if (!missing.empty())
    return base::InvalidUsage(path + " lacks " + missing + ": not an NCCL 2.x library");
  return api;
}

std::string VersionText(int v) {
  // 2.9 and later: major * 10000 + minor * 100 + patch; before: major * 1000 + minor * 100 + patch.
  const int major = v >= 10000 ? v / 10000 : v / 1000;
  const int minor = v >= 10000 ? v / 100 % 100 : v / 100 % 10;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(v % 100);
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const NcclApi& api, NcclComm comm, int rank, int size, int device,
                   std::string library)
      : api_(api),
        comm_(comm),
        rank_(rank),
        size_(size),
        device_(device),
        library_(std::move(library)) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string Library() const override { return library_; }
  int CudaDevice() const override { return device_; }
  Status Supports(Collective c, DataType, RedOp) const override {
    if (c == Collective::kSendRecv && (api_.Send == nullptr || api_.Recv == nullptr)) {
      return base::InvalidUsage("unsupported: this NCCL has no ncclSend/ncclRecv");
    }
    if (c == Collective::kAllToAll && api_.AlltoAll == nullptr) {
      return base::InvalidUsage("unsupported: this NCCL has no ncclAlltoAll (2.28 and later)");
    }
    return Status();
  }
  Status Issue(Collective c, const void* send, void* recv, size_t count, DataType type, RedOp op,
               int root, void* stream) override {
    const int dt = static_cast<int>(type);
    const int rop = static_cast<int>(op);
    int result = 0;
    switch (c) {
      case Collective::kAllReduce:
        result = api_.AllReduce(send, recv, count, dt, rop, comm_, stream);
        break;
      case Collective::kReduceScatter:
        result = api_.ReduceScatter(send, recv, count, dt, rop, comm_, stream);
        break;
      case Collective::kAllGather:
        result = api_.AllGather(send, recv, count, dt, comm_, stream);
        break;
      case Collective::kBroadcast:
        result = api_.Broadcast(send, recv, count, dt, root, comm_, stream);
        break;
      case Collective::kReduce:
        result = api_.Reduce(send, recv, count, dt, rop, root, comm_, stream);
        break;
      case Collective::kSendRecv: {
        const int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
        result = api_.GroupStart();
        const int s = api_.Send(send, count, dt, next, comm_, stream);
        const int r = api_.Recv(recv, count, dt, prev, comm_, stream);
        const int e = api_.GroupEnd();
        result = result != 0 ? result : s != 0 ? s : r != 0 ? r : e;
        break;
      }
      case Collective::kAllToAll:
        result = api_.AlltoAll(send, recv, count, dt, comm_, stream);
        break;
    }
    if (result == 0) return Status();
    return base::Internal(std::string("nccl") + CollectiveName(c) +
                          " failed: " + api_.Error(result, comm_));
  }
  void Abort() override {
    if (!aborted_) api_.CommAbort(comm_);
    aborted_ = true;
  }
  bool aborted() const { return aborted_; }

 private:
  const NcclApi& api_;
  NcclComm comm_;
  int rank_;
  int size_;
  int device_;
  std::string library_;
  bool aborted_ = false;
};

int Main(int argc, char** argv) {
  std::vector<std::string> args;
  std::string lib = "libnccl.so.2";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--nccl-lib" && i + 1 < argc) {
      lib = argv[++i];
    } else if (a.rfind("--nccl-lib=", 0) == 0) {
      lib = a.substr(11);
    } else {
      args.push_back(a);
    }
  }
  auto options = ParseOptions(args);
  if (!options.ok()) return UsageError(kProgram, options.status().message());
  Options o = *options;
  if (o.help) {
    std::fputs((FlagsUsage(kProgram) +
                "  --nccl-lib PATH          the NCCL library to load (default libnccl.so.2)\n"
                "The -np ranks (default 1) are threads of this process.\n")
                   .c_str(),
               stdout);
    return 0;
  }
  if (o.num_procs == 0) o.num_procs = 1;
  if (o.local_register != 0) return UsageError(kProgram, "-R 1 is Ringo's (ringoMemAlloc)");
  const base::CudaProbe& probe = base::ProbeCuda();
  if (!o.host_memory) {
    if (probe.device_count == 0) {
      std::printf("no CUDA device visible (%s): nothing to measure\n", probe.reason.c_str());
      return base::GetConfig().require_gpu ? kExitFailure : 0;
    }
    const base::Status fits = CheckDeviceCount(o.num_procs, o.ranks_per_gpu, probe.device_count);
    if (!fits.ok()) return UsageError(kProgram, fits.message());
  }
  auto loaded = LoadNccl(lib);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s: %s\n", kProgram, loaded.status().message().c_str());
    return kExitFailure;
  }
  const NcclApi& api = *loaded;
  int version = 0;
  api.GetVersion(&version);
  const std::string library = "NCCL " + VersionText(version) + " (" + lib + ")";
  auto csv = OpenCsv(o.csv_path);
  if (!csv.ok()) return UsageError(kProgram, csv.status().message());

  const int n = o.num_procs;
  std::vector<int> devlist(n, -1);
  if (!o.host_memory) {
    for (int r = 0; r < n; ++r) devlist[r] = RankDevice(r, o.ranks_per_gpu, probe.device_count);
  }
  std::vector<NcclComm> comms(n, nullptr);
  const int init = api.CommInitAll(comms.data(), n, o.host_memory ? nullptr : devlist.data());
  if (init != 0) {
    std::string where;
    for (int d : devlist) where += (where.empty() ? "" : ",") + std::to_string(d);
    std::printf("%s refused %d rank(s) on CUDA devices [%s]: ncclCommInitAll: %s\n",
                library.c_str(), n, where.c_str(), api.Error(init, nullptr).c_str());
    return kExitRefused;
  }
  std::vector<int> results(n, kExitFailure);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      NcclCommunicator comm(api, comms[r], r, n, devlist[r], library);
      const base::Status used = o.host_memory ? base::Status() : UseCudaDevice(devlist[r]);
      if (!used.ok()) {
        std::fprintf(stderr, "%s: rank %d: %s\n", kProgram, r, used.message().c_str());
        comm.Abort();
        return;
      }
      results[r] = BenchmarkRank(kProgram, o, &comm, csv->get(), MakeCudaOrHostBackend);
      if (!comm.aborted()) api.CommDestroy(comms[r]);
    });
  }
  for (std::thread& t : threads) t.join();
  return *std::max_element(results.begin(), results.end());
}

}  // namespace
}  // namespace ringo::perf

int main(int argc, char** argv) { return ringo::perf::Main(argc, argv); }
