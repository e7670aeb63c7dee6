#include "trainer/report.h"

#include <algorithm>
#include <cmath>

namespace ringo::train {
namespace {

// --wire, as the report says it.
std::string WireText(int wire, bool error_feedback) {
  if (wire == ringoWireNone) return "";
  return std::string(", ") + WireName(wire) + " between hosts (summed in fp32" +
         (error_feedback ? ", error feedback" : "") + ")";
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string Bytes(double b) {
  char buf[32];
  if (b >= 1048576) {
    std::snprintf(buf, sizeof(buf), "%.2f MiB", b / 1048576);
  } else if (b >= 1024) {
    std::snprintf(buf, sizeof(buf), "%.1f KiB", b / 1024);
  } else {
    std::snprintf(buf, sizeof(buf), "%.0f B", b);
  }
  return buf;
}

}  // namespace

int WarmupSteps(int64_t steps) { return static_cast<int>(std::min<int64_t>(5, steps / 5)); }

RankSummary Summarise(const std::vector<StepRecord>& steps) {
  RankSummary s;
  const size_t skip = WarmupSteps(static_cast<int64_t>(steps.size()));
  const double n = static_cast<double>(steps.size() - skip);
  if (n <= 0) return s;
  for (size_t i = skip; i < steps.size(); ++i) {
    const StepRecord& r = steps[i];
    s.data_ms += r.data_ms / n;
    s.fwd_ms += r.fwd_ms / n;
    s.bwd_ms += r.bwd_ms / n;
    s.exposed_ms += r.exposed_ms / n;
    s.opt_ms += r.opt_ms / n;
    s.step_ms += r.step_ms / n;
  }
  return s;
}

std::vector<BucketSummary> SummariseBuckets(const RunInfo& info) {
  const size_t nb = info.buckets.size();
  std::vector<BucketSummary> out(nb);
  if (info.rank_buckets.empty() || nb == 0) return out;
  const double wire = static_cast<double>(GradDtypeBytes(info.grad_dtype));
  for (size_t b = 0; b < nb; ++b) {
    BucketSummary& s = out[b];
    s.bytes = static_cast<double>(info.buckets[b].count) * wire;
    s.model_ms = info.fit.PredictMs(s.bytes, info.nranks);
    for (const auto& rank : info.rank_buckets) {
      // Each rank's own count: a replacement that joined late holds fewer.
      const size_t steps = rank.size() / nb;
      const size_t skip = WarmupSteps(static_cast<int64_t>(steps));
      std::vector<double> ready, start, wait, ar, conv;
      for (size_t i = skip; i < steps; ++i) {
        const BucketTiming& t = rank[i * nb + b];
        ready.push_back(t.ready_ms);
        start.push_back(t.start_ms);
        wait.push_back(t.wait_ms);
        ar.push_back(t.allreduce_ms);
        conv.push_back(t.convert_ms);
      }
      s.ready_ms = std::max(s.ready_ms, Median(ready));
      s.start_ms = std::max(s.start_ms, Median(start));
      s.wait_ms = std::max(s.wait_ms, Median(wait));
      s.allreduce_ms = std::max(s.allreduce_ms, Median(ar));
      s.convert_ms = std::max(s.convert_ms, Median(conv));
    }
  }
  return out;
}

double Throughput(const RunInfo& info) {
  double slowest = 0;
  for (const auto& steps : info.rank_steps) slowest = std::max(slowest, Summarise(steps).step_ms);
  return slowest > 0 ? info.global_batch / slowest * 1e3 : 0;
}

PredictInput MeasuredPredictInput(const RunInfo& info) {
  PredictInput in;
  if (info.rank_steps.empty()) return in;
  const RankSummary s = Summarise(info.rank_steps[0]);
  const double samples = static_cast<double>(info.micro) * info.accum;
  in.fwd_ms_per_sample = (s.fwd_ms + s.data_ms) / samples;
  in.bwd_ms_per_sample = s.bwd_ms / samples;
  in.opt_ms = s.opt_ms;
  in.per_gpu_batch = static_cast<int>(samples);
  for (const Bucket& b : info.buckets) {
    in.bucket_bytes.push_back(static_cast<double>(b.count) * GradDtypeBytes(info.grad_dtype));
  }
  in.overlap = info.overlap;
  return in;
}

void PrintReport(const RunInfo& info, FILE* out) {
  const int n = info.nranks;
  double grad_bytes = 0;
  for (const Bucket& b : info.buckets) grad_bytes += b.count * 4.0;
  std::fprintf(out, "\n== ringo-train: %s, model %s (%.2f M parameters, %s of fp32 gradient), %s\n",
               info.name.c_str(), info.model.c_str(), info.params / 1e6, Bytes(grad_bytes).c_str(),
               info.compute.c_str());
  std::fprintf(
      out,
      "   global batch %d = %d per micro-batch x %d micro-batch%s x %d rank%s; %zu bucket%s, "
      "%s gradients%s, overlap %s%s\n",
      info.global_batch, info.micro, info.accum, info.accum == 1 ? "" : "es", n, n == 1 ? "" : "s",
      info.buckets.size(), info.buckets.size() == 1 ? "" : "s", GradDtypeName(info.grad_dtype),
      WireText(info.wire, info.error_feedback).c_str(), info.overlap ? "on" : "off",
      info.sync_bn ? ", SyncBatchNorm" : "");
  for (const std::string& r : info.recoveries) std::fprintf(out, "   elastic recovery: %s\n", r.c_str());
  if (n > 1 && !info.calibration.empty()) {
    std::fprintf(out,
                 "\n== calibration: ringoAllReduce avg %s on ringoMemAlloc buffers, median per "
                 "size, slowest rank\n",
                 GradDtypeName(info.grad_dtype));
    std::fprintf(out, "   %12s %12s %12s %12s %8s\n", "size", "time ms", "busbw GB/s", "model ms",
                 "error");
    for (const CalibrationPoint& p : info.calibration) {
      const double model = info.fit.PredictMs(p.bytes, n);
      std::fprintf(out, "   %12s %12.3f %12.2f %12.3f %7.1f%%\n", Bytes(p.bytes).c_str(), p.ms,
                   p.bytes / (p.ms * 1e6) * 2.0 * (n - 1) / n, model, 100 * (model / p.ms - 1));
    }
    std::fprintf(out,
                 "   fitted ring model: alpha = %.2f us, beta = %.2f GB/s (t = 2(N-1)(alpha + S/(N "
                 "beta)), fitted on %s..%s, the buckets' range; largest error there %.1f%%)\n",
                 info.fit.alpha_us, info.fit.beta_gbs, Bytes(info.fit_lo).c_str(),
                 Bytes(info.fit_hi).c_str(), 100 * info.fit_error);
  }
  if (n > 1) {
    std::fprintf(out,
                 "   topology model: not available to a client: include/ringo/ringo.h has no "
                 "topology query (ringo-topo prints the GPU rings' model; --predict --topo FILE "
                 "uses it)\n");
  }
  const int skip = WarmupSteps(info.rank_steps.empty() ? 0 : info.rank_steps[0].size());
  std::fprintf(
      out, "\n== per rank: mean ms per step over steps %d..%zu (the first %d left out: warm-up)\n",
      skip + 1, info.rank_steps.empty() ? size_t{0} : info.rank_steps[0].size(), skip);
  std::fprintf(out, "   %4s %8s %8s %8s %10s %8s %9s %11s %9s\n", "rank", "data", "forward",
               "backward", "exposed", "optim", "step", "samples/s", "overhead");
  for (int r = 0; r < static_cast<int>(info.rank_steps.size()); ++r) {
    const RankSummary s = Summarise(info.rank_steps[r]);
    std::fprintf(out, "   %4d %8.2f %8.2f %8.2f %10.3f %8.2f %9.2f %11.0f %8.1f%%\n", r, s.data_ms,
                 s.fwd_ms, s.bwd_ms, s.exposed_ms, s.opt_ms, s.step_ms,
                 s.step_ms > 0 ? info.global_batch / s.step_ms * 1e3 : 0,
                 s.step_ms > 0 ? 100 * s.exposed_ms / s.step_ms : 0);
  }
  const std::vector<BucketSummary> buckets = SummariseBuckets(info);
  double measured_total = 0, model_total = 0;
  if (n > 1) {
    std::fprintf(out,
                 "\n== per bucket: medians over the same steps, slowest rank; times from the start "
                 "of the last backward pass\n");
    std::fprintf(out, "   %3s %-28s %11s %8s %8s %8s %10s %8s %10s %10s\n", "#", "parameters",
                 "size", "ready", "start", "wait", "allreduce", "convert", "model", "meas/model");
    for (size_t b = 0; b < buckets.size(); ++b) {
      const BucketSummary& s = buckets[b];
      measured_total += s.allreduce_ms;
      model_total += s.model_ms;
      char ratio[32] = "-";
      if (s.model_ms > 0) std::snprintf(ratio, sizeof(ratio), "%.2f", s.allreduce_ms / s.model_ms);
      std::fprintf(out, "   %3zu %-28s %11s %8.2f %8.2f %8.3f %10.3f %8.3f %10.3f %10s\n", b,
                   info.buckets[b].layers.c_str(), Bytes(s.bytes).c_str(), s.ready_ms, s.start_ms,
                   s.wait_ms, s.allreduce_ms, s.convert_ms, s.model_ms, ratio);
    }
    std::fprintf(out,
                 "   (ready: the backward pass completed it; start: its all-reduce began; wait: "
                 "without overlap, a barrier before bucket 0, the wait for the slowest rank; "
                 "allreduce: the ringoAllReduce call; convert: bf16/fp16 conversions)\n");
  }
  std::fprintf(out, "\n== summary\n");
  const double sps = Throughput(info);
  double exposed = 0, step = 0;
  for (const auto& steps : info.rank_steps) {
    const RankSummary s = Summarise(steps);
    exposed = std::max(exposed, s.exposed_ms);
    step = std::max(step, s.step_ms);
  }
  std::fprintf(out,
               "   throughput: %.0f samples/s (global batch / slowest rank's mean step %.2f ms)\n",
               sps, step);
  if (n > 1) {
    std::fprintf(out, "   communication overhead: %.1f%% (exposed %.3f ms / step %.2f ms)\n",
                 step > 0 ? 100 * exposed / step : 0, exposed, step);
    if (info.fit.valid) {
      std::fprintf(out,
                   "   all-reduce per step: measured %.3f ms, ring model %.3f ms (measured/model "
                   "%.2f)\n",
                   measured_total, model_total, model_total > 0 ? measured_total / model_total : 0);
    }
  }
  if (info.baseline_sps > 0) {
    const double speedup = sps / info.baseline_sps;
    std::fprintf(out,
                 "   scaling: %.2fx the 1-rank baseline (%.0f samples/s, same global batch): "
                 "efficiency %.1f%%\n",
                 speedup, info.baseline_sps, 100 * speedup / n);
  } else if (n > 1) {
    std::fprintf(out,
                 "   scaling efficiency: no 1-rank baseline (--baseline, or --baseline-sps X)\n");
  }
  if (info.final_test_acc >= 0) {
    std::fprintf(out, "   test accuracy: %.2f%% after %lld steps (%.1f s)\n",
                 100 * info.final_test_acc, static_cast<long long>(info.steps), info.wall_s);
  }
}

base::Status WriteCsv(const std::string& path, const std::vector<const RunInfo*>& runs) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return base::SystemError("cannot write " + path);
  std::fprintf(
      f,
      "kind,run,ranks,rank,step,epoch,bucket,bytes,data_ms,fwd_ms,bwd_ms,exposed_ms,"
      "opt_ms,step_ms,ready_ms,start_ms,wait_ms,allreduce_ms,model_ms,loss,acc,test_acc,lr\n");
  for (const RunInfo* run : runs) {
    const char* name = run->name.c_str();
    const int n = run->nranks;
    for (const CalibrationPoint& p : run->calibration) {
      std::fprintf(f, "calibration,%s,%d,,,,,%.0f,,,,,,,,,,%.6f,%.6f,,,,\n", name, n, p.bytes, p.ms,
                   run->fit.PredictMs(p.bytes, n));
    }
    const size_t nb = run->buckets.size();
    for (int r = 0; r < static_cast<int>(run->rank_steps.size()); ++r) {
      const auto& steps = run->rank_steps[r];
      for (size_t i = 0; i < steps.size(); ++i) {
        const StepRecord& s = steps[i];
        std::fprintf(
            f, "step,%s,%d,%d,%.0f,%.0f,,,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,,,,,,%.6f,%.6f,,%.6g\n",
            name, n, r, s.step, s.epoch, s.data_ms, s.fwd_ms, s.bwd_ms, s.exposed_ms, s.opt_ms,
            s.step_ms, s.loss, s.acc, s.lr);
        if (r >= static_cast<int>(run->rank_buckets.size())) continue;
        for (size_t b = 0; b < nb && (i + 1) * nb <= run->rank_buckets[r].size(); ++b) {
          const BucketTiming& t = run->rank_buckets[r][i * nb + b];
          const double bytes =
              static_cast<double>(run->buckets[b].count) * GradDtypeBytes(run->grad_dtype);
          std::fprintf(f, "bucket,%s,%d,%d,%.0f,%.0f,%zu,%.0f,,,,,,,%.4f,%.4f,%.4f,%.4f,%.4f,,,,\n",
                       name, n, r, s.step, s.epoch, b, bytes, t.ready_ms, t.start_ms, t.wait_ms,
                       t.allreduce_ms, run->fit.PredictMs(bytes, n));
        }
      }
    }
    for (const EvalRecord& e : run->evals) {
      std::fprintf(f, "eval,%s,%d,,%lld,%d,,,,,,,,,,,,,,%.6f,%.6f,%.6f,\n", name, n,
                   static_cast<long long>(e.step), e.epoch, e.train_loss, e.train_acc, e.test_acc);
    }
  }
  const bool ok = std::fclose(f) == 0;
  return ok ? base::OkStatus() : base::SystemError("cannot finish writing " + path);
}

}  // namespace ringo::train
