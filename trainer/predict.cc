#include "trainer/predict.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace ringo::train {

PredictRow PredictStep(const PredictInput& in, int gpus) {
  PredictRow row;
  row.gpus = gpus;
  row.hosts = (gpus + in.gpus_per_host - 1) / in.gpus_per_host;
  const RingModel& link = row.hosts > 1 ? in.inter : in.intra;
  const double fwd = in.fwd_ms_per_sample * in.per_gpu_batch;
  const double bwd = in.bwd_ms_per_sample * in.per_gpu_batch;
  double total = 0;
  for (double b : in.bucket_bytes) total += b;
  double produced = 0, comm_free = 0, end = 0;
  for (double b : in.bucket_bytes) {
    produced += b;
    const double ready = in.overlap && total > 0 ? bwd * produced / total : bwd;
    const double t = link.PredictMs(b, gpus);
    row.comm_ms += t;
    const double start = std::max(ready, comm_free);
    end = start + t;
    comm_free = end;
  }
  row.exposed_ms = std::max(0.0, end - bwd);
  row.step_ms = fwd + bwd + row.exposed_ms + in.opt_ms;
  row.overhead = row.step_ms > 0 ? row.exposed_ms / row.step_ms : 0;
  const double one = fwd + bwd + in.opt_ms;
  row.efficiency = row.step_ms > 0 ? one / row.step_ms : 1;
  row.speedup = gpus * row.efficiency;
  return row;
}

std::vector<int> PowersOfTwo(int max) {
  std::vector<int> v;
  for (int n = 1; n <= max; n *= 2) v.push_back(n);
  return v;
}

void PrintPrediction(const PredictInput& in, const std::vector<int>& gpus, FILE* out) {
  double total = 0;
  for (double b : in.bucket_bytes) total += b;
  std::fprintf(out,
               "what-if (weak scaling: %d samples per GPU and step; compute %.3f ms/sample forward "
               "+ %.3f backward, optimizer %.2f ms; %.1f MB of gradient in %zu bucket%s, overlap "
               "%s)\n",
               in.per_gpu_batch, in.fwd_ms_per_sample, in.bwd_ms_per_sample, in.opt_ms, total / 1e6,
               in.bucket_bytes.size(), in.bucket_bytes.size() == 1 ? "" : "s",
               in.overlap ? "on" : "off");
  const std::string host = in.gpus_per_host >= (1 << 20)
                               ? std::string("every ring")
                               : "within a host (" + std::to_string(in.gpus_per_host) + " GPUs)";
  std::fprintf(out, "  %-23s alpha %.2f us, beta %.2f GB/s  [%s]\n", (host + ":").c_str(),
               in.intra.alpha_us, in.intra.beta_gbs, in.intra_source.c_str());
  if (in.gpus_per_host < (1 << 20)) {
    std::fprintf(out, "  %-23s alpha %.2f us, beta %.2f GB/s  [%s]\n",
                 "across hosts:", in.inter.alpha_us, in.inter.beta_gbs, in.inter_source.c_str());
  }
  std::fprintf(out,
               "  assumptions: one ring over all GPUs, t = 2(N-1)(alpha + S/(N beta)) per bucket, "
               "the slowest edge sets alpha and beta; the backward pass produces gradient bytes at "
               "an even rate; one communication thread; no contention between compute and "
               "communication\n");
  std::fprintf(out,
               "  an 8 B all-reduce (a metric, a barrier): the ring's 2(N-1) steps beside recursive "
               "doubling's log2 N (Ringo's choice for small all-reduces of host communicators "
               "across hosts, from the same model; GPU communicators run the ring)\n");
  std::fprintf(out, "  %6s %5s %12s %12s %12s %9s %10s %9s %11s %11s\n", "GPUs", "hosts", "allreduce ms",
               "exposed ms", "step ms", "overhead", "efficiency", "speedup", "8B ring us", "8B dbl us");
  for (int n : gpus) {
    const PredictRow r = PredictStep(in, n);
    const RingModel& link = r.hosts > 1 ? in.inter : in.intra;
    std::fprintf(out, "  %6d %5d %12.3f %12.3f %12.3f %8.1f%% %9.1f%% %8.1fx %11.1f %11.1f\n", r.gpus, r.hosts,
                 r.comm_ms, r.exposed_ms, r.step_ms, 100 * r.overhead, 100 * r.efficiency,
                 r.speedup, 1e3 * link.PredictMs(8, n), 1e3 * link.PredictDoublingMs(8, n));
  }
}

namespace {

// The number after "key": in a JSON text (the first occurrence after `from`).
bool JsonNumber(const std::string& text, size_t from, const std::string& key, double* out) {
  const size_t at = text.find("\"" + key + "\":", from);
  if (at == std::string::npos) return false;
  *out = std::strtod(text.c_str() + at + key.size() + 3, nullptr);
  return true;
}

}  // namespace

base::StatusOr<RingModel> TopologyModel(const std::string& ringo_topo, const std::string& file,
                                        int hosts, int* gpus) {
  std::ifstream in(file);
  if (!in) return base::InvalidArgument("cannot read --topo " + file);
  std::string head(256, '\0');
  in.read(&head[0], static_cast<std::streamsize>(head.size()));
  const bool xml =
      head.find("<?xml") != std::string::npos || head.find("<topology") != std::string::npos;
  std::string cmd = "'" + ringo_topo + "' --json " + (xml ? "--xml '" : "--load '") + file + "'";
  if (hosts > 1) cmd += " --hosts " + std::to_string(hosts);
  cmd += " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return base::SystemError("cannot run " + cmd);
  std::string text;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) text.append(buf, n);
  const int rc = pclose(p);
  const size_t pred = text.find("\"prediction\"");
  if (rc != 0 || pred == std::string::npos) {
    return base::InvalidArgument(cmd + " gave no prediction: " + text.substr(0, 400));
  }
  RingModel m;
  double nranks = 0;
  if (!JsonNumber(text, pred, "alpha_us", &m.alpha_us) ||
      !JsonNumber(text, pred, "beta_gbps", &m.beta_gbs) ||
      !JsonNumber(text, pred, "nranks", &nranks) || m.beta_gbs <= 0) {
    return base::InvalidArgument(cmd + ": no alpha_us, beta_gbps and nranks in its prediction");
  }
  m.valid = true;
  *gpus = static_cast<int>(nranks);
  return m;
}

}  // namespace ringo::train
