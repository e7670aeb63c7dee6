// ringo-train's command line.
#ifndef RINGO_TRAINER_OPTIONS_H_
#define RINGO_TRAINER_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "trainer/compute.h"
#include "trainer/grad_sync.h"
#include "trainer/mlp.h"

namespace ringo::train {

struct Options {
  // Launch
  int num_procs = 0;    // -np: ranks to fork on this host (0: one, or the launcher's)
  bool host = false;    // --host
  bool device = false;  // --device
  GemmKind gemm = GemmKind::kAuto;  // --gemm (--device)
  int timeout_ms = 0;   // 0: RINGO_TIMEOUT_MS

  // Data and model
  std::string data_dir;
  ModelSpec model;
  int blas_threads = 1;
  uint64_t seed = 1;

  // Optimisation
  int batch = 256;  // global batch
  int accum = 1;
  int epochs = 10;
  int64_t steps = 0;  // 0: epochs x steps per epoch
  double lr = 0.05;
  int base_batch = 256;
  bool lr_scale_linear = true;
  int warmup_steps = -1;  // -1: one epoch when the rule scales the rate up, else none
  bool cosine = true;
  double momentum = 0.9;
  double weight_decay = 5e-4;

  // Data parallelism
  double bucket_mb = 25;
  // The first bucket's cap; the default leaves it at bucket_mb. PyTorch DDP
  // closes its first bucket at 1 MiB: measured slower here (docs/ringo-train.md).
  double first_bucket_mb = 1 << 20;
  bool overlap = true;
  bool sync_bn = false;
  GradDtype grad_dtype = GradDtype::kFp32;
  // --wire: the gradient communicator's wire format between hosts (a
  // ringoWire_t: sums in fp32, each contribution rounded once; docs/wire.md),
  // and --error-feedback: each bucket's rounding residual added to the next
  // step's gradient.
  int wire = 0;
  bool error_feedback = false;

  // Measurement and output
  int log_every = 50;
  int eval_every = 0;  // steps; 0: at the end of every epoch
  bool calibrate = true;
  std::string csv;
  std::string plot;
  bool baseline_run = false;  // --baseline: a 1-rank run first (with -np)
  double baseline_sps = 0;    // --baseline-sps
  int baseline_steps = 30;
  double target_acc = 0;  // fail unless the final test accuracy reaches it
  std::string dump_params;
  int kill_rank = -1;  // fault injection: this rank SIGKILLs itself at kill_step
  bool elastic = false;  // --elastic: survivors of a lost rank shrink and go on
  std::string elastic_dir;  // --elastic-dir: where a replacement asks to join after a loss
  int rejoin_wait_ms = 0;   // --rejoin-wait-ms: how long the survivors wait for one there
  std::string join;         // --join DIR: this process is a replacement joining through DIR
  int64_t kill_step = 0;
  bool quiet = false;

  // What-if (--predict)
  bool predict = false;
  double compute_ms = 0;   // per sample; 0: measured
  std::string topo;        // hwloc XML or ringo-topo dump
  std::string ringo_topo;  // the ringo-topo program
  int hosts = 0;           // 0: as many as the GPU count needs
  int gpus_per_host = 8;
  double net_gbs = 25;  // per host, each direction (200 Gb/s)
  double net_alpha_us = 5;
  double alpha_us = 0;  // intra-host link; 0: from --topo or the defaults
  double beta_gbs = 0;
  int max_gpus = 1024;
  int per_gpu_batch = 128;  // samples per GPU and step (weak scaling)

  bool help = false;
  std::vector<std::string> raw_args;  // as given, for the baseline child
};

// Parses argv; an error names the flag.
base::StatusOr<Options> ParseOptions(int argc, char** argv);
const char* Usage();

}  // namespace ringo::train

#endif  // RINGO_TRAINER_OPTIONS_H_
