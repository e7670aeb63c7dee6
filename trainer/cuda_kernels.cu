// ringo-train's CUDA kernels (cuda_kernels.h). Built with --fmad=false: the
// element-wise kernels round each operation as the CPU backend does; the
// GEMM fuses on purpose (fmaf), as cuBLAS and OpenBLAS do.
#include <cuda_runtime.h>

#include "trainer/cuda_kernels.h"

namespace ringo::train::cuda {
namespace {

constexpr int kThreads = 256;

cudaStream_t S(void* stream) { return static_cast<cudaStream_t>(stream); }

unsigned Blocks(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535u * 64u ? b : 65535u * 64u);
}

// Grid-stride over n elements.
#define RINGO_FOR_EACH(i, n) \
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < (n); i += static_cast<size_t>(gridDim.x) * blockDim.x)

// ---- GEMM: 64 x 64 tiles of c, 16 deep in k, 256 threads of 4 x 4 each ----
constexpr int kTm = 64, kTn = 64, kTk = 16;

__global__ void GemmKernel(bool ta, bool tb, int m, int n, int k, float alpha, const float* __restrict__ a,
                           int lda, const float* __restrict__ b, int ldb, float beta, float* __restrict__ c,
                           int ldc) {
  __shared__ float as[kTk][kTm + 1];
  __shared__ float bs[kTk][kTn + 1];
  const int m0 = blockIdx.y * kTm, n0 = blockIdx.x * kTn;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < k; k0 += kTk) {
    for (int l = threadIdx.x; l < kTm * kTk; l += kThreads) {
      // op(a)[row][kk]: read along a's contiguous dimension.
      const int row = ta ? l % kTm : l / kTk, kk = ta ? l / kTm : l % kTk;
      const int gi = m0 + row, gk = k0 + kk;
      as[kk][row] = gi < m && gk < k ? (ta ? a[static_cast<size_t>(gk) * lda + gi] : a[static_cast<size_t>(gi) * lda + gk]) : 0.0f;
      // op(b)[kk][col]
      const int col = tb ? l / kTk : l % kTn, kb = tb ? l % kTk : l / kTn;
      const int gj = n0 + col, gkb = k0 + kb;
      bs[kb][col] = gj < n && gkb < k ? (tb ? b[static_cast<size_t>(gj) * ldb + gkb] : b[static_cast<size_t>(gkb) * ldb + gj]) : 0.0f;
    }
    __syncthreads();
    const int kend = k - k0 < kTk ? k - k0 : kTk;
    for (int kk = 0; kk < kend; ++kk) {
      float av[4], bv[4];
      for (int i = 0; i < 4; ++i) av[i] = as[kk][ty + 16 * i];
      for (int j = 0; j < 4; ++j) bv[j] = bs[kk][tx + 16 * j];
      for (int i = 0; i < 4; ++i) {
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
      }
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i) {
    const int gi = m0 + ty + 16 * i;
    if (gi >= m) continue;
    for (int j = 0; j < 4; ++j) {
      const int gj = n0 + tx + 16 * j;
      if (gj >= n) continue;
      float* out = c + static_cast<size_t>(gi) * ldc + gj;
      *out = beta == 0.0f ? alpha * acc[i][j] : alpha * acc[i][j] + beta * *out;
    }
  }
}

__global__ void AddBiasKernel(size_t total, int cols, const float* bias, float* y) {
  RINGO_FOR_EACH(i, total) y[i] += bias[i % cols];
}

// One thread per column; the rows in order (as the CPU backend's loop).
__global__ void ColumnSumKernel(int rows, int cols, const float* x, float beta, float* out) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float acc = beta == 0.0f ? 0.0f : (beta == 1.0f ? out[c] : out[c] * beta);
  for (int r = 0; r < rows; ++r) acc += x[static_cast<size_t>(r) * cols + c];
  out[c] = acc;
}

