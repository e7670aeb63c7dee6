// The GPU Compute: device memory, one compute stream, cuBLAS (loaded from
// the machine at run time: far too large to ship) or the trainer's own GEMM
// for the matrix products, and the trainer's own kernels (cuda_kernels.h)
// for the rest.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "trainer/compute.h"
#include "trainer/cuda_kernels.h"

namespace ringo::train {
namespace {

// The few cuBLAS entry points used, declared here so that nothing links
// libcublas: it is opened with dlopen where the machine has it.
struct Cublas {
  using Handle = void*;
  int (*create)(Handle*) = nullptr;
  int (*destroy)(Handle) = nullptr;
  int (*set_stream)(Handle, cudaStream_t) = nullptr;
  int (*set_math_mode)(Handle, int) = nullptr;
  int (*set_atomics_mode)(Handle, int) = nullptr;
  int (*get_version)(Handle, int*) = nullptr;
  int (*sgemm)(Handle, int, int, int, int, int, const float*, const float*, int, const float*, int,
               const float*, float*, int) = nullptr;
  static constexpr int kOpN = 0, kOpT = 1;         // cublasOperation_t
  static constexpr int kDefaultMath = 0;           // cublasMath_t: fp32 arithmetic, no TF32
  static constexpr int kAtomicsNotAllowed = 0;     // cublasAtomicsMode_t
  void* lib = nullptr;

