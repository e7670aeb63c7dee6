#include "tools/perf/cuda_backend.h"

#include <string>

#include "base/cuda.h"

#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>

#include "tools/perf/verify_cuda.h"
#define RINGO_PERF_HAVE_CUDART 1
#else
#define RINGO_PERF_HAVE_CUDART 0
#endif

namespace ringo::perf {

using base::Status;
using base::StatusOr;

#if !RINGO_PERF_HAVE_CUDART

StatusOr<std::unique_ptr<Backend>> MakeCudaOrHostBackend(int cuda_device,
                                                         const HostAllocator* allocator) {
  if (cuda_device < 0) return MakeBackend(cuda_device, allocator);
  return base::InvalidUsage("GPU buffers on device " + std::to_string(cuda_device) +
                            ": ringo-perf was built without the CUDA toolkit; pass --host");
}

Status UseCudaDevice(int device) {
  return base::InvalidUsage("CUDA device " + std::to_string(device) +
                            ": ringo-perf was built without the CUDA toolkit; pass --host");
}

#else

namespace {

// Every operation is enqueued on stream_, so it is ordered after the
// collectives issued before it; the blocking ones then wait for the stream.
class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) : device_(device) {}
  ~CudaBackend() override;

  // Creates the stream, the events and the counter; names the failing call.
  Status Init();

  StatusOr<void*> Alloc(size_t bytes) override;
  void Free(void* ptr) override { cudaFree(ptr); }
  Status CopyToBackend(void* dst, const void* host_src, size_t bytes) override;
  Status CopyToHost(void* host_dst, const void* src, size_t bytes) override;
  Status Fill(void* dst, uint8_t byte, size_t bytes) override;
  Status FillInput(base::DataType type, const Pattern& pattern, size_t first, size_t count,
                   void* dst) override;
  StatusOr<int64_t> CountWrong(base::DataType type, const Pattern& pattern, size_t first,
                               size_t count, const void* got) override;
  std::string DeviceDescription() const override { return description_; }
  void* stream() const override { return stream_; }
  Status Synchronize() override;
  Status StartTimer() override;
  StatusOr<double> StopTimer() override;
  Status BeginCapture() override;
  StatusOr<void*> EndCapture() override;
  Status LaunchGraph(void* graph) override;
  void DestroyGraph(void* graph) override;

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
  unsigned long long* wrong_ = nullptr;  // device counter of CountWrong
  std::string description_;
};

CudaBackend::~CudaBackend() {
  // Nothing may still run on the stream when its memory goes.
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (wrong_ != nullptr) cudaFree(wrong_);
  if (start_ != nullptr) cudaEventDestroy(start_);
  if (stop_ != nullptr) cudaEventDestroy(stop_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

Status CudaBackend::Init() {
  RINGO_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  // Non-blocking: the legacy default stream, which other code of the process
  // may use, never serialises with the collectives.
  RINGO_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  RINGO_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start_));
  RINGO_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop_));
  RINGO_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&wrong_), sizeof(*wrong_)));
  RINGO_CUDA_RETURN_IF_ERROR(static_cast<cudaError_t>(gpu::LoadVerifyKernels()));
  char bus_id[32] = {};
  RINGO_CUDA_RETURN_IF_ERROR(cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), device_));
  cudaDeviceProp prop;
  RINGO_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device_));
  description_ = "[" + std::string(bus_id) + "] " + prop.name;
  return Status();
}

StatusOr<void*> CudaBackend::Alloc(size_t bytes) {
  void* ptr = nullptr;
  // cudaMalloc(0) may return NULL; ask for a byte so every buffer is real.
  RINGO_CUDA_RETURN_IF_ERROR(cudaMalloc(&ptr, bytes > 0 ? bytes : 1));
  // Touched once, as the host backend does, so first-use costs stay out of
  // the timings.
  const Status zeroed = Fill(ptr, 0, bytes);
  const Status done = zeroed.ok() ? Synchronize() : zeroed;
  if (!done.ok()) {
    cudaFree(ptr);
    return done;
  }
  return ptr;
}

Status CudaBackend::CopyToBackend(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return Status();
  RINGO_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
  return Synchronize();
}

Status CudaBackend::CopyToHost(void* host_dst, const void* src, size_t bytes) {
  if (bytes == 0) return Status();
  RINGO_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  return Synchronize();
}

Status CudaBackend::Fill(void* dst, uint8_t byte, size_t bytes) {
  if (bytes == 0) return Status();
  RINGO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dst, byte, bytes, stream_));
  return Status();
}

Status CudaBackend::FillInput(base::DataType type, const Pattern& pattern, size_t first,
                              size_t count, void* dst) {
  PatternSpec spec = pattern.spec();
  spec.type = type;
  RINGO_CUDA_RETURN_IF_ERROR(
      static_cast<cudaError_t>(gpu::LaunchFillInput(spec, first, count, dst, stream_)));
  return Status();
}

StatusOr<int64_t> CudaBackend::CountWrong(base::DataType type, const Pattern& pattern, size_t first,
                                          size_t count, const void* got) {
  PatternSpec spec = pattern.spec();
  spec.type = type;
  RINGO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(wrong_, 0, sizeof(*wrong_), stream_));
  RINGO_CUDA_RETURN_IF_ERROR(
      static_cast<cudaError_t>(gpu::LaunchCountWrong(spec, first, count, got, wrong_, stream_)));
  unsigned long long wrong = 0;
  RETURN_IF_ERROR(CopyToHost(&wrong, wrong_, sizeof(wrong)));
  return static_cast<int64_t>(wrong);
}

Status CudaBackend::Synchronize() {
  RINGO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return Status();
}

Status CudaBackend::StartTimer() {
  RINGO_CUDA_RETURN_IF_ERROR(cudaEventRecord(start_, stream_));
  return Status();
}

StatusOr<double> CudaBackend::StopTimer() {
  RINGO_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop_, stream_));
  RINGO_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop_));
  float ms = 0;
  RINGO_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start_, stop_));
  return ms * 1e-3;
}

Status CudaBackend::BeginCapture() {
  RINGO_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  return Status();
}

StatusOr<void*> CudaBackend::EndCapture() {
  cudaGraph_t graph = nullptr;
  RINGO_CUDA_RETURN_IF_ERROR(cudaStreamEndCapture(stream_, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  RINGO_CUDA_RETURN_IF_ERROR(made);
  return static_cast<void*>(exec);
}

Status CudaBackend::LaunchGraph(void* graph) {
  RINGO_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), stream_));
  return Status();
}

void CudaBackend::DestroyGraph(void* graph) {
  if (graph != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
}

}  // namespace

StatusOr<std::unique_ptr<Backend>> MakeCudaOrHostBackend(int cuda_device,
                                                         const HostAllocator* allocator) {
  if (cuda_device < 0) return MakeBackend(cuda_device, allocator);
  if (allocator != nullptr) {
    return base::InvalidUsage(
        "-R 1 takes the buffers from ringoMemAlloc, which is host memory, but the communicator "
        "uses CUDA device " +
        std::to_string(cuda_device) + ": add --host, or leave -R out for GPU buffers");
  }
  auto backend = std::make_unique<CudaBackend>(cuda_device);
  RETURN_IF_ERROR(
      backend->Init().WithContext("GPU buffers on device " + std::to_string(cuda_device)));
  return std::unique_ptr<Backend>(std::move(backend));
}

Status UseCudaDevice(int device) {
  RINGO_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  RINGO_CUDA_RETURN_IF_ERROR(cudaFree(nullptr));
  return Status();
}

#endif  // RINGO_PERF_HAVE_CUDART

}  // namespace ringo::perf
