// The CPU Compute: OpenBLAS for the matrix products, loops the compiler
// vectorises for the rest.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "trainer/compute.h"

namespace ringo::train {
namespace {

class CpuCompute final : public Compute {
 public:
  explicit CpuCompute(int blas_threads) : threads_(blas_threads) {
    openblas_set_num_threads(blas_threads);
  }

  std::string Name() const override {
    return "cpu (OpenBLAS, " + std::to_string(threads_) + " thread" + (threads_ == 1 ? "" : "s") +
           ")";
  }

  bool on_device() const override { return false; }

  void* AllocBytes(size_t bytes) override {
    const size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
    void* p = std::aligned_alloc(64, rounded);
    if (p == nullptr) std::abort();
    std::memset(p, 0, rounded);
    return p;
  }
  void FreeBytes(void* p) override { std::free(p); }
  void CopyIn(const void* host, void* dst, size_t bytes) override {
    if (bytes) std::memcpy(dst, host, bytes);
  }
  void CopyOut(const void* src, void* host, size_t bytes) override {
    if (bytes) std::memcpy(host, src, bytes);
  }

  // No queue: every call is complete on return, so an event is the moment
  // it was recorded.
  Stream stream() override { return nullptr; }
  Stream NewStream() override { return nullptr; }
  void FreeStream(Stream) override {}
  Event NewEvent() override { return new Clock::time_point(); }
  void FreeEvent(Event e) override { delete static_cast<Clock::time_point*>(e); }
  void Record(Event e, Stream) override { *static_cast<Clock::time_point*>(e) = Clock::now(); }
  void StreamWait(Stream, Event) override {}
  void Synchronize(Stream) override {}
  double ElapsedMs(Event from, Event to) override {
    return std::chrono::duration<double, std::milli>(*static_cast<Clock::time_point*>(to) -
                                                     *static_cast<Clock::time_point*>(from))
        .count();
  }
  base::Status Error() override { return base::OkStatus(); }

  void Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
            const float* b, int ldb, float beta, float* c, int ldc) override {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }

  void AddBias(int rows, int cols, const float* bias, float* y) override {
    for (int r = 0; r < rows; ++r) {
      float* row = y + static_cast<size_t>(r) * cols;
      for (int c = 0; c < cols; ++c) row[c] += bias[c];
    }
  }

  void ColumnSum(int rows, int cols, const float* x, float beta, float* out) override {
    if (beta == 0.0f) {
      std::fill(out, out + cols, 0.0f);
    } else if (beta != 1.0f) {
      for (int c = 0; c < cols; ++c) out[c] *= beta;
    }
    for (int r = 0; r < rows; ++r) {
      const float* row = x + static_cast<size_t>(r) * cols;
      for (int c = 0; c < cols; ++c) out[c] += row[c];
    }
  }