__global__ void ReluKernel(size_t n, const float* x, float* y) {
  RINGO_FOR_EACH(i, n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void ReluBackwardKernel(size_t n, const float* y, const float* dy, float* dx) {
  RINGO_FOR_EACH(i, n) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

// xhat == nullptr: sums of x and x^2; else sums of x (dy) and x * xhat.
__global__ void ColumnStatsKernel(int rows, int cols, const float* x, const float* xhat, double* stats) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c == 0) stats[2 * cols] = rows;
  if (c >= cols) return;
  double s = 0, q = 0;
  for (int r = 0; r < rows; ++r) {
    const size_t o = static_cast<size_t>(r) * cols + c;
    const double v = x[o];
    s += v;
    q += xhat == nullptr ? v * v : v * static_cast<double>(xhat[o]);
  }
  stats[c] = s;
  stats[cols + c] = q;
}

__global__ void BatchNormStatsKernel(int cols, const double* stats, double momentum, double eps,
                                     float* running, float* mean, float* invstd) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  if (stats == nullptr) {
    mean[c] = running[c];
    invstd[c] = static_cast<float>(1.0 / sqrt(running[cols + c] + eps));
    return;
  }
  const double count = stats[2 * cols];
  const double m = stats[c] / count;
  const double var = fmax(0.0, stats[cols + c] / count - m * m);
  mean[c] = static_cast<float>(m);
  invstd[c] = static_cast<float>(1.0 / sqrt(var + eps));
  const double unbiased = count > 1 ? var * count / (count - 1) : var;
  running[c] = static_cast<float>((1 - momentum) * running[c] + momentum * m);
  running[cols + c] = static_cast<float>((1 - momentum) * running[cols + c] + momentum * unbiased);
}

__global__ void BatchNormApplyKernel(size_t total, int cols, const float* x, const float* mean,
                                     const float* invstd, const float* gamma, const float* beta, float* xhat,
                                     float* y) {
  RINGO_FOR_EACH(i, total) {
    const int c = static_cast<int>(i % cols);
    const float h = (x[i] - mean[c]) * invstd[c];
    xhat[i] = h;
    y[i] = gamma[c] * h + beta[c];
  }
}

__global__ void BatchNormParamGradsKernel(int cols, const double* stats, bool accumulate, float* dgamma,
                                          float* dbeta) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  const float g = static_cast<float>(stats[cols + c]);
  const float b = static_cast<float>(stats[c]);
  dgamma[c] = accumulate ? g + dgamma[c] : g;
  dbeta[c] = accumulate ? b + dbeta[c] : b;
}

__global__ void BatchNormBackwardKernel(size_t total, int cols, const float* dy, const float* xhat,
                                        const float* gamma, const float* invstd, const double* stats,
                                        float* dx) {
  const double count = stats[2 * cols];
  RINGO_FOR_EACH(i, total) {
    const int c = static_cast<int>(i % cols);
    const float mean_dy = static_cast<float>(stats[c] / count);
    const float mean_dy_xhat = static_cast<float>(stats[cols + c] / count);
    dx[i] = gamma[c] * invstd[c] * (dy[i] - mean_dy - xhat[i] * mean_dy_xhat);
  }
}

__device__ int ArgMax(const float* z, int cols) {
  int best = 0;
  for (int c = 1; c < cols; ++c) best = z[c] > z[best] ? c : best;
  return best;
}

// One thread per row: the CPU backend's arithmetic (double exp and log).
__global__ void SoftmaxRowsKernel(int rows, int cols, const float* logits, const uint8_t* labels, float scale,
                                  float* dlogits, double* row_loss, int* row_correct) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* z = logits + static_cast<size_t>(r) * cols;
  float* d = dlogits + static_cast<size_t>(r) * cols;
  const int best = ArgMax(z, cols);
  const float zmax = z[best];
  double total = 0;
  for (int c = 0; c < cols; ++c) total += exp(static_cast<double>(z[c] - zmax));
  const double log_total = log(total);
  for (int c = 0; c < cols; ++c) {
    const double p = exp(static_cast<double>(z[c] - zmax) - log_total);
    d[c] = static_cast<float>(scale * (p - (c == labels[r] ? 1.0 : 0.0)));
  }
  row_loss[r] = log_total - static_cast<double>(z[labels[r]] - zmax);
  row_correct[r] = best == labels[r];
}

__global__ void CorrectRowsKernel(int rows, int cols, const float* logits, const uint8_t* labels,
                                  int* row_correct) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  row_correct[r] = ArgMax(logits + static_cast<size_t>(r) * cols, cols) == labels[r];
}

// One thread: the rows' values added in row order (the CPU's order).
__global__ void SumRowsKernel(int rows, const double* row_loss, const int* row_correct, double* loss,
                              long long* correct) {
  double l = 0;
  long long n = 0;
  for (int r = 0; r < rows; ++r) {
    if (row_loss != nullptr) l += row_loss[r];
    n += row_correct[r];
  }
  if (loss != nullptr) *loss += l;
  *correct += n;
}

__global__ void SgdKernel(size_t n, float* w, const float* g, float* v, float lr, float momentum, float wd) {
  RINGO_FOR_EACH(i, n) {
    const float d = g[i] + wd * w[i];
    v[i] = momentum * v[i] + d;
    w[i] -= lr * v[i];
  }
}

__global__ void ScaleKernel(size_t n, float factor, float* x) {
  RINGO_FOR_EACH(i, n) x[i] *= factor;
}

