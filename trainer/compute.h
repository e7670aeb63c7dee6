// The arithmetic of ringo-train behind one small interface, so that the GPU
// backend (cuBLAS or a GEMM of its own, and kernels of its own for the rest)
// replaces the CPU one without touching the model or the training loop.
// Matrices are row-major fp32; every pointer is memory of this backend
// (AllocBytes) unless it says host.
//
// Stream-ordered: every operation is queued on the backend's compute stream
// (stream()) in call order, and the caller learns results only through
// CopyOut, TakeMetrics or Synchronize, which wait for the work before them.
// The CPU backend has no queue (its streams are nullptr): each call is
// complete when it returns, and its events record the host's clock. The
// loss, the correct count and the batch-norm statistics stay in backend
// memory, so a GPU step reads back to the host once (TakeMetrics).
//
// A Compute object is used by one thread at a time.
#ifndef RINGO_TRAINER_COMPUTE_H_
#define RINGO_TRAINER_COMPUTE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"

namespace ringo::train {

class Compute {
 public:
  using Stream = void*;  // a cudaStream_t on the GPU; nullptr on the CPU
  using Event = void*;   // a point in a stream (NewEvent)

  virtual ~Compute() = default;
  // "cpu (OpenBLAS, 2 threads)", "cuda (NVIDIA H200, device 0, cuBLAS 13.0)".
  virtual std::string Name() const = 0;
  // True when memory is GPU memory (and the collectives must be a GPU
  // communicator's, on a stream).
  virtual bool on_device() const = 0;

  // Zeroed memory of `bytes` bytes (at least 64-byte aligned), owned by the
  // caller (FreeBytes, which waits for the work queued before it).
  virtual void* AllocBytes(size_t bytes) = 0;
  virtual void FreeBytes(void* p) = 0;
  // Host -> backend in stream order; `host` may be reused on return.
  virtual void CopyIn(const void* host, void* dst, size_t bytes) = 0;
  // Backend -> host: waits for the compute stream's work, then copies.
  virtual void CopyOut(const void* src, void* host, size_t bytes) = 0;

  float* Alloc(size_t count) { return static_cast<float*>(AllocBytes(count * sizeof(float))); }
  void Free(float* p) { FreeBytes(p); }
  void Upload(const float* host, float* dst, size_t count) { CopyIn(host, dst, count * sizeof(float)); }
  void Download(const float* src, float* host, size_t count) { CopyOut(src, host, count * sizeof(float)); }

  // Streams and events. stream() is the compute stream; NewStream another
  // (the gradients' communication stream). An event recorded on one stream
  // and waited for by another orders them without the host.
  virtual Stream stream() = 0;
  virtual Stream NewStream() = 0;
  virtual void FreeStream(Stream s) = 0;
  virtual Event NewEvent() = 0;
  virtual void FreeEvent(Event e) = 0;
  virtual void Record(Event e, Stream s) = 0;
  virtual void StreamWait(Stream s, Event e) = 0;
  virtual void Synchronize(Stream s) = 0;
  // Milliseconds from `from` to `to` (both recorded, and complete).
  virtual double ElapsedMs(Event from, Event to) = 0;
  // A failure of queued work (a faulted kernel), once the stream is synchronised; OK otherwise.
  virtual base::Status Error() = 0;

  // c = alpha * op(a) * op(b) + beta * c; op(a) is m x k, op(b) k x n.
  virtual void Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                    int lda, const float* b, int ldb, float beta, float* c, int ldc) = 0;
  // y[r][c] += bias[c].
  virtual void AddBias(int rows, int cols, const float* bias, float* y) = 0;
  // out[c] = beta * out[c] + sum over r of x[r][c] (beta 0: out is not read).
  virtual void ColumnSum(int rows, int cols, const float* x, float beta, float* out) = 0;
  // y = max(x, 0) (y may be x).
  virtual void Relu(size_t n, const float* x, float* y) = 0;
  // dx = dy where y > 0, else 0 (dx may be dy).
  virtual void ReluBackward(size_t n, const float* y, const float* dy, float* dx) = 0;

