#include "base/cuda.h"

#include <cstring>
#include <string>
#include <utility>

#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#define RINGO_HAVE_CUDART 1
#else
#define RINGO_HAVE_CUDART 0
#endif

namespace ringo::base {

#if !RINGO_HAVE_CUDART
namespace {
Status NoCuda(const char* what) {
  return InvalidUsage(std::string(what) + ": Ringo was built without the CUDA toolkit");
}
}  // namespace

const CudaProbe& ProbeCuda() {
  static const CudaProbe* const kProbe = new CudaProbe{0, "Ringo was built without the CUDA toolkit"};
  return *kProbe;
}

bool CudaRuntimeBuilt() { return false; }
bool IsDevicePointer(const void*) { return false; }
int PointerDevice(const void*) { return -1; }

Status CudaCallStatus(int error, const char* call, const char* file, int line) {
  if (error == 0) return Status();
  return Status(Code::kCudaError, std::string(call) + " failed at " + file + ":" + std::to_string(line) +
                                      ": CUDA error " + std::to_string(error));
}

StatusOr<int> CurrentDevice() { return NoCuda("cudaGetDevice"); }
StatusOr<ScopedDevice> ScopedDevice::Enter(int) { return NoCuda("cudaSetDevice"); }
ScopedDevice::ScopedDevice(ScopedDevice&& other) noexcept : previous_(std::exchange(other.previous_, -1)) {}
ScopedDevice::~ScopedDevice() = default;

StatusOr<MappedHostMemory> MappedHostMemory::Allocate(size_t) { return NoCuda("cudaHostAlloc"); }
void MappedHostMemory::Reset() { host_ = device_ = nullptr; }

StatusOr<CudaEvent> CudaEvent::Create(int) { return NoCuda("cudaEventCreate"); }
Status CudaEvent::Record(void*) { return NoCuda("cudaEventRecord"); }
Status CudaEvent::Synchronize() { return Status(); }
void CudaEvent::Reset() { event_ = nullptr; }

#else

const CudaProbe& ProbeCuda() {
  static const CudaProbe* const kProbe = [] {
    auto* p = new CudaProbe();
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      p->reason = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
      cudaGetLastError();  // clear the sticky-free error so later calls start clean
    } else if (count == 0) {
      p->reason = "no CUDA device is visible";
    } else {
      p->device_count = count;
    }
    return p;
  }();
  return *kProbe;
}

bool CudaRuntimeBuilt() { return true; }

bool IsDevicePointer(const void* ptr) { return PointerDevice(ptr) >= 0; }

int PointerDevice(const void* ptr) {
  if (ptr == nullptr || ProbeCuda().device_count == 0) return -1;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) return -1;
  return attr.device;
}

Status CudaCallStatus(int error, const char* call, const char* file, int line) {
  if (error == 0) return Status();
  const auto err = static_cast<cudaError_t>(error);
  cudaGetLastError();  // a non-sticky error must not resurface in a later call
  return Status(Code::kCudaError, std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                                      cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

StatusOr<int> CurrentDevice() {
  int device = -1;
  RINGO_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  return device;
}

StatusOr<ScopedDevice> ScopedDevice::Enter(int device) {
  int previous = -1;
  RINGO_CUDA_RETURN_IF_ERROR(cudaGetDevice(&previous));
  if (previous != device) RINGO_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  ScopedDevice scope;
  scope.previous_ = previous == device ? -1 : previous;
  return scope;
}

ScopedDevice::ScopedDevice(ScopedDevice&& other) noexcept : previous_(std::exchange(other.previous_, -1)) {}

ScopedDevice::~ScopedDevice() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

StatusOr<MappedHostMemory> MappedHostMemory::Allocate(size_t bytes) {
  MappedHostMemory m;
  RINGO_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&m.host_, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
  std::memset(m.host_, 0, bytes);
  RINGO_CUDA_RETURN_IF_ERROR(cudaHostGetDevicePointer(&m.device_, m.host_, 0));
  return m;
}

void MappedHostMemory::Reset() {
  if (host_ != nullptr) cudaFreeHost(host_);
  host_ = device_ = nullptr;
}

StatusOr<CudaEvent> CudaEvent::Create(int device) {
  ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device));
  CudaEvent e;
  cudaEvent_t ev = nullptr;
  RINGO_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  e.event_ = ev;
  e.device_ = device;
  return e;
}

Status CudaEvent::Record(void* stream) {
  ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
  RINGO_CUDA_RETURN_IF_ERROR(cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(stream)));
  recorded_ = true;
  return Status();
}

Status CudaEvent::Synchronize() {
  if (event_ == nullptr || !recorded_) return Status();
  RINGO_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)));
  return Status();
}

void CudaEvent::Reset() {
  if (event_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
  event_ = nullptr;
  recorded_ = false;
}
#endif  // RINGO_HAVE_CUDART

MappedHostMemory::MappedHostMemory(MappedHostMemory&& other) noexcept
    : host_(std::exchange(other.host_, nullptr)), device_(std::exchange(other.device_, nullptr)) {}

MappedHostMemory& MappedHostMemory::operator=(MappedHostMemory&& other) noexcept {
  if (this != &other) {
    Reset();
    host_ = std::exchange(other.host_, nullptr);
    device_ = std::exchange(other.device_, nullptr);
  }
  return *this;
}

MappedHostMemory::~MappedHostMemory() { Reset(); }

CudaEvent::CudaEvent(CudaEvent&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)),
      device_(std::exchange(other.device_, -1)),
      recorded_(std::exchange(other.recorded_, false)) {}

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  if (this != &other) {
    Reset();
    event_ = std::exchange(other.event_, nullptr);
    device_ = std::exchange(other.device_, -1);
    recorded_ = std::exchange(other.recorded_, false);
  }
  return *this;
}

CudaEvent::~CudaEvent() { Reset(); }

}  // namespace ringo::base
