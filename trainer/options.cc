#include "trainer/options.h"

#include <cerrno>
#include <cstdlib>
#include <functional>
#include <map>

#include "trainer/data.h"

namespace ringo::train {
namespace {

using base::InvalidArgument;
using base::Status;

Status ParseInt(const std::string& flag, const std::string& text, int64_t lo, int64_t hi,
                int64_t* out) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0' || v < lo || v > hi) {
    return InvalidArgument(flag + " needs a whole number from " + std::to_string(lo) + " to " +
                           std::to_string(hi) + ", not '" + text + "'");
  }
  *out = v;
  return base::OkStatus();
}

Status ParseDouble(const std::string& flag, const std::string& text, double lo, double hi,
                   double* out) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || errno != 0 || *end != '\0' || !(v >= lo && v <= hi)) {
    return InvalidArgument(flag + " needs a number from " + std::to_string(lo) + " to " +
                           std::to_string(hi) + ", not '" + text + "'");
  }
  *out = v;
  return base::OkStatus();
}

template <typename T>
std::function<Status(const std::string&, const std::string&)> Int(T* out, int64_t lo, int64_t hi) {
  return [=](const std::string& flag, const std::string& v) {
    int64_t x = 0;
    RETURN_IF_ERROR(ParseInt(flag, v, lo, hi, &x));
    *out = static_cast<T>(x);
    return base::OkStatus();
  };
}

std::function<Status(const std::string&, const std::string&)> Real(double* out, double lo,
                                                                   double hi) {
  return [=](const std::string& flag, const std::string& v) {
    return ParseDouble(flag, v, lo, hi, out);
  };
}

std::function<Status(const std::string&, const std::string&)> Text(std::string* out) {
  return [=](const std::string&, const std::string& v) {
    *out = v;
    return base::OkStatus();
  };
}

}  // namespace