  // Batch normalisation over the rows of x (features in columns). `stats`
  // holds 2 cols + 1 doubles: sums, then sums of squares (or of dy, then of
  // dy * xhat), then the row count; each column summed over the rows in
  // order, so that the bits do not depend on the backend.
  virtual void ColumnMoments(int rows, int cols, const float* x, double* stats) = 0;
  // Training (stats given, reduced over the ranks that share the batch):
  // mean and invstd = 1 / sqrt(var + eps) of the batch, and the running
  // mean and unbiased variance (running[0, cols), running[cols, 2 cols))
  // moved towards them by `momentum`. Evaluation (stats nullptr): mean and
  // invstd from the running statistics.
  virtual void BatchNormStats(int cols, const double* stats, double momentum, double eps,
                              float* running, float* mean, float* invstd) = 0;
  // xhat = (x - mean) * invstd; y = gamma * xhat + beta.
  virtual void BatchNormApply(int rows, int cols, const float* x, const float* mean,
                              const float* invstd, const float* gamma, const float* beta,
                              float* xhat, float* y) = 0;
  // stats = per column: sum of dy, sum of dy * xhat; then the row count.
  virtual void BatchNormGradSums(int rows, int cols, const float* dy, const float* xhat,
                                 double* stats) = 0;
  // This rank's parameter gradients from its own sums: dgamma = sum dy *
  // xhat, dbeta = sum dy (added to what is there with accumulate).
  virtual void BatchNormParamGrads(int cols, const double* stats, bool accumulate, float* dgamma,
                                   float* dbeta) = 0;
  // dx = gamma * invstd * (dy - mean_dy - xhat * mean_dy_xhat), the means
  // from `stats` (the whole, possibly distributed, batch's sums).
  virtual void BatchNormBackward(int rows, int cols, const float* dy, const float* xhat,
                                 const float* gamma, const float* invstd, const double* stats,
                                 float* dx) = 0;

  // Softmax cross-entropy of logits [rows x cols] against labels (backend
  // bytes). Writes dlogits = scale * (softmax - onehot); adds the summed loss
  // and the number of correct argmaxes to the backend's metrics.
  virtual void SoftmaxCrossEntropy(int rows, int cols, const float* logits, const uint8_t* labels,
                                   float scale, float* dlogits) = 0;
  // Argmax per row compared with labels: adds the number correct to the metrics.
  virtual void CountCorrect(int rows, int cols, const float* logits, const uint8_t* labels) = 0;
  // Waits for the compute stream; the loss and correct count added since the
  // last call (then zeroed).
  virtual void TakeMetrics(double* loss, int64_t* correct) = 0;

  // SGD with momentum and weight decay (PyTorch's torch.optim.SGD):
  // v = momentum * v + (g + wd * w); w -= lr * v.
  virtual void SgdStep(size_t n, float* w, const float* g, float* v, float lr, float momentum,
                       float weight_decay) = 0;
  virtual void Scale(size_t n, float factor, float* x) = 0;
};

// The CPU backend: OpenBLAS sgemm with `blas_threads` threads, plain loops
// for the rest.
std::unique_ptr<Compute> MakeCpuCompute(int blas_threads);

// How the GPU backend multiplies matrices.
enum class GemmKind {
  kAuto,    // cuBLAS where the machine's libcublas loads, else the trainer's own
  kCublas,  // cuBLAS, loaded at run time (an error where it does not load)
  kOwn,     // the trainer's own tiled kernel
};

// The GPU backend on `device` (made current on the calling thread): every
// buffer in device memory, one compute stream. cuBLAS runs with its
// atomics off and without TF32, and the kernels of the trainer's own use no
// atomics, so a run replays bit for bit on the same GPU. An error where the
// build has no CUDA or the device cannot be used.
base::StatusOr<std::unique_ptr<Compute>> MakeCudaCompute(int device, GemmKind gemm);
// GPUs this process sees (0 without CUDA, a driver or a device).
int CudaDeviceCount();

}  // namespace ringo::train

#endif  // RINGO_TRAINER_COMPUTE_H_
