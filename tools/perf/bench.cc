#include "tools/perf/bench.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "tools/perf/collective.h"
#include "tools/perf/verify.h"

namespace ringo::perf {
namespace {

using base::DataType;
using base::RedOp;
using base::Status;
using base::StatusOr;

// Guard bytes before and after each receive region; 64 keeps the data aligned.
constexpr size_t kGuardBytes = 64;
constexpr uint8_t kGuardByte = 0xa5;

// "# Using devices" data as it travels in the all-gather: fixed size, no pointers.
struct WireRankInfo {
  int32_t rank;
  int32_t pid;
  int32_t cuda_device;
  int32_t reserved;
  char hostname[112];
};
static_assert(sizeof(WireRankInfo) == 128, "fixed wire size");

// The one place a Collective becomes a ringo* call. The internal enums equal
// the public ones by design (base/device/dtype.h).
ringoResult_t IssueCollective(Collective c, const void* send, void* recv, size_t count,
                              DataType type, RedOp op, int root, ringoComm_t comm,
                              ringoStream_t stream) {
  const auto dt = static_cast<ringoDataType_t>(type);
  const auto rop = static_cast<ringoRedOp_t>(op);
  switch (c) {
    case Collective::kAllReduce: return ringoAllReduce(send, recv, count, dt, rop, comm, stream);
    case Collective::kReduceScatter:
      return ringoReduceScatter(send, recv, count, dt, rop, comm, stream);
    case Collective::kAllGather: return ringoAllGather(send, recv, count, dt, comm, stream);
    case Collective::kBroadcast: return ringoBroadcast(send, recv, count, dt, root, comm, stream);
    case Collective::kReduce: return ringoReduce(send, recv, count, dt, rop, root, comm, stream);
  }
  return ringoInvalidArgument;
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

class Bench {
 public:
  Bench(const Options& o, ringoComm_t comm, int rank, int nranks, Backend* backend,
        Reporter* reporter)
      : o_(o), comm_(comm), rank_(rank), nranks_(nranks), backend_(backend), reporter_(reporter) {}

  Status Setup();
  StatusOr<std::vector<RankInfo>> GatherRankInfo();
  Status RunAll();
  BenchTotals totals() const { return totals_; }

 private:
  // The buffers of one measurement.
  struct Run {
    DataType type;
    RedOp op;
    CollCounts counts;
    bool in_place;
    size_t type_size;
    char* send;
    char* recv;
    size_t recv_used;  // bytes of the receive allocation the run may touch
  };

  Run MakeRun(DataType type, RedOp op, const CollCounts& counts, bool in_place) const;
  StatusOr<Measurement> Measure(const Run& run);
  Status Issue(const Run& run);
  Status Prepare(const Run& run, const Pattern& pattern);
  StatusOr<int64_t> CountWrongHere(const Run& run, const Pattern& pattern);
  Status SetGuards(const Run& run);
  StatusOr<int64_t> CountGuardChanges(const Run& run);
  Status Barrier();
  StatusOr<double> AgreeOnTime(double seconds);
  // `value` op-reduced over ranks, through the communicator's own memory.
  template <typename T>
  StatusOr<T> AllReduceScalar(T value, ringoDataType_t type, RedOp op, const char* what);
  StatusOr<int64_t> SumOverRanks(int64_t value);
  Status Check(ringoResult_t result, const char* call) const {
    return RingoStatus(result, call, comm_);
  }

  const Options& o_;
  ringoComm_t comm_;
  int rank_;
  int nranks_;
  Backend* backend_;
  Reporter* reporter_;
  Buffer send_;
  Buffer recv_;                // kGuardBytes, max_bytes of data, kGuardBytes
  Buffer scalar_;              // barrier and the small all-reduces of the harness
  std::vector<char> staging_;  // host copy for filling and checking
  BenchTotals totals_;
};

Status Bench::Setup() {
  ASSIGN_OR_RETURN(send_, AllocBuffer(backend_, o_.max_bytes));
  ASSIGN_OR_RETURN(recv_, AllocBuffer(backend_, o_.max_bytes + 2 * kGuardBytes));
  ASSIGN_OR_RETURN(scalar_, AllocBuffer(backend_, 64));
  staging_.resize(std::max<size_t>(o_.max_bytes, 2 * kGuardBytes));
  return Status();
}

StatusOr<std::vector<RankInfo>> Bench::GatherRankInfo() {
  WireRankInfo mine = {};
  mine.rank = rank_;
  mine.pid = static_cast<int32_t>(getpid());
  RETURN_IF_ERROR(Check(ringoCommCuDevice(comm_, &mine.cuda_device), "ringoCommCuDevice"));
  std::strncpy(mine.hostname, HostName().c_str(), sizeof(mine.hostname) - 1);

  ASSIGN_OR_RETURN(Buffer all, AllocBuffer(backend_, sizeof(WireRankInfo) * nranks_));
  ASSIGN_OR_RETURN(Buffer one, AllocBuffer(backend_, sizeof(WireRankInfo)));
  RETURN_IF_ERROR(backend_->CopyToBackend(one.data(), &mine, sizeof(mine)));
  RETURN_IF_ERROR(Check(ringoAllGather(one.data(), all.data(), sizeof(WireRankInfo), ringoUint8,
                                       comm_, backend_->stream()),
                        "ringoAllGather (rank information)"));
  RETURN_IF_ERROR(backend_->Synchronize());
  std::vector<WireRankInfo> wire(nranks_);
  RETURN_IF_ERROR(backend_->CopyToHost(wire.data(), all.data(), sizeof(WireRankInfo) * nranks_));

  std::vector<RankInfo> ranks;
  for (const WireRankInfo& w : wire) {
    ranks.push_back(RankInfo{w.rank, w.pid, w.cuda_device,
                             std::string(w.hostname, strnlen(w.hostname, sizeof(w.hostname)))});
  }
  return ranks;
}

Status Bench::RunAll() {
  const std::vector<size_t> sizes = MessageSizes(o_);
  // Collectives without an operator run once per type, reported as "none".
  const std::vector<RedOp> ops = HasOp(o_.collective) ? o_.ops : std::vector<RedOp>{RedOp::kSum};
  const int root = HasRoot(o_.collective) ? o_.root : -1;
  int64_t local_out_of_bounds = 0;
  for (DataType type : o_.types) {
    const size_t type_size = base::DataTypeSize(type);
    for (RedOp op : ops) {
      for (size_t bytes : sizes) {
        const CollCounts counts = ComputeCounts(o_.collective, bytes, type_size, nranks_);
        Row row;
        row.bytes = counts.Bytes(type_size);
        row.count = counts.param_count;
        row.type = base::DataTypeName(type);
        row.redop = HasOp(o_.collective) ? base::RedOpName(op) : "none";
        row.root = root;
        for (bool in_place : {false, true}) {
          const Run run = MakeRun(type, op, counts, in_place);
          ASSIGN_OR_RETURN(Measurement m, Measure(run));
          ASSIGN_OR_RETURN(int64_t changed, CountGuardChanges(run));
          local_out_of_bounds += changed;
          (in_place ? row.in_place : row.out_of_place) = m;
          if (m.wrong > 0) totals_.wrong += m.wrong;
        }
        reporter_->AddRow(row);
      }
    }
  }
  ASSIGN_OR_RETURN(totals_.out_of_bounds, SumOverRanks(local_out_of_bounds));
  reporter_->Footer(totals_.out_of_bounds);
  return Status();
}

Bench::Run Bench::MakeRun(DataType type, RedOp op, const CollCounts& counts, bool in_place) const {
  Run run{type, op, counts, in_place, base::DataTypeSize(type), nullptr, nullptr, 0};
  char* recv_data = recv_.data() + kGuardBytes;
  if (in_place) {
    // nccl-tests' layout: both pointers inside the receive buffer.
    run.send = recv_data + counts.send_inplace_offset * rank_ * run.type_size;
    run.recv = recv_data + counts.recv_inplace_offset * rank_ * run.type_size;
    run.recv_used = std::max(counts.send_count, counts.recv_count) * run.type_size;
  } else {
    run.send = send_.data();
    run.recv = recv_data;
    run.recv_used = counts.recv_count * run.type_size;
  }
  return run;
}

StatusOr<Measurement> Bench::Measure(const Run& run) {
  const Pattern pattern(o_.collective, run.op, run.type, rank_, nranks_, o_.root, run.counts);
  RETURN_IF_ERROR(SetGuards(run));
  RETURN_IF_ERROR(Prepare(run, pattern));  // timed runs see real data, not NaNs
  for (int i = 0; i < o_.warmup_iters; ++i) RETURN_IF_ERROR(Issue(run));
  RETURN_IF_ERROR(backend_->Synchronize());
  RETURN_IF_ERROR(Barrier());

  RETURN_IF_ERROR(backend_->StartTimer());
  for (int i = 0; i < o_.iters; ++i) RETURN_IF_ERROR(Issue(run));
  ASSIGN_OR_RETURN(double seconds, backend_->StopTimer());

  Measurement m;
  ASSIGN_OR_RETURN(const double agreed, AgreeOnTime(seconds / o_.iters));
  m.time_us = agreed * 1e6;
  const double bytes = static_cast<double>(run.counts.Bytes(run.type_size));
  m.algbw = agreed > 0 ? bytes / agreed / 1e9 : 0.0;
  m.busbw = m.algbw * BusFactor(o_.collective, nranks_);

  if (o_.check) {
    RETURN_IF_ERROR(Prepare(run, pattern));
    RETURN_IF_ERROR(Issue(run));
    RETURN_IF_ERROR(backend_->Synchronize());
    ASSIGN_OR_RETURN(int64_t wrong, CountWrongHere(run, pattern));
    ASSIGN_OR_RETURN(m.wrong, SumOverRanks(wrong));
  }
  return m;
}

Status Bench::Issue(const Run& run) {
  return Check(IssueCollective(o_.collective, run.send, run.recv, run.counts.param_count, run.type,
                               run.op, o_.root, comm_, backend_->stream()),
               CollectiveName(o_.collective));
}

// Inputs in place, and every byte the collective must write poisoned, so an
// element it skips shows up as wrong.
Status Bench::Prepare(const Run& run, const Pattern& pattern) {
  const size_t ts = run.type_size;
  char* recv_data = recv_.data() + kGuardBytes;
  RETURN_IF_ERROR(backend_->Fill(recv_data, kPoisonByte, run.recv_used));
  if (!run.in_place) {
    RETURN_IF_ERROR(backend_->Fill(run.send, kPoisonByte, run.counts.send_count * ts));
  }
  if (!pattern.HasInput()) return Status();
  FillInput(run.type, pattern, pattern.InputFirst(), run.counts.send_count, staging_.data());
  return backend_->CopyToBackend(run.send, staging_.data(), run.counts.send_count * ts);
}

StatusOr<int64_t> Bench::CountWrongHere(const Run& run, const Pattern& pattern) {
  if (!pattern.HasOutput()) return int64_t{0};
  const size_t bytes = run.counts.recv_count * run.type_size;
  RETURN_IF_ERROR(backend_->CopyToHost(staging_.data(), run.recv, bytes));
  return CountWrong(run.type, pattern, pattern.OutputFirst(), run.counts.recv_count,
                    staging_.data());
}

Status Bench::SetGuards(const Run& run) {
  RETURN_IF_ERROR(backend_->Fill(recv_.data(), kGuardByte, kGuardBytes));
  return backend_->Fill(recv_.data() + kGuardBytes + run.recv_used, kGuardByte, kGuardBytes);
}

StatusOr<int64_t> Bench::CountGuardChanges(const Run& run) {
  char* host = staging_.data();
  RETURN_IF_ERROR(backend_->CopyToHost(host, recv_.data(), kGuardBytes));
  RETURN_IF_ERROR(backend_->CopyToHost(host + kGuardBytes,
                                       recv_.data() + kGuardBytes + run.recv_used, kGuardBytes));
  const auto changed = [](char c) { return static_cast<uint8_t>(c) != kGuardByte; };
  return static_cast<int64_t>(std::count_if(host, host + 2 * kGuardBytes, changed));
}

// Ringo has no barrier: a one-element all-reduce cannot finish on any rank
// before every rank has entered it.
Status Bench::Barrier() {
  return AllReduceScalar(int64_t{0}, ringoInt64, RedOp::kSum, "ringoAllReduce (barrier)").status();
}

// One time for all ranks, as -a asks: rank 0's, the mean, the min or the max.
StatusOr<double> Bench::AgreeOnTime(double seconds) {
  RedOp op = RedOp::kSum;
  double divisor = 1;
  switch (o_.average) {
    case Average::kRank0: seconds = rank_ == 0 ? seconds : 0.0; break;
    case Average::kMean: divisor = nranks_; break;
    case Average::kMin: op = RedOp::kMin; break;
    case Average::kMax: op = RedOp::kMax; break;
  }
  ASSIGN_OR_RETURN(const double agreed,
                   AllReduceScalar(seconds, ringoFloat64, op, "ringoAllReduce (timing)"));
  return agreed / divisor;
}

template <typename T>
StatusOr<T> Bench::AllReduceScalar(T value, ringoDataType_t type, RedOp op, const char* what) {
  RETURN_IF_ERROR(backend_->CopyToBackend(scalar_.data(), &value, sizeof(value)));
  RETURN_IF_ERROR(Check(ringoAllReduce(scalar_.data(), scalar_.data(), 1, type,
                                       static_cast<ringoRedOp_t>(op), comm_, backend_->stream()),
                        what));
  RETURN_IF_ERROR(backend_->Synchronize());
  RETURN_IF_ERROR(backend_->CopyToHost(&value, scalar_.data(), sizeof(value)));
  return value;
}

StatusOr<int64_t> Bench::SumOverRanks(int64_t value) {
  return AllReduceScalar(value, ringoInt64, RedOp::kSum, "ringoAllReduce (error count)");
}

}  // namespace

base::Status RingoStatus(ringoResult_t result, const char* call, ringoComm_t comm) {
  if (result == ringoSuccess) return Status();
  std::string message = std::string(call) + " failed: " + ringoGetErrorString(result);
  const char* detail = ringoGetLastError(comm);
  if (detail != nullptr && detail[0] != '\0') message += ": " + std::string(detail);
  return Status(static_cast<base::Code>(result), message);
}

StatusOr<BenchTotals> RunBenchmark(const Options& options, ringoComm_t comm, int rank, int nranks,
                                   Backend* backend, Reporter* reporter) {
  Bench bench(options, comm, rank, nranks, backend, reporter);
  RETURN_IF_ERROR(bench.Setup());
  RunInfo info;
  info.nranks = nranks;
  RETURN_IF_ERROR(RingoStatus(ringoGetVersion(&info.ringo_version), "ringoGetVersion", nullptr));
  info.hostname = HostName();
  info.cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  info.build_mode = BuildMode();
  ASSIGN_OR_RETURN(info.ranks, bench.GatherRankInfo());
  info.host_memory = std::all_of(info.ranks.begin(), info.ranks.end(),
                                 [](const RankInfo& r) { return r.cuda_device < 0; });
  reporter->Header(options, info);
  RETURN_IF_ERROR(bench.RunAll());
  return bench.totals();
}

}  // namespace ringo::perf