const char* Usage() {
  return "usage: ringo-train [options]\n"
         "Trains an MLP on Fashion-MNIST, data parallel over Ringo's C API, and measures\n"
         "where the step time goes against the ring all-reduce model\n"
         "t = 2(N-1)(alpha + S/(N beta)). Without -np, rank and size come from mpirun,\n"
         "srun or torchrun (as ringo-perf); alone it is one rank.\n"
         "Launch:\n"
         "  -np N                fork N ranks on this host\n"
         "  --host               host memory (what the CPU backend uses anyway)\n"
         "  --device             GPU memory and compute: each rank on a GPU of its host (in\n"
         "                       turn, so ranks may share one), gradients all-reduced by\n"
         "                       Ringo's kernels on a stream of their own\n"
         "  --gemm auto|cublas|own  --device's matrix products: cuBLAS loaded from the\n"
         "                       machine, or ringo-train's own kernel (default auto: cuBLAS\n"
         "                       where it loads)\n"
         "  --timeout-ms MS      deadline of a wait on a peer (default RINGO_TIMEOUT_MS)\n"
         "Data and model:\n"
         "  --data DIR           IDX files (default /usr/share/datasets/fashion-mnist)\n"
         "  --width W --depth D  hidden layers (default 1024 x 9)\n"
         "  --bn                 batch normalisation after each hidden Linear\n"
         "  --blas-threads T     OpenBLAS threads per rank (default 1)\n"
         "  --seed S             weights and shuffling (default 1)\n"
         "Optimisation:\n"
         "  --batch B            global batch = micro x accum x ranks (default 256)\n"
         "  --accum A            micro-batches per step, all-reduce after the last (default 1)\n"
         "  --epochs E           (default 10)    --steps S   stop after S steps\n"
         "  --lr LR              learning rate at --base-batch (default 0.05, 256)\n"
         "  --lr-scale linear|none  linear: LR x batch / base-batch, warmed up (default)\n"
         "  --warmup-steps N     ramp from LR to the scaled rate (default: one epoch if scaled "
         "up)\n"
         "  --schedule cosine|constant  decay after warm-up (default cosine)\n"
         "  --momentum M --weight-decay WD  (default 0.9, 5e-4)\n"
         "Data parallelism:\n"
         "  --bucket-mb MB       gradient bucket size, MiB (default 25, as PyTorch DDP)\n"
         "  --first-bucket-mb MB the first bucket's size, MiB (default: as --bucket-mb;\n"
         "                       PyTorch DDP's is 1)\n"
         "  --no-overlap         all-reduce after the backward pass, not during it\n"
         "  --sync-bn            batch-norm statistics over all ranks (SyncBatchNorm)\n"
         "  --grad-dtype fp32|bf16|fp16  cast the gradients before the all-reduce (default\n"
         "                       fp32); every hop of the ring then rounds its partial sum\n"
         "  --wire none|bf16|fp16|e4m3|e5m2  compress the gradients between hosts only,\n"
         "                       summed in fp32, each contribution rounded once (default\n"
         "                       none; docs/wire.md)\n"
         "  --error-feedback     with --wire: add each bucket's rounding residual to the\n"
         "                       next step's gradient\n"
         "Measurement and output:\n"
         "  --log-every N        a line every N steps (default 50)\n"
         "  --eval-every N       test accuracy every N steps (default: every epoch)\n"
         "  --no-calibrate       skip the all-reduce calibration (no model column)\n"
         "  --csv FILE           every step, bucket and evaluation of every rank\n"
         "  --plot FILE.png      loss/accuracy against step and the step-time breakdown\n"
         "  --baseline           with -np: first a 1-rank run of the same global batch\n"
         "  --baseline-steps N   its length (default 30)\n"
         "  --baseline-sps X     a 1-rank run's samples/s, measured before\n"
         "  --target-acc A       exit 1 unless the final test accuracy reaches A (0..1)\n"
         "  --dump-params FILE   rank 0 writes the final parameters (raw float32)\n"
         "  --kill-rank R --kill-step S  fault injection: rank R kills itself at step S\n"
         "  --elastic            a lost rank does not end the run: the others agree on who\n"
         "                       failed, shrink, share its part of the batch and redo the step\n"
         "  --elastic-dir DIR    after a loss, a replacement may ask to join through DIR\n"
         "  --rejoin-wait-ms T   how long the survivors wait there for one (default 0: no wait)\n"
         "  --join DIR           this process replaces a lost rank of the job using DIR\n"
         "                       (the same training options; it starts from the job's state)\n"
         "  --quiet              the summary only\n"
         "What-if (--predict): step time, overhead and scaling efficiency for 1..1024 GPUs\n"
         "  --compute-ms X       compute time per sample (default: measured here, 1 rank)\n"
         "  --topo FILE          hwloc XML or ringo-topo dump: alpha and beta from ringo-topo\n"
         "  --ringo-topo PATH    the ringo-topo program (default: beside ringo-train, PATH)\n"
         "  --gpus-per-host G    (default 8)   --hosts N  (default: as many as needed)\n"
         "  --alpha-us A --beta-gbs B  intra-host link (default: --topo, else NVLink-class 5 us, "
         "150)\n"
         "  --net-gbs B --net-alpha-us A  per-host network (default 25 GB/s, 5 us)\n"
         "  --per-gpu-batch N    samples per GPU and step (default 128)\n"
         "  --max-gpus N         (default 1024)\n";
}

