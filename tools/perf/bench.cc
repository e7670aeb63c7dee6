#include "tools/perf/bench.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "base/check.h"
#include "base/cuda_calls.h"
#include "tools/perf/collective.h"
#include "tools/perf/stats.h"
#include "tools/perf/verify.h"

namespace ringo::perf {
namespace {

using base::DataType;
using base::RedOp;
using base::Status;
using base::StatusOr;

// Whether a run crosses hosts in the wire format where they are crossed.
bool WireApplies(const Options& o, DataType type, RedOp op) {
  const bool coll = o.collective == Collective::kAllReduce || o.collective == Collective::kReduceScatter;
  const bool dtype = type == DataType::kFloat32 || type == DataType::kBFloat16 || type == DataType::kFloat16;
  return o.wire > 0 && coll && dtype && (op == RedOp::kSum || op == RedOp::kAvg);
}

// The wire's unit roundoff: half a unit in the last place, relative.
double WireRoundoff(int wire) {
  switch (wire) {
    case 1: return 1.0 / 256;     // bf16: 8 significant bits
    case 2: return 1.0 / 2048;    // fp16: 11
    case 3: return 1.0 / 16;      // e4m3: 4
    case 4: return 1.0 / 8;       // e5m2: 3
    default: return 0;
  }
}

// Bytes on the wire per byte of `type`.
double WireFraction(int wire, DataType type) {
  const double size = static_cast<double>(base::DataTypeSize(type));
  switch (wire) {
    case 1:
    case 2: return 2.0 / size;
    case 3:
    case 4: return (1.0 + 1.0 / 32) / size;
    default: return 1.0;
  }
}


// Guard bytes before and after each receive region; 64 keeps the data aligned.
constexpr size_t kGuardBytes = 64;
constexpr uint8_t kGuardByte = 0xa5;
// Room in the scratch buffer for the values the harness reduces at once.
constexpr int kMaxScalars = 8;

// "# Using devices" data as it travels: fixed size, no pointers. Each rank
// writes its own slot of a zeroed array and a uint8 sum over ranks gathers
// them, so a library needs nothing but all-reduce.
struct WireRankInfo {
  int32_t rank;
  int32_t pid;
  int32_t cuda_device;
  int32_t reserved;
  char hostname[112];
  char device[128];  // Backend::DeviceDescription
};
static_assert(sizeof(WireRankInfo) == 256, "fixed wire size");

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

class Bench {
 public:
  Bench(const Options& o, Communicator* comm, Backend* backend, Reporter* reporter)
      : o_(o),
        comm_(comm),
        rank_(comm->rank()),
        nranks_(comm->size()),
        backend_(backend),
        reporter_(reporter) {}
  // The graphs go with the buffers, after the last collective (see below).
  ~Bench() {
    for (void* g : graphs_) backend_->DestroyGraph(g);
  }

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

  Status RunType(DataType type, const std::vector<RedOp>& ops, int64_t* out_of_bounds);
  std::vector<RedOp> SkipUnsupported(DataType type, const std::vector<RedOp>& ops);
  Run MakeRun(DataType type, RedOp op, const CollCounts& counts, bool in_place) const;
  StatusOr<Measurement> Measure(const Run& run);
  Status TimeBatch(const Run& run, Measurement* m);
  Status TimeEach(const Run& run, Measurement* m);
  Status TimeGraph(const Run& run, Measurement* m);
  // `calls` collectives of `run` captured in a CUDA graph, kept until the end.
  StatusOr<void*> Capture(const Run& run, int calls);
  Status Issue(const Run& run);
  Status Prepare(const Run& run, const Pattern& pattern);
  StatusOr<int64_t> CountWrongHere(const Run& run, const Pattern& pattern);
  Status SetGuards(const Run& run);
  StatusOr<int64_t> CountGuardChanges(const Run& run);
  Status Barrier();
  // Per-rank seconds combined as -a asks: rank 0's, the mean, the min or the max.
  Status AgreeOnTimes(double* seconds, int n);
  // values[0..n) op-reduced over ranks in place, through backend memory.
  template <typename T>
  Status AllReduceValues(T* values, int n, DataType type, RedOp op);
  StatusOr<int64_t> SumOverRanks(int64_t value);