  // Opens `name` and finds the entry points: empty on success, else why not.
  std::string Load(const char* name) {
    lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return std::string(name) + " does not load: " + dlerror();
    const std::pair<const char*, void**> symbols[] = {
        {"cublasCreate_v2", reinterpret_cast<void**>(&create)},
        {"cublasDestroy_v2", reinterpret_cast<void**>(&destroy)},
        {"cublasSetStream_v2", reinterpret_cast<void**>(&set_stream)},
        {"cublasSetMathMode", reinterpret_cast<void**>(&set_math_mode)},
        {"cublasSetAtomicsMode", reinterpret_cast<void**>(&set_atomics_mode)},
        {"cublasGetVersion_v2", reinterpret_cast<void**>(&get_version)},
        {"cublasSgemm_v2", reinterpret_cast<void**>(&sgemm)},
    };
    for (const auto& [symbol, slot] : symbols) {
      *slot = dlsym(lib, symbol);
      if (*slot == nullptr) return std::string(name) + " lacks " + symbol;
    }
    return "";
  }
  // A handle on `stream` with fp32 math (no TF32) and no atomics, and
  // cuBLAS's version; 0 on success, else the cublasStatus_t.
  int Setup(cudaStream_t stream, Handle* handle, int* version) {
    int rc = create(handle);
    if (rc == 0) rc = set_stream(*handle, stream);
    if (rc == 0) rc = set_math_mode(*handle, kDefaultMath);
    if (rc == 0) rc = set_atomics_mode(*handle, kAtomicsNotAllowed);
    if (rc == 0) rc = get_version(*handle, version);
    if (rc != 0 && *handle != nullptr) {
      destroy(*handle);
      *handle = nullptr;
    }
    return rc;
  }
};

std::string CudaError(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

class CudaCompute final : public Compute {
 public:
  CudaCompute(int device, cudaStream_t stream, std::string name)
      : device_(device), stream_(stream), name_(std::move(name)) {}
  ~CudaCompute() override {
    cudaStreamSynchronize(stream_);
    if (handle_ != nullptr) cublas_.destroy(handle_);
    for (void* p : {static_cast<void*>(row_loss_), static_cast<void*>(row_correct_), static_cast<void*>(metrics_)}) {
      if (p != nullptr) cudaFree(p);
    }
    if (host_metrics_ != nullptr) cudaFreeHost(host_metrics_);
    cudaStreamDestroy(stream_);
    // The library stays loaded: cuBLAS's own teardown runs at exit.
  }

  // Loads cuBLAS (kCublas, or kAuto where one of the libraries loads and
  // sets up) and the metrics.
  base::Status Init(GemmKind gemm) {
    std::string why;
    for (const char* lib : {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"}) {
      if (gemm == GemmKind::kOwn || handle_ != nullptr) break;
      Cublas candidate;
      std::string failed = candidate.Load(lib);
      int version = 0;
      if (failed.empty()) {
        const int rc = candidate.Setup(stream_, &handle_, &version);
        if (rc != 0) failed = std::string(lib) + ": setup failed (cublasStatus " + std::to_string(rc) + ")";
      }
      if (failed.empty()) {
        cublas_ = candidate;
        name_ += ", cuBLAS " + std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100);
      } else {
        why += (why.empty() ? "" : "; ") + failed;
        if (candidate.lib != nullptr) dlclose(candidate.lib);
      }
    }
    if (handle_ == nullptr) {
      if (gemm == GemmKind::kCublas) return base::SystemError("--gemm cublas: no cuBLAS: " + why);
      name_ += gemm == GemmKind::kOwn ? ", own GEMM" : ", own GEMM (no cuBLAS: " + why + ")";
    }
    name_ += ")";
    RETURN_IF_ERROR(Check(cudaMalloc(&metrics_, 2 * sizeof(double)), "cudaMalloc"));
    RETURN_IF_ERROR(Check(cudaMemsetAsync(metrics_, 0, 2 * sizeof(double), stream_), "cudaMemsetAsync"));
    RETURN_IF_ERROR(Check(cudaMallocHost(&host_metrics_, 2 * sizeof(double)), "cudaMallocHost"));
    return Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  std::string Name() const override { return name_; }
  bool on_device() const override { return true; }

  void* AllocBytes(size_t bytes) override {
    void* p = nullptr;
    const size_t rounded = bytes < 64 ? 64 : (bytes + 63) / 64 * 64;
    if (!Note(cudaMalloc(&p, rounded), "cudaMalloc")) {
      std::fprintf(stderr, "ringo-train: cudaMalloc of %zu bytes failed: %s\n", rounded, error_.message().c_str());
      std::abort();
    }
    // Zeroed before any stream (the communication stream too) may use it.
    Note(cudaMemsetAsync(p, 0, rounded, stream_), "cudaMemsetAsync");
    Note(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    return p;
  }
  void FreeBytes(void* p) override {
    if (p == nullptr) return;
    Note(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    Note(cudaFree(p), "cudaFree");
  }
  void CopyIn(const void* host, void* dst, size_t bytes) override {
    if (bytes) Note(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync");
  }
  void CopyOut(const void* src, void* host, size_t bytes) override {
    if (bytes) Note(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync");
    Note(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  Stream stream() override { return stream_; }
  Stream NewStream() override {
    cudaStream_t s = nullptr;
    Note(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    return s;
  }
  void FreeStream(Stream s) override {
    if (s == nullptr) return;
    Note(cudaStreamSynchronize(static_cast<cudaStream_t>(s)), "cudaStreamSynchronize");
    Note(cudaStreamDestroy(static_cast<cudaStream_t>(s)), "cudaStreamDestroy");
  }
  Event NewEvent() override {
    cudaEvent_t e = nullptr;
    Note(cudaEventCreate(&e), "cudaEventCreate");
    return e;
  }
  void FreeEvent(Event e) override {
    if (e != nullptr) Note(cudaEventDestroy(static_cast<cudaEvent_t>(e)), "cudaEventDestroy");
  }
  void Record(Event e, Stream s) override {
    Note(cudaEventRecord(static_cast<cudaEvent_t>(e), static_cast<cudaStream_t>(s)), "cudaEventRecord");
  }
  void StreamWait(Stream s, Event e) override {
    Note(cudaStreamWaitEvent(static_cast<cudaStream_t>(s), static_cast<cudaEvent_t>(e), 0), "cudaStreamWaitEvent");
  }
  void Synchronize(Stream s) override {
    Note(cudaStreamSynchronize(static_cast<cudaStream_t>(s)), "cudaStreamSynchronize");
  }
  double ElapsedMs(Event from, Event to) override {
    float ms = 0;
    Note(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(from), static_cast<cudaEvent_t>(to)),
         "cudaEventElapsedTime");
    return ms;
  }
  base::Status Error() override {
    if (error_.ok()) Note(cudaGetLastError(), "a kernel launch");
    return error_;
  }

  void Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
            int ldb, float beta, float* c, int ldc) override {
    if (handle_ == nullptr) {
      cuda::Gemm(stream_, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      return;
    }
    // Row-major c (m x n) is column-major c^T = op(b)^T op(a)^T (n x m).
    const int rc = cublas_.sgemm(handle_, trans_b ? Cublas::kOpT : Cublas::kOpN, trans_a ? Cublas::kOpT : Cublas::kOpN,
                                 n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc);
    if (rc != 0 && error_.ok()) error_ = base::Internal("cublasSgemm failed (cublasStatus " + std::to_string(rc) + ")");
  }
  void AddBias(int rows, int cols, const float* bias, float* y) override {
    cuda::AddBias(stream_, rows, cols, bias, y);
  }
  void ColumnSum(int rows, int cols, const float* x, float beta, float* out) override {
    cuda::ColumnSum(stream_, rows, cols, x, beta, out);
  }
  void Relu(size_t n, const float* x, float* y) override { cuda::Relu(stream_, n, x, y); }
  void ReluBackward(size_t n, const float* y, const float* dy, float* dx) override {
    cuda::ReluBackward(stream_, n, y, dy, dx);
  }
  void ColumnMoments(int rows, int cols, const float* x, double* stats) override {
    cuda::ColumnStats(stream_, rows, cols, x, nullptr, stats);
  }
  void BatchNormStats(int cols, const double* stats, double momentum, double eps, float* running, float* mean,
                      float* invstd) override {
    cuda::BatchNormStats(stream_, cols, stats, momentum, eps, running, mean, invstd);
  }
  void BatchNormApply(int rows, int cols, const float* x, const float* mean, const float* invstd, const float* gamma,
                      const float* beta, float* xhat, float* y) override {
    cuda::BatchNormApply(stream_, rows, cols, x, mean, invstd, gamma, beta, xhat, y);
  }
  void BatchNormGradSums(int rows, int cols, const float* dy, const float* xhat, double* stats) override {
    cuda::ColumnStats(stream_, rows, cols, dy, xhat, stats);
  }
  void BatchNormParamGrads(int cols, const double* stats, bool accumulate, float* dgamma, float* dbeta) override {
    cuda::BatchNormParamGrads(stream_, cols, stats, accumulate, dgamma, dbeta);
  }
  void BatchNormBackward(int rows, int cols, const float* dy, const float* xhat, const float* gamma,
                         const float* invstd, const double* stats, float* dx) override {
    cuda::BatchNormBackward(stream_, rows, cols, dy, xhat, gamma, invstd, stats, dx);
  }
  void SoftmaxCrossEntropy(int rows, int cols, const float* logits, const uint8_t* labels, float scale,
                           float* dlogits) override {
    EnsureRows(rows);
    cuda::SoftmaxCrossEntropy(stream_, rows, cols, logits, labels, scale, dlogits, row_loss_, row_correct_,
                              metrics_, reinterpret_cast<long long*>(metrics_ + 1));
  }
  void CountCorrect(int rows, int cols, const float* logits, const uint8_t* labels) override {
    EnsureRows(rows);
    cuda::CountCorrect(stream_, rows, cols, logits, labels, row_correct_, reinterpret_cast<long long*>(metrics_ + 1));
  }
  void TakeMetrics(double* loss, int64_t* correct) override {
    Note(cudaMemcpyAsync(host_metrics_, metrics_, 2 * sizeof(double), cudaMemcpyDeviceToHost, stream_),
         "cudaMemcpyAsync");
    Note(cudaMemsetAsync(metrics_, 0, 2 * sizeof(double), stream_), "cudaMemsetAsync");
    Note(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    *loss = host_metrics_[0];
    long long n = 0;
    std::memcpy(&n, host_metrics_ + 1, sizeof(n));
    *correct = n;
  }
  void SgdStep(size_t n, float* w, const float* g, float* v, float lr, float momentum, float weight_decay) override {
    cuda::SgdStep(stream_, n, w, g, v, lr, momentum, weight_decay);
  }
  void Scale(size_t n, float factor, float* x) override { cuda::Scale(stream_, n, factor, x); }

 private:
  base::Status Check(cudaError_t e, const char* what) {
    return e == cudaSuccess ? base::OkStatus() : base::Internal(std::string(what) + ": " + CudaError(e));
  }
  // Keeps the first failure for Error().
  bool Note(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return true;
    if (error_.ok()) error_ = base::Internal(std::string(what) + ": " + CudaError(e));
    return false;
  }
  void EnsureRows(int rows) {
    if (rows <= row_capacity_) return;
    if (row_loss_ != nullptr) {
      Note(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
      cudaFree(row_loss_);
      cudaFree(row_correct_);
    }
    Note(cudaMalloc(&row_loss_, rows * sizeof(double)), "cudaMalloc");
    Note(cudaMalloc(&row_correct_, rows * sizeof(int)), "cudaMalloc");
    row_capacity_ = rows;
  }

  int device_;
  cudaStream_t stream_;
  std::string name_;
  Cublas cublas_;
  Cublas::Handle handle_ = nullptr;
  double* metrics_ = nullptr;       // [loss, correct (a long long's bits)]
  double* host_metrics_ = nullptr;  // pinned
  double* row_loss_ = nullptr;
  int* row_correct_ = nullptr;
  int row_capacity_ = 0;
  base::Status error_;
};

}  // namespace

int CudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

base::StatusOr<std::unique_ptr<Compute>> MakeCudaCompute(int device, GemmKind gemm) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    return base::SystemError("no usable GPU (" + (e != cudaSuccess ? CudaError(e) : std::string("0 devices")) + ")");
  }
  if (device < 0 || device >= count) {
    return base::InvalidArgument("GPU " + std::to_string(device) + " of " + std::to_string(count));
  }
  if ((e = cudaSetDevice(device)) != cudaSuccess) return base::SystemError("cudaSetDevice: " + CudaError(e));
  cudaDeviceProp prop{};
  if ((e = cudaGetDeviceProperties(&prop, device)) != cudaSuccess) {
    return base::SystemError("cudaGetDeviceProperties: " + CudaError(e));
  }
  cudaStream_t stream = nullptr;
  if ((e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)) != cudaSuccess) {
    return base::SystemError("cudaStreamCreate: " + CudaError(e));
  }
  auto compute = std::make_unique<CudaCompute>(device, stream,
                                               "cuda (" + std::string(prop.name) + ", device " + std::to_string(device));
  RETURN_IF_ERROR(compute->Init(gemm));
  return std::unique_ptr<Compute>(std::move(compute));
}

}  // namespace ringo::train
