// ringo-train: the reference data-parallel trainer (docs/ringo-train.md).
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "trainer/compute.h"
#include "trainer/launch.h"
#include "trainer/mlp.h"
#include "trainer/options.h"
#include "trainer/predict.h"
#include "trainer/report.h"
#include "trainer/trainer.h"

namespace ringo::train {

extern const char kPlotScript[];  // plot.py, compiled in

namespace {

std::string ExeDir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string path(buf, n);
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string FindRingoTopo(const Options& o) {
  if (!o.ringo_topo.empty()) return o.ringo_topo;
  const std::string dir = ExeDir();
  for (const std::string& c : {dir + "/../tools/topo/ringo-topo", dir + "/ringo-topo"}) {
    if (access(c.c_str(), X_OK) == 0) return c;
  }
  return "ringo-topo";
}

// Runs plot.py (matplotlib, /usr/bin/python3) on the CSV files.
base::Status Plot(const std::string& png, const std::vector<std::string>& csvs) {
  char script[] = "/tmp/ringo-train-plot-XXXXXX";
  const int fd = mkstemp(script);
  if (fd < 0) return base::SystemError("cannot create a temporary file for the plot script");
  const std::string text = kPlotScript;
  const bool wrote = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  std::string cmd = "/usr/bin/python3 " + std::string(script) + " '" + png + "'";
  for (const std::string& c : csvs) cmd += " '" + c + "'";
  const int rc = wrote ? std::system(cmd.c_str()) : -1;
  unlink(script);
  if (rc != 0) {
    return base::SystemError("the plot failed (" + cmd +
                             "; it needs /usr/bin/python3 with matplotlib: python3-matplotlib)");
  }
  return base::OkStatus();
}

// Rank 0's report, what-if table, CSV and plot.
int Report(const Options& o, RunInfo& info, const std::string& baseline_csv) {
  PrintReport(info, stdout);
  if (info.nranks > 1 && info.fit.valid) {
    PredictInput in = MeasuredPredictInput(info);
    in.gpus_per_host = 1 << 30;  // one ring on links like the calibrated ones
    in.intra = info.fit;
    in.inter = info.fit;
    in.intra_source = "fitted by this run's calibration";
    std::printf(
        "\n== prediction from this run's compute and fitted model (--predict for other "
        "machines)\n");
    PrintPrediction(in, {1, 2, 4, 8, 16, 64, 256, 1024}, stdout);
  }
  std::fflush(stdout);
  std::string csv = o.csv;
  char tmp[] = "/tmp/ringo-train-csv-XXXXXX";
  if (csv.empty() && !o.plot.empty()) {
    const int fd = mkstemp(tmp);
    if (fd >= 0) close(fd);
    csv = tmp;
  }
  int rc = 0;
  if (!csv.empty()) {
    const base::Status s = WriteCsv(csv, {&info});
    if (!s.ok()) {
      std::fprintf(stderr, "ringo-train: %s\n", s.message().c_str());
      rc = 1;
    }
  }
  if (!o.plot.empty() && rc == 0) {
    std::vector<std::string> csvs;
    if (!baseline_csv.empty()) csvs.push_back(baseline_csv);
    csvs.push_back(csv);
    const base::Status s = Plot(o.plot, csvs);
    if (!s.ok()) {
      std::fprintf(stderr, "ringo-train: %s\n", s.message().c_str());
      rc = 1;
    } else {
      std::printf("plot: %s\n", o.plot.c_str());
    }
  }
  if (o.csv.empty() && !csv.empty()) unlink(csv.c_str());
  if (o.target_acc > 0 && info.final_test_acc < o.target_acc) {
    std::fprintf(stderr, "ringo-train: test accuracy %.2f%% is below --target-acc %.2f%%\n",
                 100 * info.final_test_acc, 100 * o.target_acc);
    rc = 1;
  }
  return rc;
}

int TrainMain(const Options& o, int rank, int nranks, const ringoUniqueId& id,
              const std::string& baseline_csv) {
  RunInfo info;
  info.name = std::to_string(nranks) + (nranks == 1 ? " rank" : " ranks");
  info.baseline_sps = o.baseline_sps;
  const base::Status status = TrainRank(o, rank, nranks, id, &info);
  if (!status.ok()) {
    std::fprintf(stderr, "ringo-train: rank %d: %s\n", rank, status.message().c_str());
    return 1;
  }
  // After an elastic shrink the report is the final rank 0's.
  return info.final_rank == 0 ? Report(o, info, baseline_csv) : 0;
}

// --baseline with -np: a 1-rank run of the same global batch in a child
// process; its samples/s (and its CSV, for the plot) come back.
double RunBaseline(const Options& o, const std::string& csv) {
  Options b = o;
  b.steps = o.baseline_steps;
  b.quiet = true;
  b.csv = csv;
  b.plot.clear();
  b.dump_params.clear();
  b.target_acc = 0;
  b.kill_rank = -1;
  b.eval_every = 0;
  int fds[2];
  if (pipe(fds) != 0) return 0;
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    RunInfo info;
    info.name = "1 rank";
    const base::Status s = TrainRank(b, 0, 1, ringoUniqueId{}, &info);
    double sps = s.ok() ? Throughput(info) : 0;
    if (!s.ok()) std::fprintf(stderr, "ringo-train: baseline: %s\n", s.message().c_str());
    if (s.ok() && !csv.empty()) (void)WriteCsv(csv, {&info});
    (void)!write(fds[1], &sps, sizeof(sps));
    std::fflush(nullptr);
    _exit(s.ok() ? 0 : 1);
  }
  close(fds[1]);
  double sps = 0;
  if (pid < 0 || read(fds[0], &sps, sizeof(sps)) != sizeof(sps)) sps = 0;
  close(fds[0]);
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  return sps;
}

// --predict: the what-if table.
int PredictMain(const Options& o) {
  std::unique_ptr<Compute> compute;
  if (o.device) {
    auto made = MakeCudaCompute(0, o.gemm);
    if (!made.ok()) {
      std::fprintf(stderr, "ringo-train: --predict --device: %s\n", made.status().message().c_str());
      return 1;
    }
    compute = std::move(*made);
  } else {
    compute = MakeCpuCompute(o.blas_threads);
  }
  const int rows = o.per_gpu_batch;
  Mlp model(compute.get(), o.model, rows);
  float* params = compute->Alloc(model.num_params());
  float* grads = compute->Alloc(model.num_params());
  float* mom = compute->Alloc(model.num_params());
  model.Bind(params, grads);
  model.Init(o.seed);
  PredictInput in;
  in.per_gpu_batch = rows;
  in.overlap = o.overlap;
  in.gpus_per_host = o.gpus_per_host;
  const size_t wire = GradDtypeBytes(o.grad_dtype);
  for (const Bucket& b :
       MakeBuckets(model.params(), static_cast<size_t>(o.bucket_mb * 1048576.0),
                   static_cast<size_t>(o.first_bucket_mb * 1048576.0))) {
    in.bucket_bytes.push_back(static_cast<double>(b.count) * wire);
  }
  if (o.compute_ms > 0) {
    in.fwd_ms_per_sample = o.compute_ms / 3;
    in.bwd_ms_per_sample = o.compute_ms * 2 / 3;
  } else {  // measured here: a few steps on random inputs
    float* x = compute->Alloc(static_cast<size_t>(rows) * o.model.inputs);
    float* d = compute->Alloc(static_cast<size_t>(rows) * o.model.classes);
    std::vector<uint8_t> labels(rows);
    for (int i = 0; i < rows; ++i) labels[i] = static_cast<uint8_t>(i % o.model.classes);
    auto* labels_dev = static_cast<uint8_t*>(compute->AllocBytes(labels.size()));
    compute->CopyIn(labels.data(), labels_dev, labels.size());
    // The backend's events time the phases (the GPU's own clock there).
    Compute::Event ev[4];
    for (Compute::Event& e : ev) e = compute->NewEvent();
    double f = 0, b = 0, opt = 0;
    const int warm = 2, timed = 8;
    for (int it = 0; it < warm + timed; ++it) {
      compute->Record(ev[0], compute->stream());
      (void)model.Forward(x, rows, true, nullptr);
      compute->SoftmaxCrossEntropy(rows, o.model.classes, model.logits(), labels_dev, 1.0f / rows, d);
      compute->Record(ev[1], compute->stream());
      (void)model.Backward(x, d, rows, false, nullptr, [](int) {});
      compute->Record(ev[2], compute->stream());
      compute->SgdStep(model.num_params(), params, grads, mom, 0.0f, 0.9f, 0.0f);
      compute->Record(ev[3], compute->stream());
      double loss = 0;
      int64_t correct = 0;
      compute->TakeMetrics(&loss, &correct);  // waits for the step
      if (it < warm) continue;
      f += compute->ElapsedMs(ev[0], ev[1]) / timed;
      b += compute->ElapsedMs(ev[1], ev[2]) / timed;
      opt += compute->ElapsedMs(ev[2], ev[3]) / timed;
    }
    for (Compute::Event e : ev) compute->FreeEvent(e);
    in.fwd_ms_per_sample = f / rows;
    in.bwd_ms_per_sample = b / rows;
    in.opt_ms = opt;
    compute->FreeBytes(labels_dev);
    compute->Free(x);
    compute->Free(d);
  }
  compute->Free(params);
  compute->Free(grads);
  compute->Free(mom);
  std::printf("model %s: %.2f M parameters; compute %s (%s)\n", o.model.Describe().c_str(),
              model.num_params() / 1e6, o.compute_ms > 0 ? "given" : "measured here",
              compute->Name().c_str());
  // Links: the command line, else the topology's model (ringo-topo), else defaults.
  in.intra = RingModel{5.0, 150.0, true};
  in.intra_source = "assumed: an NVLink-class host";
  if (!o.topo.empty()) {
    int gpus = 0;
    auto m = TopologyModel(FindRingoTopo(o), o.topo, 1, &gpus);
    if (!m.ok()) {
      std::fprintf(stderr, "ringo-train: %s\n", m.status().message().c_str());
      return 1;
    }
    in.intra = *m;
    in.gpus_per_host = gpus > 0 ? gpus : in.gpus_per_host;
    in.intra_source = "ringo-topo's model of " + o.topo;
  }
  if (o.alpha_us > 0) in.intra.alpha_us = o.alpha_us;
  if (o.beta_gbs > 0) in.intra.beta_gbs = o.beta_gbs;
  if (o.alpha_us > 0 || o.beta_gbs > 0) in.intra_source = "--alpha-us/--beta-gbs";
  in.inter = RingModel{std::max(in.intra.alpha_us, o.net_alpha_us),
                       std::min(in.intra.beta_gbs, o.net_gbs), true};
  in.inter_source = "the host's ring with a network edge of --net-gbs " + std::to_string(o.net_gbs);
  if (!o.topo.empty()) {
    int gpus = 0;
    auto m = TopologyModel(FindRingoTopo(o), o.topo, std::max(2, o.hosts), &gpus);
    if (m.ok()) {
      in.inter = *m;
      in.inter_source = "ringo-topo's model of " + o.topo + " across hosts (its NICs)";
    }
  }
  const int max_gpus = o.hosts > 0 ? o.hosts * in.gpus_per_host : o.max_gpus;
  PrintPrediction(in, PowersOfTwo(max_gpus), stdout);
  const PredictRow eight = PredictStep(in, 8);
  std::printf(
      "  rule of thumb: 8 GPUs reach about 7.5x while communication overhead stays under "
      "15%%; here 8 GPUs: %.2fx, overhead %.1f%%\n",
      eight.speedup, 100 * eight.overhead);
  return 0;
}

}  // namespace
}  // namespace ringo::train

