// The CPU Compute: OpenBLAS for the matrix products, loops the compiler
// vectorises for the rest.
#include <cblas.h>

#include <algorithm>
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

  float* Alloc(size_t count) override {
    const size_t bytes = std::max<size_t>(64, (count * sizeof(float) + 63) / 64 * 64);
    void* p = std::aligned_alloc(64, bytes);
    if (p == nullptr) std::abort();
    std::memset(p, 0, bytes);
    return static_cast<float*>(p);
  }
  void Free(float* p) override { std::free(p); }
  void Upload(const float* host, float* dst, size_t count) override {
    if (count) std::memcpy(dst, host, count * sizeof(float));
  }
  void Download(const float* src, float* host, size_t count) override {
    if (count) std::memcpy(host, src, count * sizeof(float));
  }

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

  void ColumnMoments(int rows, int cols, const float* x, double* sum, double* sumsq) override {
    for (int r = 0; r < rows; ++r) {
      const float* row = x + static_cast<size_t>(r) * cols;
      for (int c = 0; c < cols; ++c) {
        const double v = row[c];
        sum[c] += v;
        sumsq[c] += v * v;
      }
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

  void BatchNormGradSums(int rows, int cols, const float* dy, const float* xhat, double* sum_dy,
                         double* sum_dy_xhat) override {
    for (int r = 0; r < rows; ++r) {
      const size_t o = static_cast<size_t>(r) * cols;
      for (int c = 0; c < cols; ++c) {
        sum_dy[c] += dy[o + c];
        sum_dy_xhat[c] += static_cast<double>(dy[o + c]) * xhat[o + c];
      }
    }
  }

  void BatchNormBackward(int rows, int cols, const float* dy, const float* xhat, const float* gamma,
                         const float* invstd, const float* mean_dy, const float* mean_dy_xhat,
                         float* dx) override {
    for (int r = 0; r < rows; ++r) {
      const size_t o = static_cast<size_t>(r) * cols;
      for (int c = 0; c < cols; ++c) {
        dx[o + c] = gamma[c] * invstd[c] * (dy[o + c] - mean_dy[c] - xhat[o + c] * mean_dy_xhat[c]);
      }
    }
  }

  double SoftmaxCrossEntropy(int rows, int cols, const float* logits, const uint8_t* labels,
                             float scale, float* dlogits, int64_t* correct) override {
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
      if (best == labels[r]) ++*correct;
    }
    return loss;
  }

  int64_t CountCorrect(int rows, int cols, const float* logits, const uint8_t* labels) override {
    int64_t correct = 0;
    for (int r = 0; r < rows; ++r) {
      const float* z = logits + static_cast<size_t>(r) * cols;
      int best = 0;
      for (int c = 1; c < cols; ++c) best = z[c] > z[best] ? c : best;
      correct += best == labels[r];
    }
    return correct;
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
  int threads_;
};

}  // namespace

std::unique_ptr<Compute> MakeCpuCompute(int blas_threads) {
  return std::make_unique<CpuCompute>(blas_threads);
}

}  // namespace ringo::train
