// The multilayer perceptron of ringo-train: 784 inputs, `depth` hidden
// blocks of `width` units (Linear, optional BatchNorm, ReLU), a Linear to the
// classes, softmax cross-entropy. Arithmetic through a Compute backend.
//
// Parameters and gradients are two flat arrays laid out in the order the
// backward pass completes them (the output layer first), so a run of
// consecutive parameters is a contiguous gradient bucket. Not thread-safe.
#ifndef RINGO_TRAINER_MLP_H_
#define RINGO_TRAINER_MLP_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "trainer/compute.h"

namespace ringo::train {

struct ModelSpec {
  int inputs = 784;
  int width = 1024;
  int depth = 9;
  int classes = 10;
  bool batch_norm = false;

  // "784-1024x8-10" (with "+bn" when batch_norm).
  std::string Describe() const;
};

struct ParamInfo {
  std::string name;   // "fc3.weight", "bn2.bias", ...
  size_t offset = 0;  // in floats, into the flat arrays
  size_t count = 0;
  int layer = 0;  // the block it belongs to (depth: the output layer)
};

// Sums `count` doubles (backend memory) in place over the ranks that share
// a batch (the batch-norm statistics of SyncBatchNorm), in the compute
// stream's order: complete on return on the CPU, queued on the GPU.
using StatsReducer = std::function<base::Status(double* data, size_t count)>;
// Told the index (into params()) of each gradient as the backward pass completes it.
using GradReadyFn = std::function<void(int param)>;

class Mlp {
 public:
  // Buffers for batches of up to `max_rows` rows.
  Mlp(Compute* compute, const ModelSpec& spec, int max_rows);
  ~Mlp();
  Mlp(const Mlp&) = delete;
  Mlp& operator=(const Mlp&) = delete;

  const ModelSpec& spec() const { return spec_; }
  const std::vector<ParamInfo>& params() const { return params_; }
  size_t num_params() const { return num_params_; }
  // Batch-norm running means and variances, one flat array (0 without BN).
  size_t num_buffers() const { return num_buffers_; }

  // The flat parameter and gradient arrays (backend memory, num_params()
  // floats each), owned by the caller and kept for the model's life.
  void Bind(float* params, float* grads);
  float* param_data() { return w_; }
  float* grad_data() { return g_; }
  float* buffer_data() { return running_; }

  // Deterministic initialisation from `seed`: He-uniform weights for the
  // hidden layers, PyTorch's default range for the output layer, zero
  // biases, unit BN scales.
  void Init(uint64_t seed);

  // Forward pass of `rows` samples x [rows x inputs]; train: batch
  // statistics (reduced with `sync` when given) and running averages
  // updated; else the running averages. Logits stay in logits().
  base::Status Forward(const float* x, int rows, bool train, const StatsReducer* sync);
  const float* logits() const { return logits_; }

  // Backward pass from dlogits [rows x classes] after a training Forward of
  // the same x: gradients written (or added to, with accumulate), `ready`
  // called for each parameter when its gradient is complete.
  base::Status Backward(const float* x, const float* dlogits, int rows, bool accumulate,
                        const StatsReducer* sync, const GradReadyFn& ready);

 private:
  struct Block {  // hidden block i: Linear (+BN) + ReLU
    int in = 0, out = 0;
    int w = -1, b = -1, gamma = -1, beta = -1;  // indices into params_
    float* act = nullptr;   // [rows x out]: BN/linear output, then ReLU in place
    float* xhat = nullptr;  // [rows x out] with BN
    float* mean = nullptr;  // [out] batch statistics of the last train forward
    float* invstd = nullptr;
    size_t running = 0;  // offset of running mean then variance in running_
  };
  const float* P(int i) const { return w_ + params_[i].offset; }
  float* G(int i) { return g_ + params_[i].offset; }
  void AddParam(const std::string& name, size_t count, int layer, int* index);
  base::Status BatchNormForward(Block& blk, int rows, bool train, const StatsReducer* sync);
  base::Status BatchNormBackward(Block& blk, int rows, bool accumulate, const StatsReducer* sync,
                                 float* d);

  Compute* compute_;
  ModelSpec spec_;
  int max_rows_;
  std::vector<ParamInfo> params_;
  size_t num_params_ = 0;
  size_t num_buffers_ = 0;
  std::vector<Block> blocks_;
  int out_w_ = -1, out_b_ = -1;
  float* w_ = nullptr;
  float* g_ = nullptr;
  float* running_ = nullptr;                // owned
  float* logits_ = nullptr;                 // owned
  float* scratch_[2] = {nullptr, nullptr};  // owned, [rows x max width]
  double* stats_ = nullptr;                 // owned, [2 x max width + 1]: batch norm's sums
};

}  // namespace ringo::train

#endif  // RINGO_TRAINER_MLP_H_