  void Relu(size_t n, const float* x, float* y) override {
    for (size_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
  }
  void ReluBackward(size_t n, const float* y, const float* dy, float* dx) override {
    for (size_t i = 0; i < n; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
  }

  void ColumnMoments(int rows, int cols, const float* x, double* stats) override {
    double* sum = stats;
    double* sumsq = stats + cols;
    std::fill(stats, stats + 2 * static_cast<size_t>(cols), 0.0);
    for (int r = 0; r < rows; ++r) {
      const float* row = x + static_cast<size_t>(r) * cols;
      for (int c = 0; c < cols; ++c) {
        const double v = row[c];
        sum[c] += v;
        sumsq[c] += v * v;
      }
    }
    stats[2 * cols] = rows;
  }

  void BatchNormStats(int cols, const double* stats, double momentum, double eps, float* running,
                      float* mean, float* invstd) override {
    for (int c = 0; c < cols; ++c) {
      if (stats == nullptr) {
        mean[c] = running[c];
        invstd[c] = static_cast<float>(1.0 / std::sqrt(running[cols + c] + eps));
        continue;
      }
      const double count = stats[2 * cols];
      const double m = stats[c] / count;
      const double var = std::max(0.0, stats[cols + c] / count - m * m);
      mean[c] = static_cast<float>(m);
      invstd[c] = static_cast<float>(1.0 / std::sqrt(var + eps));
      const double unbiased = count > 1 ? var * count / (count - 1) : var;
      running[c] = static_cast<float>((1 - momentum) * running[c] + momentum * m);
      running[cols + c] = static_cast<float>((1 - momentum) * running[cols + c] + momentum * unbiased);
    }
  }

  void BatchNormApply(int rows, int cols, const float* x, const float* mean, const float* invstd,
                      const float* gamma, const float* beta, float* xhat, float* y) override {
    for (int r = 0; r < rows; ++r) {
      const size_t o = static_cast<size_t>(r) * cols;
      for (int c = 0; c < cols; ++c) {
        const float h = (x[o + c] - mean[c]) * invstd[c];
        xhat[o + c] = h;
        y[o + c] = gamma[c] * h + beta[c];
      }
    }
  }

  void BatchNormGradSums(int rows, int cols, const float* dy, const float* xhat,
                         double* stats) override {
    double* sum_dy = stats;
    double* sum_dy_xhat = stats + cols;
    std::fill(stats, stats + 2 * static_cast<size_t>(cols), 0.0);
    for (int r = 0; r < rows; ++r) {
      const size_t o = static_cast<size_t>(r) * cols;
      for (int c = 0; c < cols; ++c) {
        sum_dy[c] += dy[o + c];
        sum_dy_xhat[c] += static_cast<double>(dy[o + c]) * xhat[o + c];
      }
    }
    stats[2 * cols] = rows;
  }

  void BatchNormParamGrads(int cols, const double* stats, bool accumulate, float* dgamma,
                           float* dbeta) override {
    for (int c = 0; c < cols; ++c) {
      const float g = static_cast<float>(stats[cols + c]);
      const float b = static_cast<float>(stats[c]);
      dgamma[c] = accumulate ? g + dgamma[c] : g;
      dbeta[c] = accumulate ? b + dbeta[c] : b;
    }
  }

  void BatchNormBackward(int rows, int cols, const float* dy, const float* xhat, const float* gamma,
                         const float* invstd, const double* stats, float* dx) override {
    const double count = stats[2 * cols];
    for (int r = 0; r < rows; ++r) {
      const size_t o = static_cast<size_t>(r) * cols;
      for (int c = 0; c < cols; ++c) {
        const float mean_dy = static_cast<float>(stats[c] / count);
        const float mean_dy_xhat = static_cast<float>(stats[cols + c] / count);
        dx[o + c] = gamma[c] * invstd[c] * (dy[o + c] - mean_dy - xhat[o + c] * mean_dy_xhat);
      }
    }
  }

  void SoftmaxCrossEntropy(int rows, int cols, const float* logits, const uint8_t* labels,
                           float scale, float* dlogits) override {
    double loss = 0;
    for (int r = 0; r < rows; ++r) {
      const float* z = logits + static_cast<size_t>(r) * cols;
      float* d = dlogits + static_cast<size_t>(r) * cols;
      int best = 0;
      for (int c = 1; c < cols; ++c) best = z[c] > z[best] ? c : best;
      const float zmax = z[best];
      double total = 0;
      for (int c = 0; c < cols; ++c) total += std::exp(static_cast<double>(z[c] - zmax));
      const double log_total = std::log(total);
      for (int c = 0; c < cols; ++c) {
        const double p = std::exp(static_cast<double>(z[c] - zmax) - log_total);
        d[c] = static_cast<float>(scale * (p - (c == labels[r] ? 1.0 : 0.0)));
      }
      loss += log_total - static_cast<double>(z[labels[r]] - zmax);
      if (best == labels[r]) ++correct_;
    }
    loss_ += loss;
  }

  void CountCorrect(int rows, int cols, const float* logits, const uint8_t* labels) override {
    for (int r = 0; r < rows; ++r) {
      const float* z = logits + static_cast<size_t>(r) * cols;
      int best = 0;
      for (int c = 1; c < cols; ++c) best = z[c] > z[best] ? c : best;
      correct_ += best == labels[r];
    }
  }

  void TakeMetrics(double* loss, int64_t* correct) override {
    *loss = loss_;
    *correct = correct_;
    loss_ = 0;
    correct_ = 0;
  }

  void SgdStep(size_t n, float* w, const float* g, float* v, float lr, float momentum,
               float weight_decay) override {
    for (size_t i = 0; i < n; ++i) {
      const float d = g[i] + weight_decay * w[i];
      v[i] = momentum * v[i] + d;
      w[i] -= lr * v[i];
    }
  }

  void Scale(size_t n, float factor, float* x) override {
    for (size_t i = 0; i < n; ++i) x[i] *= factor;
  }

 private:
  using Clock = std::chrono::steady_clock;
  int threads_;
  double loss_ = 0;
  int64_t correct_ = 0;
};

}  // namespace

std::unique_ptr<Compute> MakeCpuCompute(int blas_threads) {
  return std::make_unique<CpuCompute>(blas_threads);
}

}  // namespace ringo::train