unsigned ColumnBlocks(int cols) { return static_cast<unsigned>((cols + kThreads - 1) / kThreads); }

}  // namespace

void Gemm(void* stream, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  const dim3 grid((n + kTn - 1) / kTn, (m + kTm - 1) / kTm);
  GemmKernel<<<grid, kThreads, 0, S(stream)>>>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void AddBias(void* stream, int rows, int cols, const float* bias, float* y) {
  const size_t total = static_cast<size_t>(rows) * cols;
  if (total) AddBiasKernel<<<Blocks(total), kThreads, 0, S(stream)>>>(total, cols, bias, y);
}

void ColumnSum(void* stream, int rows, int cols, const float* x, float beta, float* out) {
  if (cols > 0) ColumnSumKernel<<<ColumnBlocks(cols), kThreads, 0, S(stream)>>>(rows, cols, x, beta, out);
}

void Relu(void* stream, size_t n, const float* x, float* y) {
  if (n) ReluKernel<<<Blocks(n), kThreads, 0, S(stream)>>>(n, x, y);
}

void ReluBackward(void* stream, size_t n, const float* y, const float* dy, float* dx) {
  if (n) ReluBackwardKernel<<<Blocks(n), kThreads, 0, S(stream)>>>(n, y, dy, dx);
}

void ColumnStats(void* stream, int rows, int cols, const float* x, const float* xhat, double* stats) {
  ColumnStatsKernel<<<ColumnBlocks(cols > 0 ? cols : 1), kThreads, 0, S(stream)>>>(rows, cols, x, xhat, stats);
}

void BatchNormStats(void* stream, int cols, const double* stats, double momentum, double eps, float* running,
                    float* mean, float* invstd) {
  if (cols > 0) {
    BatchNormStatsKernel<<<ColumnBlocks(cols), kThreads, 0, S(stream)>>>(cols, stats, momentum, eps, running,
                                                                         mean, invstd);
  }
}

void BatchNormApply(void* stream, int rows, int cols, const float* x, const float* mean, const float* invstd,
                    const float* gamma, const float* beta, float* xhat, float* y) {
  const size_t total = static_cast<size_t>(rows) * cols;
  if (total) {
    BatchNormApplyKernel<<<Blocks(total), kThreads, 0, S(stream)>>>(total, cols, x, mean, invstd, gamma, beta,
                                                                     xhat, y);
  }
}

void BatchNormParamGrads(void* stream, int cols, const double* stats, bool accumulate, float* dgamma,
                         float* dbeta) {
  if (cols > 0) {
    BatchNormParamGradsKernel<<<ColumnBlocks(cols), kThreads, 0, S(stream)>>>(cols, stats, accumulate, dgamma,
                                                                              dbeta);
  }
}

void BatchNormBackward(void* stream, int rows, int cols, const float* dy, const float* xhat, const float* gamma,
                       const float* invstd, const double* stats, float* dx) {
  const size_t total = static_cast<size_t>(rows) * cols;
  if (total) {
    BatchNormBackwardKernel<<<Blocks(total), kThreads, 0, S(stream)>>>(total, cols, dy, xhat, gamma, invstd,
                                                                        stats, dx);
  }
}

void SoftmaxCrossEntropy(void* stream, int rows, int cols, const float* logits, const uint8_t* labels,
                         float scale, float* dlogits, double* row_loss, int* row_correct, double* loss,
                         long long* correct) {
  if (rows <= 0) return;
  SoftmaxRowsKernel<<<ColumnBlocks(rows), kThreads, 0, S(stream)>>>(rows, cols, logits, labels, scale, dlogits,
                                                                    row_loss, row_correct);
  SumRowsKernel<<<1, 1, 0, S(stream)>>>(rows, row_loss, row_correct, loss, correct);
}

void CountCorrect(void* stream, int rows, int cols, const float* logits, const uint8_t* labels, int* row_correct,
                  long long* correct) {
  if (rows <= 0) return;
  CorrectRowsKernel<<<ColumnBlocks(rows), kThreads, 0, S(stream)>>>(rows, cols, logits, labels, row_correct);
  SumRowsKernel<<<1, 1, 0, S(stream)>>>(rows, nullptr, row_correct, nullptr, correct);
}

void SgdStep(void* stream, size_t n, float* w, const float* g, float* v, float lr, float momentum,
             float weight_decay) {
  if (n) SgdKernel<<<Blocks(n), kThreads, 0, S(stream)>>>(n, w, g, v, lr, momentum, weight_decay);
}

void Scale(void* stream, size_t n, float factor, float* x) {
  if (n) ScaleKernel<<<Blocks(n), kThreads, 0, S(stream)>>>(n, factor, x);
}

}  // namespace ringo::train::cuda