  const Options& o_;
  Communicator* comm_;
  int rank_;
  int nranks_;
  Backend* backend_;
  Reporter* reporter_;
  Buffer send_;
  Buffer recv_;                // kGuardBytes, max_bytes of data, kGuardBytes
  Buffer scalar_;              // barrier and the small all-reduces of the harness
  Buffer info_;                // GatherRankInfo's all-reduce
  // Every buffer is made in Setup, before the first collective, and freed
  // only after the last: freeing device memory (cudaFree) waits for the
  // whole device, so a rank of a process that runs several ranks would wait
  // for ring kernels that wait for this rank's next launch (seen with 8
  // thread ranks on one H100).
  char guards_[2 * kGuardBytes];      // host copy of the guard bytes around recv_
  std::vector<double> iter_seconds_;  // --median: one timing per iteration
  // --cuda-calls: while counting_, Issue adds the calls each collective
  // made on this thread (nothing else: not the timer's, not the agreement's).
  bool counting_ = false;
  base::CudaCallCounts issued_calls_;
  uint64_t issued_ = 0;
  // -G: every graph captured, destroyed with the buffers (destroying a graph
  // may wait for the device, as cudaFree does).
  std::vector<void*> graphs_;
  BenchTotals totals_;
};

Status Bench::Setup() {
  ASSIGN_OR_RETURN(send_, AllocBuffer(backend_, o_.max_bytes));
  ASSIGN_OR_RETURN(recv_, AllocBuffer(backend_, o_.max_bytes + 2 * kGuardBytes));
  ASSIGN_OR_RETURN(scalar_, AllocBuffer(backend_, kMaxScalars * sizeof(double)));
  ASSIGN_OR_RETURN(info_, AllocBuffer(backend_, sizeof(WireRankInfo) * nranks_));
  if (o_.median) iter_seconds_.resize(o_.iters);
  return Status();
}

StatusOr<std::vector<RankInfo>> Bench::GatherRankInfo() {
  std::vector<WireRankInfo> wire(nranks_);
  std::memset(wire.data(), 0, sizeof(WireRankInfo) * nranks_);
  WireRankInfo& mine = wire[rank_];
  mine.rank = rank_;
  mine.pid = static_cast<int32_t>(getpid());
  mine.cuda_device = comm_->CudaDevice();
  std::strncpy(mine.hostname, HostName().c_str(), sizeof(mine.hostname) - 1);
  std::strncpy(mine.device, backend_->DeviceDescription().c_str(), sizeof(mine.device) - 1);

  const size_t bytes = sizeof(WireRankInfo) * nranks_;
  RETURN_IF_ERROR(backend_->CopyToBackend(info_.data(), wire.data(), bytes));
  RETURN_IF_ERROR(comm_->Issue(Collective::kAllReduce, info_.data(), info_.data(), bytes,
                               DataType::kUint8, RedOp::kSum, 0, backend_->stream())
                      .WithContext("rank information"));
  RETURN_IF_ERROR(backend_->Synchronize());
  RETURN_IF_ERROR(backend_->CopyToHost(wire.data(), info_.data(), bytes));

  std::vector<RankInfo> ranks;
  for (const WireRankInfo& w : wire) {
    ranks.push_back(RankInfo{w.rank, w.pid, w.cuda_device,
                             std::string(w.hostname, strnlen(w.hostname, sizeof(w.hostname))),
                             std::string(w.device, strnlen(w.device, sizeof(w.device)))});
  }
  return ranks;
}

Status Bench::RunAll() {
  // Collectives without an operator run once per type, reported as "none".
  const std::vector<RedOp> ops = HasOp(o_.collective) ? o_.ops : std::vector<RedOp>{RedOp::kSum};
  int64_t local_out_of_bounds = 0;
  for (DataType type : o_.types) RETURN_IF_ERROR(RunType(type, ops, &local_out_of_bounds));
  ASSIGN_OR_RETURN(totals_.out_of_bounds, SumOverRanks(local_out_of_bounds));
  reporter_->Footer(totals_.out_of_bounds);
  return Status();
}

Status Bench::RunType(DataType type, const std::vector<RedOp>& ops, int64_t* out_of_bounds) {
  const std::vector<size_t> sizes = MessageSizes(o_);
  const int root = HasRoot(o_.collective) ? o_.root : -1;
  const size_t type_size = base::DataTypeSize(type);
  const std::vector<RedOp> runnable = SkipUnsupported(type, ops);
  for (RedOp op : runnable) {
    for (size_t bytes : sizes) {
      const CollCounts counts = ComputeCounts(o_.collective, bytes, type_size, nranks_);
      Row row;
      row.bytes = counts.Bytes(type_size);
      row.count = counts.param_count;
      row.type = base::DataTypeName(type);
      row.redop = HasOp(o_.collective) ? base::RedOpName(op) : "none";
      row.root = root;
      row.in_place.measured = false;
      if (WireApplies(o_, type, op)) row.wire_fraction = WireFraction(o_.wire, type);
      for (bool in_place : {false, true}) {
        if (in_place && (!o_.in_place || !HasInPlace(o_.collective))) continue;
        const Run run = MakeRun(type, op, counts, in_place);
        ASSIGN_OR_RETURN(Measurement m, Measure(run));
        ASSIGN_OR_RETURN(int64_t changed, CountGuardChanges(run));
        *out_of_bounds += changed;
        (in_place ? row.in_place : row.out_of_place) = m;
        if (m.wrong > 0) totals_.wrong += m.wrong;
      }
      reporter_->AddRow(row);
    }
  }
  return Status();
}

// The ops of `ops` the library runs with `type`; one note per reason for the
// others ("half sum, prod: skipped: unsupported: MPI has no half datatype").
std::vector<RedOp> Bench::SkipUnsupported(DataType type, const std::vector<RedOp>& ops) {
  std::vector<RedOp> runnable;
  std::vector<std::pair<std::string, std::string>> skipped;  // reason, ops
  for (RedOp op : ops) {
    const Status supported = comm_->Supports(o_.collective, type, op);
    if (supported.ok()) {
      runnable.push_back(op);
      continue;
    }
    const std::string name = HasOp(o_.collective) ? base::RedOpName(op) : "";
    auto same = std::find_if(skipped.begin(), skipped.end(),
                             [&](const auto& s) { return s.first == supported.message(); });
    if (same == skipped.end()) {
      skipped.emplace_back(supported.message(), name);
    } else {
      same->second += ", " + name;
    }
  }
  for (const auto& [reason, names] : skipped) {
    reporter_->Note(std::string(base::DataTypeName(type)) + (names.empty() ? "" : " " + names) +
                    ": skipped: " + reason);
  }
  return runnable;
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
  const Pattern pattern(o_.collective, run.op, run.type, rank_, nranks_, o_.root, run.counts,
                        WireApplies(o_, run.type, run.op) ? WireRoundoff(o_.wire) : 0);
  RETURN_IF_ERROR(SetGuards(run));
  RETURN_IF_ERROR(Prepare(run, pattern));  // timed runs see real data, not NaNs
  for (int i = 0; i < o_.warmup_iters; ++i) RETURN_IF_ERROR(Issue(run));
  RETURN_IF_ERROR(backend_->Synchronize());
  RETURN_IF_ERROR(Barrier());

  Measurement m;
  base::CudaCallCounts probe;
  counting_ = o_.cuda_calls && o_.graph_launches == 0 && comm_->CudaCalls(&probe);
  issued_calls_ = base::CudaCallCounts();
  issued_ = 0;
  const Status timed = o_.graph_launches > 0 ? TimeGraph(run, &m) : o_.median ? TimeEach(run, &m) : TimeBatch(run, &m);
  const bool counted = counting_;
  counting_ = false;
  RETURN_IF_ERROR(timed);
  if (counted) {
    m.cuda_calls = base::DescribeCudaCalls(issued_calls_, issued_);
  } else if (o_.cuda_calls && o_.graph_launches > 0) {
    // A replay is one launch by this program, whatever it holds: the
    // library's calls are those of the capture, once.
    m.cuda_calls = "a graph replay makes none (captured once, untimed)";
  }
  const double seconds = m.time_us * 1e-6;
  const double bytes = static_cast<double>(run.counts.Bytes(run.type_size));
  m.algbw = seconds > 0 ? bytes / seconds / 1e9 : 0.0;
  m.busbw = m.algbw * BusFactor(o_.collective, nranks_);

  if (o_.check) {
    RETURN_IF_ERROR(Prepare(run, pattern));
    if (o_.graph_launches > 0) {  // the result of a replay is what is checked
      ASSIGN_OR_RETURN(void* one, Capture(run, 1));
      RETURN_IF_ERROR(backend_->LaunchGraph(one));
    } else {
      RETURN_IF_ERROR(Issue(run));
    }
    RETURN_IF_ERROR(backend_->Synchronize());
    ASSIGN_OR_RETURN(int64_t wrong, CountWrongHere(run, pattern));
    ASSIGN_OR_RETURN(m.wrong, SumOverRanks(wrong));
  }
  return m;
}

// nccl-tests: -n iterations back to back, the mean per iteration.
Status Bench::TimeBatch(const Run& run, Measurement* m) {
  RETURN_IF_ERROR(backend_->StartTimer());
  for (int i = 0; i < o_.iters; ++i) RETURN_IF_ERROR(Issue(run));
  ASSIGN_OR_RETURN(double seconds, backend_->StopTimer());
  double mean = seconds / o_.iters;
  RETURN_IF_ERROR(AgreeOnTimes(&mean, 1));
  m->time_us = mean * 1e6;
  return Status();
}

// --median: each iteration timed alone (still back to back, no barrier in
// between), then this rank's median, 10th and 90th percentiles, and mean.
Status Bench::TimeEach(const Run& run, Measurement* m) {
  for (int i = 0; i < o_.iters; ++i) {
    RETURN_IF_ERROR(backend_->StartTimer());
    RETURN_IF_ERROR(Issue(run));
    ASSIGN_OR_RETURN(iter_seconds_[i], backend_->StopTimer());
  }
  std::vector<double> sorted = iter_seconds_;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double s : sorted) sum += s;
  double t[4] = {Quantile(sorted, 0.5), Quantile(sorted, 0.1), Quantile(sorted, 0.9),
                 sorted.empty() ? 0.0 : sum / static_cast<double>(sorted.size())};
  RETURN_IF_ERROR(AgreeOnTimes(t, 4));
  m->time_us = t[0] * 1e6;
  m->time_p10_us = t[1] * 1e6;
  m->time_p90_us = t[2] * 1e6;
  m->time_mean_us = t[3] * 1e6;
  return Status();
}

StatusOr<void*> Bench::Capture(const Run& run, int calls) {
  RETURN_IF_ERROR(backend_->BeginCapture());
  Status issued;
  for (int i = 0; i < calls && issued.ok(); ++i) issued = Issue(run);
  StatusOr<void*> graph = backend_->EndCapture();  // the capture ends even after a failed call
  if (graph.ok()) graphs_.push_back(*graph);       // freed with the others, whatever follows
  RETURN_IF_ERROR(issued.WithContext("a collective in CUDA graph capture"));
  return graph;
}

// -G N (nccl-tests' -G): the -n iterations captured once in a CUDA graph, the
// graph replayed once untimed, then N replays back to back: their mean per
// iteration; with --median each replay timed alone, its median (and p10,
// p90, mean) divided by -n.
Status Bench::TimeGraph(const Run& run, Measurement* m) {
  ASSIGN_OR_RETURN(void* graph, Capture(run, o_.iters));
  RETURN_IF_ERROR(backend_->LaunchGraph(graph));
  RETURN_IF_ERROR(backend_->Synchronize());
  RETURN_IF_ERROR(Barrier());
  const int n = o_.graph_launches;
  if (!o_.median) {
    RETURN_IF_ERROR(backend_->StartTimer());
    for (int i = 0; i < n; ++i) RETURN_IF_ERROR(backend_->LaunchGraph(graph));
    ASSIGN_OR_RETURN(double seconds, backend_->StopTimer());
    double mean = seconds / n / o_.iters;
    RETURN_IF_ERROR(AgreeOnTimes(&mean, 1));
    m->time_us = mean * 1e6;
    return Status();
  }
  std::vector<double> sorted(n);
  for (int i = 0; i < n; ++i) {
    RETURN_IF_ERROR(backend_->StartTimer());
    RETURN_IF_ERROR(backend_->LaunchGraph(graph));
    ASSIGN_OR_RETURN(sorted[i], backend_->StopTimer());
    sorted[i] /= o_.iters;
  }
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double s : sorted) sum += s;
  double t[4] = {Quantile(sorted, 0.5), Quantile(sorted, 0.1), Quantile(sorted, 0.9), sum / n};
  RETURN_IF_ERROR(AgreeOnTimes(t, 4));
  m->time_us = t[0] * 1e6;
  m->time_p10_us = t[1] * 1e6;
  m->time_p90_us = t[2] * 1e6;
  m->time_mean_us = t[3] * 1e6;
  return Status();
}