base::StatusOr<Options> ParseOptions(int argc, char** argv) {
  Options o;
  o.data_dir = kDefaultDataDir;
  std::string lr_scale = "linear", schedule = "cosine", grad_dtype = "fp32", wire = "none";
  std::string gemm = "auto";
  using Setter = std::function<Status(const std::string&, const std::string&)>;
  const std::map<std::string, Setter> valued = {
      {"-np", Int(&o.num_procs, 1, 1024)},
      {"--timeout-ms", Int(&o.timeout_ms, 1, int64_t{1} << 30)},
      {"--data", Text(&o.data_dir)},
      {"--width", Int(&o.model.width, 1, 1 << 16)},
      {"--depth", Int(&o.model.depth, 0, 1000)},
      {"--blas-threads", Int(&o.blas_threads, 1, 256)},
      {"--seed", Int(&o.seed, 0, int64_t{1} << 62)},
      {"--batch", Int(&o.batch, 1, 1 << 24)},
      {"--accum", Int(&o.accum, 1, 1 << 16)},
      {"--epochs", Int(&o.epochs, 1, 100000)},
      {"--steps", Int(&o.steps, 1, int64_t{1} << 40)},
      {"--lr", Real(&o.lr, 0, 1e6)},
      {"--base-batch", Int(&o.base_batch, 1, 1 << 24)},
      {"--lr-scale", Text(&lr_scale)},
      {"--warmup-steps", Int(&o.warmup_steps, 0, 1 << 30)},
      {"--schedule", Text(&schedule)},
      {"--momentum", Real(&o.momentum, 0, 1)},
      {"--weight-decay", Real(&o.weight_decay, 0, 1)},
      {"--bucket-mb", Real(&o.bucket_mb, 0, 1 << 20)},
      {"--first-bucket-mb", Real(&o.first_bucket_mb, 0, 1 << 20)},
      {"--grad-dtype", Text(&grad_dtype)},
      {"--wire", Text(&wire)},
      {"--gemm", Text(&gemm)},
      {"--log-every", Int(&o.log_every, 0, 1 << 30)},
      {"--eval-every", Int(&o.eval_every, 0, 1 << 30)},
      {"--csv", Text(&o.csv)},
      {"--plot", Text(&o.plot)},
      {"--baseline-steps", Int(&o.baseline_steps, 1, 1 << 30)},
      {"--baseline-sps", Real(&o.baseline_sps, 0, 1e12)},
      {"--target-acc", Real(&o.target_acc, 0, 1)},
      {"--dump-params", Text(&o.dump_params)},
      {"--elastic-dir", Text(&o.elastic_dir)},
      {"--join", Text(&o.join)},
      {"--rejoin-wait-ms", Int(&o.rejoin_wait_ms, 0, 1 << 30)},
      {"--kill-rank", Int(&o.kill_rank, 0, 1 << 20)},
      {"--kill-step", Int(&o.kill_step, 0, int64_t{1} << 40)},
      {"--compute-ms", Real(&o.compute_ms, 0, 1e9)},
      {"--topo", Text(&o.topo)},
      {"--ringo-topo", Text(&o.ringo_topo)},
      {"--hosts", Int(&o.hosts, 1, 1 << 20)},
      {"--gpus-per-host", Int(&o.gpus_per_host, 1, 1 << 16)},
      {"--net-gbs", Real(&o.net_gbs, 1e-6, 1e9)},
      {"--net-alpha-us", Real(&o.net_alpha_us, 0, 1e9)},
      {"--alpha-us", Real(&o.alpha_us, 0, 1e9)},
      {"--beta-gbs", Real(&o.beta_gbs, 0, 1e9)},
      {"--max-gpus", Int(&o.max_gpus, 1, 1 << 24)},
      {"--per-gpu-batch", Int(&o.per_gpu_batch, 1, 1 << 24)},
  };
  const std::map<std::string, bool*> flags = {
      {"--host", &o.host},
      {"--device", &o.device},
      {"--bn", &o.model.batch_norm},
      {"--sync-bn", &o.sync_bn},
      {"--baseline", &o.baseline_run},
      {"--predict", &o.predict},
      {"--quiet", &o.quiet},
      {"--elastic", &o.elastic},
      {"--error-feedback", &o.error_feedback},
      {"--help", &o.help},
      {"-h", &o.help},
  };
  bool no_overlap = false, no_calibrate = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    o.raw_args.push_back(a);
    std::string value;
    bool has_value = false;
    const size_t eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_value = true;
    }
    if (a == "--no-overlap") {
      no_overlap = true;
    } else if (a == "--no-calibrate") {
      no_calibrate = true;
    } else if (auto f = flags.find(a); f != flags.end()) {
      if (has_value) return InvalidArgument(a + " takes no value");
      *f->second = true;
    } else if (auto v = valued.find(a); v != valued.end()) {
      if (!has_value) {
        if (i + 1 >= argc) return InvalidArgument(a + " needs a value");
        value = argv[++i];
        o.raw_args.push_back(value);
      }
      RETURN_IF_ERROR(v->second(a, value));
    } else {
      return InvalidArgument("unknown option '" + a + "' (--help lists them)");
    }
  }
  o.overlap = !no_overlap;
  o.calibrate = !no_calibrate;
  if (lr_scale != "linear" && lr_scale != "none") {
    return InvalidArgument("--lr-scale is linear or none, not '" + lr_scale + "'");
  }
  o.lr_scale_linear = lr_scale == "linear";
  if (schedule != "cosine" && schedule != "constant") {
    return InvalidArgument("--schedule is cosine or constant, not '" + schedule + "'");
  }
  o.cosine = schedule == "cosine";
  if (grad_dtype == "fp32") {
    o.grad_dtype = GradDtype::kFp32;
  } else if (grad_dtype == "bf16") {
    o.grad_dtype = GradDtype::kBf16;
  } else if (grad_dtype == "fp16") {
    o.grad_dtype = GradDtype::kFp16;
  } else {
    return InvalidArgument("--grad-dtype is fp32, bf16 or fp16, not '" + grad_dtype + "'");
  }
  if (!ParseWireName(wire, &o.wire)) {
    return InvalidArgument("--wire is none, bf16, fp16, e4m3 (fp8) or e5m2, not '" + wire + "'");
  }
  if (o.error_feedback && o.wire == ringoWireNone) return InvalidArgument("--error-feedback needs --wire");
  if (o.error_feedback && o.grad_dtype != GradDtype::kFp32) {
    return InvalidArgument("--error-feedback keeps fp32 residuals of fp32 gradients: leave --grad-dtype out");
  }
  if (o.host && o.device) return InvalidArgument("--host and --device exclude each other");
  if (gemm == "auto") {
    o.gemm = GemmKind::kAuto;
  } else if (gemm == "cublas") {
    o.gemm = GemmKind::kCublas;
  } else if (gemm == "own") {
    o.gemm = GemmKind::kOwn;
  } else {
    return InvalidArgument("--gemm is auto, cublas or own, not '" + gemm + "'");
  }
  if (o.device) {
    // What the GPU path does not do yet, said rather than done differently.
    if (o.grad_dtype != GradDtype::kFp32) {
      return InvalidArgument("--device all-reduces fp32 gradients: leave --grad-dtype out");
    }
    if (o.wire != ringoWireNone) {
      return InvalidArgument("--device: GPU communicators have no compressed wire yet: leave --wire out");
    }
    if (o.elastic || !o.elastic_dir.empty() || !o.join.empty()) {
      return InvalidArgument("--device: --elastic waits for the elastic GPU test to pass on a GPU (docs/gpu.md)");
    }
  }
  if (o.sync_bn && !o.model.batch_norm) o.model.batch_norm = true;  // SyncBatchNorm implies BN
  if (!o.elastic_dir.empty() || !o.join.empty()) o.elastic = true;
  // A replacement is one of the job's ranks from then on: it takes part in
  // the next recovery's question whether another one joins.
  if (!o.join.empty() && o.elastic_dir.empty()) o.elastic_dir = o.join;
  if (!o.join.empty() && o.num_procs > 1) return InvalidArgument("--join is one process: leave -np out");
  // The other survivors wait for rank 0's answer in a collective meanwhile.
  const int timeout = o.timeout_ms > 0 ? o.timeout_ms : 300000;
  if (o.rejoin_wait_ms >= timeout) {
    return InvalidArgument("--rejoin-wait-ms must be below the communicators' timeout (" + std::to_string(timeout) +
                           " ms)");
  }
  return o;
}

}  // namespace ringo::train
