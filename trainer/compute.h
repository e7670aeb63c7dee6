// The arithmetic of ringo-train behind one small interface, so that a GPU
// implementation (cuBLAS and its own kernels) can replace the CPU one
// without touching the model or the training loop. Matrices are row-major
// fp32; every pointer is memory of this backend (Alloc). A Compute object is
// used by one thread at a time; each call is complete when it returns.
#ifndef RINGO_TRAINER_COMPUTE_H_
#define RINGO_TRAINER_COMPUTE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace ringo::train {

class Compute {
 public:
  virtual ~Compute() = default;
  virtual std::string Name() const = 0;

  // Zeroed memory for `count` floats, owned by the caller (Free).
  virtual float* Alloc(size_t count) = 0;
  virtual void Free(float* p) = 0;
  // Host <-> backend copies (the same memory on the CPU).
  virtual void Upload(const float* host, float* dst, size_t count) = 0;
  virtual void Download(const float* src, float* host, size_t count) = 0;

  // c = alpha * op(a) * op(b) + beta * c; op(a) is m x k, op(b) k x n.
  virtual void Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                    int lda, const float* b, int ldb, float beta, float* c, int ldc) = 0;
  // y[r][c] += bias[c].
  virtual void AddBias(int rows, int cols, const float* bias, float* y) = 0;
  // out[c] = beta * out[c] + sum over r of x[r][c].
  virtual void ColumnSum(int rows, int cols, const float* x, float beta, float* out) = 0;
  // y = max(x, 0) (y may be x).
  virtual void Relu(size_t n, const float* x, float* y) = 0;
  // dx = dy where y > 0, else 0 (dx may be dy).
  virtual void ReluBackward(size_t n, const float* y, const float* dy, float* dx) = 0;

  // Batch normalisation over the rows of x (features in columns). Sums of x
  // and x^2 per column, in double (added into sum / sumsq).
  virtual void ColumnMoments(int rows, int cols, const float* x, double* sum, double* sumsq) = 0;
  // xhat = (x - mean) * invstd; y = gamma * xhat + beta.
  virtual void BatchNormApply(int rows, int cols, const float* x, const float* mean,
                              const float* invstd, const float* gamma, const float* beta,
                              float* xhat, float* y) = 0;
  // Per column: sum of dy and of dy * xhat (double, added into the outputs).
  virtual void BatchNormGradSums(int rows, int cols, const float* dy, const float* xhat,
                                 double* sum_dy, double* sum_dy_xhat) = 0;
  // dx = gamma * invstd * (dy - mean_dy - xhat * mean_dy_xhat), the means
  // taken over every row of the (possibly distributed) batch.
  virtual void BatchNormBackward(int rows, int cols, const float* dy, const float* xhat,
                                 const float* gamma, const float* invstd, const float* mean_dy,
                                 const float* mean_dy_xhat, float* dx) = 0;

  // Softmax cross-entropy of logits [rows x cols] against labels. Writes
  // dlogits = scale * (softmax - onehot), returns the summed loss and adds
  // the number of correct argmaxes to *correct.
  virtual double SoftmaxCrossEntropy(int rows, int cols, const float* logits, const uint8_t* labels,
                                     float scale, float* dlogits, int64_t* correct) = 0;
  // Argmax per row compared with labels: the number correct.
  virtual int64_t CountCorrect(int rows, int cols, const float* logits, const uint8_t* labels) = 0;

  // SGD with momentum and weight decay (PyTorch's torch.optim.SGD):
  // v = momentum * v + (g + wd * w); w -= lr * v.
  virtual void SgdStep(size_t n, float* w, const float* g, float* v, float lr, float momentum,
                       float weight_decay) = 0;
  virtual void Scale(size_t n, float factor, float* x) = 0;
};

// The CPU backend: OpenBLAS sgemm with `blas_threads` threads, plain loops
// for the rest.
std::unique_ptr<Compute> MakeCpuCompute(int blas_threads);

}  // namespace ringo::train

#endif  // RINGO_TRAINER_COMPUTE_H_
