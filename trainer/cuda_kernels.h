// ringo-train's own CUDA kernels: the element-wise and per-column work of
// trainer/compute.h, and a tiled GEMM. Each launcher queues one or two
// kernels on `stream` (a cudaStream_t) and returns. No kernel uses atomics,
// and every sum runs in a fixed order (a column's rows in order, the same
// order as the CPU backend's loops), so results replay bit for bit; the
// element-wise kernels are compiled without fused multiply-add, so they
// round as the CPU backend does.
#ifndef RINGO_TRAINER_CUDA_KERNELS_H_
#define RINGO_TRAINER_CUDA_KERNELS_H_

#include <cstddef>
#include <cstdint>

namespace ringo::train::cuda {

// Row-major c = alpha op(a) op(b) + beta c, op(a) m x k, op(b) k x n; each
// element one fused multiply-add chain over k in order.
void Gemm(void* stream, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
          int lda, const float* b, int ldb, float beta, float* c, int ldc);
void AddBias(void* stream, int rows, int cols, const float* bias, float* y);
void ColumnSum(void* stream, int rows, int cols, const float* x, float beta, float* out);
void Relu(void* stream, size_t n, const float* x, float* y);
void ReluBackward(void* stream, size_t n, const float* y, const float* dy, float* dx);
// grad: false, sums of x and x^2; true, sums of dy (x) and dy * xhat.
void ColumnStats(void* stream, int rows, int cols, const float* x, const float* xhat, double* stats);
void BatchNormStats(void* stream, int cols, const double* stats, double momentum, double eps,
                    float* running, float* mean, float* invstd);
void BatchNormApply(void* stream, int rows, int cols, const float* x, const float* mean,
                    const float* invstd, const float* gamma, const float* beta, float* xhat, float* y);
void BatchNormParamGrads(void* stream, int cols, const double* stats, bool accumulate, float* dgamma,
                         float* dbeta);
void BatchNormBackward(void* stream, int rows, int cols, const float* dy, const float* xhat,
                       const float* gamma, const float* invstd, const double* stats, float* dx);
// Per row (row_loss, row_correct: `rows` each), then both summed in row
// order into metrics (loss) and correct.
void SoftmaxCrossEntropy(void* stream, int rows, int cols, const float* logits, const uint8_t* labels,
                         float scale, float* dlogits, double* row_loss, int* row_correct,
                         double* loss, long long* correct);
void CountCorrect(void* stream, int rows, int cols, const float* logits, const uint8_t* labels,
                  int* row_correct, long long* correct);
void SgdStep(void* stream, size_t n, float* w, const float* g, float* v, float lr, float momentum,
             float weight_decay);
void Scale(void* stream, size_t n, float factor, float* x);

}  // namespace ringo::train::cuda

#endif  // RINGO_TRAINER_CUDA_KERNELS_H_