Status Bench::Issue(const Run& run) {
  base::CudaCallCounts before;
  if (counting_) comm_->CudaCalls(&before);
  Status s = comm_->Issue(o_.collective, run.send, run.recv, run.counts.param_count, run.type, run.op, o_.root,
                          backend_->stream());
  if (counting_) {
    base::CudaCallCounts after;
    comm_->CudaCalls(&after);
    const base::CudaCallCounts made = after.Since(before);
    for (int c = 0; c < base::kNumCudaCalls; ++c) issued_calls_.n[c] += made.n[c];
    ++issued_;
  }
  return s;
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
  return backend_->FillInput(run.type, pattern, pattern.InputFirst(), run.counts.send_count,
                             run.send);
}

// On the device where the backend can: a GPU backend copies nothing but the
// count to the host.
StatusOr<int64_t> Bench::CountWrongHere(const Run& run, const Pattern& pattern) {
  if (!pattern.HasOutput()) return int64_t{0};
  return backend_->CountWrong(run.type, pattern, pattern.OutputFirst(), run.counts.recv_count,
                              run.recv);
}

Status Bench::SetGuards(const Run& run) {
  RETURN_IF_ERROR(backend_->Fill(recv_.data(), kGuardByte, kGuardBytes));
  return backend_->Fill(recv_.data() + kGuardBytes + run.recv_used, kGuardByte, kGuardBytes);
}

