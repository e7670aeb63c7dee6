#include "trainer/mlp.h"

#include <algorithm>
#include <cmath>

namespace ringo::train {
namespace {

constexpr double kBnEps = 1e-5;
constexpr double kBnMomentum = 0.1;  // PyTorch's

// splitmix64: a small, fully specified generator, so every rank and every
// platform draws the same initial weights from a seed.
uint64_t SplitMix(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Uniform in [-bound, bound).
void FillUniform(uint64_t* state, float bound, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) {
    const double u = static_cast<double>(SplitMix(state) >> 11) * (1.0 / 9007199254740992.0);
    out[i] = static_cast<float>((2.0 * u - 1.0) * bound);
  }
}

}  // namespace

std::string ModelSpec::Describe() const {
  return std::to_string(inputs) + "-" + std::to_string(width) + "x" + std::to_string(depth) + "-" +
         std::to_string(classes) + (batch_norm ? "+bn" : "");
}

Mlp::Mlp(Compute* compute, const ModelSpec& spec, int max_rows)
    : compute_(compute), spec_(spec), max_rows_(std::max(1, max_rows)) {
  // Parameters in the order the backward pass completes them.
  AddParam("fc" + std::to_string(spec.depth) + ".weight",
           static_cast<size_t>(spec.classes) * (spec.depth ? spec.width : spec.inputs), spec.depth,
           &out_w_);
  AddParam("fc" + std::to_string(spec.depth) + ".bias", spec.classes, spec.depth, &out_b_);
  blocks_.resize(spec.depth);
  for (int i = spec.depth - 1; i >= 0; --i) {
    Block& blk = blocks_[i];
    blk.in = i == 0 ? spec.inputs : spec.width;
    blk.out = spec.width;
    if (spec.batch_norm) {
      AddParam("bn" + std::to_string(i) + ".weight", blk.out, i, &blk.gamma);
      AddParam("bn" + std::to_string(i) + ".bias", blk.out, i, &blk.beta);
      blk.running = num_buffers_;
      num_buffers_ += 2 * static_cast<size_t>(blk.out);
    }
    AddParam("fc" + std::to_string(i) + ".weight", static_cast<size_t>(blk.out) * blk.in, i,
             &blk.w);
    AddParam("fc" + std::to_string(i) + ".bias", blk.out, i, &blk.b);
  }
  const size_t rows = static_cast<size_t>(max_rows_);
  const size_t widest = std::max(spec.width, std::max(spec.inputs, spec.classes));
  for (Block& blk : blocks_) {
    blk.act = compute_->Alloc(rows * blk.out);
    if (spec.batch_norm) {
      blk.xhat = compute_->Alloc(rows * blk.out);
      blk.mean = compute_->Alloc(blk.out);
      blk.invstd = compute_->Alloc(blk.out);
    }
  }
  logits_ = compute_->Alloc(rows * spec.classes);
  scratch_[0] = compute_->Alloc(rows * widest);
  scratch_[1] = compute_->Alloc(rows * widest);
  if (spec.batch_norm) {
    stats_ = static_cast<double*>(compute_->AllocBytes((2 * widest + 1) * sizeof(double)));
  }
  if (num_buffers_) running_ = compute_->Alloc(num_buffers_);
}

Mlp::~Mlp() {
  for (Block& blk : blocks_) {
    compute_->Free(blk.act);
    if (blk.xhat) compute_->Free(blk.xhat);
    if (blk.mean) compute_->Free(blk.mean);
    if (blk.invstd) compute_->Free(blk.invstd);
  }
  compute_->Free(logits_);
  compute_->Free(scratch_[0]);
  compute_->Free(scratch_[1]);
  if (stats_) compute_->FreeBytes(stats_);
  if (running_) compute_->Free(running_);
}

void Mlp::AddParam(const std::string& name, size_t count, int layer, int* index) {
  *index = static_cast<int>(params_.size());
  params_.push_back(ParamInfo{name, num_params_, count, layer});
  num_params_ += count;
}

void Mlp::Bind(float* params, float* grads) {
  w_ = params;
  g_ = grads;
}

void Mlp::Init(uint64_t seed) {
  uint64_t state = seed * 0x2545f4914f6cdd1dULL + 1;
  std::vector<float> host(num_params_, 0.0f);
  for (const Block& blk : blocks_) {
    FillUniform(&state, static_cast<float>(std::sqrt(6.0 / blk.in)), params_[blk.w].count,
                host.data() + params_[blk.w].offset);
    if (blk.gamma >= 0) {
      std::fill_n(host.data() + params_[blk.gamma].offset, params_[blk.gamma].count, 1.0f);
    }
  }
  const int fan_in = spec_.depth ? spec_.width : spec_.inputs;
  FillUniform(&state, static_cast<float>(1.0 / std::sqrt(fan_in)), params_[out_w_].count,
              host.data() + params_[out_w_].offset);
  compute_->Upload(host.data(), w_, num_params_);
  if (num_buffers_) {
    std::vector<float> running(num_buffers_, 0.0f);
    for (const Block& blk : blocks_) {  // running variances start at 1
      std::fill_n(running.data() + blk.running + blk.out, blk.out, 1.0f);
    }
    compute_->Upload(running.data(), running_, num_buffers_);
  }
}

base::Status Mlp::Forward(const float* x, int rows, bool train, const StatsReducer* sync) {
  if (rows > max_rows_) return base::InvalidArgument("batch larger than the model's buffers");
  const float* in = x;
  for (Block& blk : blocks_) {
    compute_->Gemm(false, true, rows, blk.out, blk.in, 1.0f, in, blk.in, P(blk.w), blk.in, 0.0f,
                   blk.act, blk.out);
    compute_->AddBias(rows, blk.out, P(blk.b), blk.act);
    if (spec_.batch_norm) RETURN_IF_ERROR(BatchNormForward(blk, rows, train, sync));
    compute_->Relu(static_cast<size_t>(rows) * blk.out, blk.act, blk.act);
    in = blk.act;
  }
  const int fan_in = spec_.depth ? spec_.width : spec_.inputs;
  compute_->Gemm(false, true, rows, spec_.classes, fan_in, 1.0f, in, fan_in, P(out_w_), fan_in,
                 0.0f, logits_, spec_.classes);
  compute_->AddBias(rows, spec_.classes, P(out_b_), logits_);
  return base::OkStatus();
}

base::Status Mlp::BatchNormForward(Block& blk, int rows, bool train, const StatsReducer* sync) {
  const int n = blk.out;
  float* running = running_ + blk.running;
  if (train) {
    // sum x, sum x^2, count: one reduction for SyncBatchNorm.
    compute_->ColumnMoments(rows, n, blk.act, stats_);
    if (sync) RETURN_IF_ERROR((*sync)(stats_, 2 * static_cast<size_t>(n) + 1));
    compute_->BatchNormStats(n, stats_, kBnMomentum, kBnEps, running, blk.mean, blk.invstd);
  } else {
    compute_->BatchNormStats(n, nullptr, kBnMomentum, kBnEps, running, blk.mean, blk.invstd);
  }
  compute_->BatchNormApply(rows, n, blk.act, blk.mean, blk.invstd, P(blk.gamma), P(blk.beta),
                           blk.xhat, blk.act);
  return base::OkStatus();
}

base::Status Mlp::Backward(const float* x, const float* dlogits, int rows, bool accumulate,
                           const StatsReducer* sync, const GradReadyFn& ready) {
  const float beta = accumulate ? 1.0f : 0.0f;
  const int fan_in = spec_.depth ? spec_.width : spec_.inputs;
  const float* top_in = spec_.depth ? blocks_.back().act : x;
  compute_->Gemm(true, false, spec_.classes, fan_in, rows, 1.0f, dlogits, spec_.classes, top_in,
                 fan_in, beta, G(out_w_), fan_in);
  ready(out_w_);
  compute_->ColumnSum(rows, spec_.classes, dlogits, beta, G(out_b_));
  ready(out_b_);
  if (spec_.depth == 0) return base::OkStatus();
  float* d = scratch_[0];  // gradient with respect to the current block's output
  compute_->Gemm(false, false, rows, fan_in, spec_.classes, 1.0f, dlogits, spec_.classes, P(out_w_),
                 fan_in, 0.0f, d, fan_in);
  for (int i = spec_.depth - 1; i >= 0; --i) {
    Block& blk = blocks_[i];
    const size_t n = static_cast<size_t>(rows) * blk.out;
    compute_->ReluBackward(n, blk.act, d, d);
    if (spec_.batch_norm) {
      RETURN_IF_ERROR(BatchNormBackward(blk, rows, accumulate, sync, d));
      ready(blk.gamma);
      ready(blk.beta);
    }
    const float* in = i == 0 ? x : blocks_[i - 1].act;
    compute_->Gemm(true, false, blk.out, blk.in, rows, 1.0f, d, blk.out, in, blk.in, beta, G(blk.w),
                   blk.in);
    ready(blk.w);
    compute_->ColumnSum(rows, blk.out, d, beta, G(blk.b));
    ready(blk.b);
    if (i == 0) break;
    float* next = d == scratch_[0] ? scratch_[1] : scratch_[0];
    compute_->Gemm(false, false, rows, blk.in, blk.out, 1.0f, d, blk.out, P(blk.w), blk.in, 0.0f,
                   next, blk.in);
    d = next;
  }
  return base::OkStatus();
}

// d: the gradient with respect to the BN output on entry, its input on return.
base::Status Mlp::BatchNormBackward(Block& blk, int rows, bool accumulate, const StatsReducer* sync,
                                    float* d) {
  const int n = blk.out;
  compute_->BatchNormGradSums(rows, n, d, blk.xhat, stats_);
  // The parameters' gradients are this rank's own sums (averaged with the
  // other gradients); the input's gradient needs the whole batch's.
  compute_->BatchNormParamGrads(n, stats_, accumulate, G(blk.gamma), G(blk.beta));
  if (sync) RETURN_IF_ERROR((*sync)(stats_, 2 * static_cast<size_t>(n) + 1));
  compute_->BatchNormBackward(rows, n, d, blk.xhat, P(blk.gamma), blk.invstd, stats_, d);
  return base::OkStatus();
}

}  // namespace ringo::train