int main(int argc, char** argv) {
  using namespace ringo::train;
  auto parsed = ParseOptions(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "ringo-train: %s\n%s", parsed.status().message().c_str(), Usage());
    return 2;
  }
  Options o = *parsed;
  if (o.help) {
    std::printf("%s", Usage());
    return 0;
  }
  if (o.predict) return PredictMain(o);
  if (o.baseline_run && o.num_procs == 0) {
    std::fprintf(stderr,
                 "ringo-train: --baseline runs a 1-rank baseline before -np N ranks; under a "
                 "launcher give one measured before with --baseline-sps X\n");
    return 2;
  }
  if (o.num_procs > 0) {
    std::string baseline_csv;
    if (o.baseline_run) {
      if (!o.plot.empty()) {
        char tmp[] = "/tmp/ringo-train-baseline-XXXXXX";
        const int fd = mkstemp(tmp);
        if (fd >= 0) close(fd);
        baseline_csv = tmp;
      }
      std::printf("baseline: 1 rank, global batch %d, %d steps\n", o.batch, o.baseline_steps);
      std::fflush(stdout);
      o.baseline_sps = RunBaseline(o, baseline_csv);
      std::printf("baseline: %.0f samples/s\n", o.baseline_sps);
    }
    const int rc = RunLocalRanks(
        o.num_procs,
        [&](int rank, int nranks, const ringoUniqueId& id) { return TrainMain(o, rank, nranks, id, baseline_csv); },
        o.elastic);
    if (!baseline_csv.empty()) unlink(baseline_csv.c_str());
    return rc;
  }
  return RunLaunchedRank([&](int rank, int nranks, const ringoUniqueId& id) {
    return TrainMain(o, rank, nranks, id, "");
  });
}