StatusOr<int64_t> Bench::CountGuardChanges(const Run& run) {
  char* host = guards_;
  RETURN_IF_ERROR(backend_->CopyToHost(host, recv_.data(), kGuardBytes));
  RETURN_IF_ERROR(backend_->CopyToHost(host + kGuardBytes,
                                       recv_.data() + kGuardBytes + run.recv_used, kGuardBytes));
  const auto changed = [](char c) { return static_cast<uint8_t>(c) != kGuardByte; };
  return static_cast<int64_t>(std::count_if(host, host + 2 * kGuardBytes, changed));
}

// Not every library has a barrier: a one-element all-reduce cannot finish on
// any rank before every rank has entered it.
Status Bench::Barrier() {
  int64_t zero = 0;
  return AllReduceValues(&zero, 1, DataType::kInt64, RedOp::kSum).WithContext("barrier");
}

Status Bench::AgreeOnTimes(double* seconds, int n) {
  RedOp op = RedOp::kSum;
  double divisor = 1;
  switch (o_.average) {
    case Average::kRank0:
      if (rank_ != 0) std::fill(seconds, seconds + n, 0.0);
      break;
    case Average::kMean: divisor = nranks_; break;
    case Average::kMin: op = RedOp::kMin; break;
    case Average::kMax: op = RedOp::kMax; break;
  }
  RETURN_IF_ERROR(AllReduceValues(seconds, n, DataType::kFloat64, op).WithContext("timing"));
  for (int i = 0; i < n; ++i) seconds[i] /= divisor;
  return Status();
}

