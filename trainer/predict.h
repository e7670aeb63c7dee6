// What-if: step time, communication overhead and scaling efficiency of
// data-parallel training on 1..N GPUs from a compute time per sample, the
// gradient's buckets and an alpha-beta ring model per link kind. Pure
// functions; the assumptions are printed with the table.
#ifndef RINGO_TRAINER_PREDICT_H_
#define RINGO_TRAINER_PREDICT_H_

#include <cstdio>
#include <string>
#include <vector>

#include "base/status.h"
#include "trainer/ring_model.h"

namespace ringo::train {

struct PredictInput {
  double fwd_ms_per_sample = 0;      // forward pass (and loss) per sample
  double bwd_ms_per_sample = 0;      // backward pass per sample
  double opt_ms = 0;                 // optimizer step, per step (independent of the batch)
  int per_gpu_batch = 128;           // weak scaling: each GPU keeps its batch
  std::vector<double> bucket_bytes;  // on the wire, in backward order
  bool overlap = true;
  int gpus_per_host = 8;
  RingModel intra;                         // a ring inside one host
  RingModel inter;                         // a ring across hosts (its slowest edge: the network)
  std::string intra_source, inter_source;  // where the constants came from
};

struct PredictRow {
  int gpus = 1, hosts = 1;
  double comm_ms = 0;     // every bucket's all-reduce, back to back
  double exposed_ms = 0;  // what the backward pass does not hide
  double step_ms = 0;
  double overhead = 0;    // exposed / step
  double efficiency = 1;  // step(1) / step(N)
  double speedup = 1;     // N x efficiency
};

// Bucket b becomes ready when the backward pass has produced its share of
// the gradient (the pass is taken to produce bytes at an even rate); one
// communication thread runs the all-reduces in order; without overlap they
// start after the pass.
PredictRow PredictStep(const PredictInput& in, int gpus);
std::vector<int> PowersOfTwo(int max);
void PrintPrediction(const PredictInput& in, const std::vector<int>& gpus, FILE* out);

// alpha and beta of the topology's ring model, from `ringo-topo --json`
// (of an hwloc XML file or a dump; `hosts` > 1: the rings across hosts).
base::StatusOr<RingModel> TopologyModel(const std::string& ringo_topo, const std::string& file,
                                        int hosts, int* gpus);

}  // namespace ringo::train

#endif  // RINGO_TRAINER_PREDICT_H_