template <typename T>
Status Bench::AllReduceValues(T* values, int n, DataType type, RedOp op) {
  RINGO_CHECK(n > 0 && n <= kMaxScalars);
  const size_t bytes = sizeof(T) * n;
  RETURN_IF_ERROR(backend_->CopyToBackend(scalar_.data(), values, bytes));
  RETURN_IF_ERROR(comm_->Issue(Collective::kAllReduce, scalar_.data(), scalar_.data(), n, type,
                               op, 0, backend_->stream()));
  RETURN_IF_ERROR(backend_->Synchronize());
  return backend_->CopyToHost(values, scalar_.data(), bytes);
}

StatusOr<int64_t> Bench::SumOverRanks(int64_t value) {
  RETURN_IF_ERROR(
      AllReduceValues(&value, 1, DataType::kInt64, RedOp::kSum).WithContext("error count"));
  return value;
}

}  // namespace

StatusOr<BenchTotals> RunBenchmark(const Options& options, const std::string& program,
                                   Communicator* comm, Backend* backend, Reporter* reporter) {
  Bench bench(options, comm, backend, reporter);
  RETURN_IF_ERROR(bench.Setup());
  RunInfo info;
  info.nranks = comm->size();
  info.library = comm->Library();
  info.program = program;
  info.hostname = HostName();
  info.cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  info.build_mode = BuildMode();
  ASSIGN_OR_RETURN(info.ranks, bench.GatherRankInfo());
  info.host_memory = std::all_of(info.ranks.begin(), info.ranks.end(),
                                 [](const RankInfo& r) { return r.cuda_device < 0; });
  reporter->Header(options, info);
  if (options.wire > 0) {
    char fraction[32];
    std::snprintf(fraction, sizeof(fraction), "%.3f", WireFraction(options.wire, base::DataType::kFloat32));
    reporter->Note(std::string("wire ") + WireName(options.wire) +
                   ": fp32, bf16 and fp16 sum and avg all-reduce and reduce-scatter cross hosts in it (fp32: " +
                   fraction + " of its bytes); the last column, wirebw (GB/s), is busbw times the bytes the network "
                   "carried per byte counted; results checked within the wire's rounding");
  }
  RETURN_IF_ERROR(bench.RunAll());
  return bench.totals();
}

}  // namespace ringo::perf
