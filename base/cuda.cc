#include "base/cuda.h"

#include <unistd.h>

#include <cstring>
#include <string>
#include <utility>

#include "base/config.h"
#include "base/cuda_calls.h"

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
StatusOr<void*> DeviceMalloc(size_t) { return NoCuda("cudaMalloc"); }
Status DeviceFree(void* ptr) { return ptr == nullptr ? Status() : NoCuda("cudaFree"); }
Status CopyToHost(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
  return Status();
}
Status PciBusId(int, char*, int) { return NoCuda("cudaDeviceGetPCIBusId"); }
StatusOr<StreamFacts> GetStreamFacts(void*) { return NoCuda("cudaStreamGetFlags"); }
StatusOr<unsigned long long> StreamId(void*) { return NoCuda("cudaStreamGetId"); }
bool StreamCapturing(void*) { return false; }
StatusOr<StreamCapture> GetStreamCapture(void*) { return StreamCapture(); }
Status CudaEvent::MakeStreamWait(void*) { return NoCuda("cudaStreamWaitEvent"); }
StatusOr<ScopedDevice> ScopedDevice::Enter(int) { return NoCuda("cudaSetDevice"); }
ScopedDevice::ScopedDevice(ScopedDevice&& other) noexcept : previous_(std::exchange(other.previous_, -1)) {}
ScopedDevice::~ScopedDevice() = default;

StatusOr<MappedHostMemory> MappedHostMemory::Allocate(size_t) { return NoCuda("cudaHostAlloc"); }
void MappedHostMemory::Reset() { host_ = device_ = nullptr; }

StatusOr<DeviceCopy> DeviceCopy::Of(int, const void*, size_t) { return NoCuda("cudaMalloc"); }
void DeviceCopy::Reset() { ptr_ = nullptr; }

StatusOr<CudaEvent> CudaEvent::Create(int) { return NoCuda("cudaEventCreate"); }
Status CudaEvent::Record(void*) { return NoCuda("cudaEventRecord"); }
Status CudaEvent::RecordInGraph(void*) { return NoCuda("cudaEventRecordWithFlags"); }
Status CudaEvent::Synchronize() { return Status(); }
void CudaEvent::Reset() { event_ = nullptr; }

StatusOr<GpuDirectAttrs> DeviceGpuDirect(int) { return NoCuda("cudaDeviceGetAttribute"); }
StatusOr<DmaBuf> ExportDmaBuf(const void*, size_t) { return NoCuda("cuMemGetHandleForAddressRange"); }
Status FlushGpuDirectWrites(int) { return NoCuda("cudaDeviceFlushGPUDirectRDMAWrites"); }
StatusOr<std::unique_ptr<CudaEventSet>> CudaEventSet::Create(int, int) { return NoCuda("cudaEventCreate"); }
CudaEventSet::~CudaEventSet() = default;
Status CudaEventSet::Record(int, void*) { return NoCuda("cudaEventRecord"); }
StatusOr<bool> CudaEventSet::Done(int) { return NoCuda("cudaEventQuery"); }
StatusOr<float> CudaEventSet::ElapsedMs(int, int) { return NoCuda("cudaEventElapsedTime"); }
Status CudaEventSet::RecordAside(int) { return NoCuda("cudaEventRecord"); }

#else

namespace {

// Whether any device's primary context is active already (created by the
// application before Ringo's first CUDA call), asked through the driver's
// entry points so that nothing links libcuda. False when it cannot tell.
bool AnyPrimaryContextActive(int device_count) {
  using DeviceGetFn = int (*)(int* device, int ordinal);
  using PrimaryCtxGetStateFn = int (*)(int device, unsigned int* flags, int* active);
  void* get = nullptr;
  void* state = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  CountCudaCall(CudaCall::kOther);
  CountCudaCall(CudaCall::kOther);
  if (cudaGetDriverEntryPointByVersion("cuDeviceGet", &get, 12000, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess ||
      cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &state, 12000,
                                       cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    CountCudaCall(CudaCall::kGetLastError);
    cudaGetLastError();
    return false;
  }
  for (int ordinal = 0; ordinal < device_count; ++ordinal) {
    int device = 0;
    unsigned int flags = 0;
    int active = 0;
    if (reinterpret_cast<DeviceGetFn>(get)(&device, ordinal) == 0 &&
        reinterpret_cast<PrimaryCtxGetStateFn>(state)(device, &flags, &active) == 0 &&
        active != 0) {
      return true;
    }
  }
  return false;
}

}  // namespace

const CudaProbe& ProbeCuda() {
  static const CudaProbe* const kProbe = [] {
    auto* p = new CudaProbe();
    // What the environment held (read before the export below changes it).
    const int64_t before = GetConfig().cuda_device_max_connections;
    // Before the first CUDA call: a context created from now on gets 32
    // queues, except for an MPS client, whose queues come from the MPS
    // server's pool (seen on an H100: 32 each, and the fourth client was
    // refused with "Reached maximum number of device connections").
    const int queues = ExportCudaDeviceMaxConnections(MpsControlPresent(GetConfig()) ? 0 : 32);
    int count = 0;
    CountCudaCall(CudaCall::kOther);
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      p->reason = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
      CountCudaCall(CudaCall::kGetLastError);
      cudaGetLastError();  // clear the sticky-free error so later calls start clean
    } else if (count == 0) {
      p->reason = "no CUDA device is visible";
    } else {
      p->device_count = count;
    }
    p->context_before_probe = count > 0 && AnyPrimaryContextActive(count);
    // A context that predates the probe has the queues the environment held
    // before it, CUDA's 8 when unset.
    p->work_queues = !p->context_before_probe ? queues
                     : before > 0             ? static_cast<int>(before > 32 ? 32 : before)
                                              : 8;
    return p;
  }();
  return *kProbe;
}

bool CudaRuntimeBuilt() { return true; }

StatusOr<void*> DeviceMalloc(size_t bytes) {
  if (ProbeCuda().device_count == 0) return InvalidUsage("cudaMalloc: " + ProbeCuda().reason);
  void* ptr = nullptr;
  CountCudaCall(CudaCall::kOther);
  RINGO_CUDA_RETURN_IF_ERROR(cudaMalloc(&ptr, bytes));
  return ptr;
}

Status DeviceFree(void* ptr) {
  if (ptr == nullptr) return Status();
  CountCudaCall(CudaCall::kOther);
  RINGO_CUDA_RETURN_IF_ERROR(cudaFree(ptr));
  return Status();
}

Status CopyToHost(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return Status();
  if (PointerDevice(src) < 0) {
    std::memcpy(dst, src, bytes);
    return Status();
  }
  CountCudaCall(CudaCall::kOther);
  RINGO_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
  return Status();
}

bool IsDevicePointer(const void* ptr) { return PointerDevice(ptr) >= 0; }

int PointerDevice(const void* ptr) {
  if (ptr == nullptr || ProbeCuda().device_count == 0) return -1;
  cudaPointerAttributes attr{};
  CountCudaCall(CudaCall::kPointerGetAttributes);
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    CountCudaCall(CudaCall::kGetLastError);
    cudaGetLastError();
    return -1;
  }
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) return -1;
  return attr.device;
}

Status CudaCallStatus(int error, const char* call, const char* file, int line) {
  if (error == 0) return Status();
  const auto err = static_cast<cudaError_t>(error);
  CountCudaCall(CudaCall::kGetLastError);
  cudaGetLastError();  // a non-sticky error must not resurface in a later call
  return Status(Code::kCudaError, std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                                      cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

StatusOr<int> CurrentDevice() {
  int device = -1;
  CountCudaCall(CudaCall::kGetDevice);
  RINGO_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  return device;
}

Status PciBusId(int device, char* out, int size) {
  if (size > 0) out[0] = '\0';
  CountCudaCall(CudaCall::kOther);
  RINGO_CUDA_RETURN_IF_ERROR(cudaDeviceGetPCIBusId(out, size, device));
  if (size > 0) out[size - 1] = '\0';
  return Status();
}

StatusOr<StreamFacts> GetStreamFacts(void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  StreamFacts f;
  f.legacy = s == nullptr || s == cudaStreamLegacy;
  if (f.legacy) return f;
  unsigned int flags = 0;
  CountCudaCall(CudaCall::kStreamGetFlags);
  RINGO_CUDA_RETURN_IF_ERROR(cudaStreamGetFlags(s, &flags));
  f.non_blocking = (flags & cudaStreamNonBlocking) != 0;
  return f;
}

StatusOr<unsigned long long> StreamId(void* stream) {
  unsigned long long id = 0;
  CountCudaCall(CudaCall::kStreamGetId);
  RINGO_CUDA_RETURN_IF_ERROR(cudaStreamGetId(static_cast<cudaStream_t>(stream), &id));
  return id;
}

bool StreamCapturing(void* stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CountCudaCall(CudaCall::kStreamIsCapturing);
  if (cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status) != cudaSuccess) {
    CountCudaCall(CudaCall::kGetLastError);
    (void)cudaGetLastError();
    return false;
  }
  return status == cudaStreamCaptureStatusActive;
}

StatusOr<StreamCapture> GetStreamCapture(void* stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  CountCudaCall(CudaCall::kStreamGetCaptureInfo);
  RINGO_CUDA_RETURN_IF_ERROR(cudaStreamGetCaptureInfo(static_cast<cudaStream_t>(stream), &status, &id));
  if (status == cudaStreamCaptureStatusInvalidated) {
    return InvalidUsage("the stream's CUDA graph capture was invalidated by an earlier failed call in it");
  }
  StreamCapture c;
  c.active = status == cudaStreamCaptureStatusActive;
  c.id = c.active ? id : 0;
  return c;
}

StatusOr<ScopedDevice> ScopedDevice::Enter(int device) {
  int previous = -1;
  CountCudaCall(CudaCall::kGetDevice);
  RINGO_CUDA_RETURN_IF_ERROR(cudaGetDevice(&previous));
  if (previous != device) {
    CountCudaCall(CudaCall::kSetDevice);
    RINGO_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  }
  ScopedDevice scope;
  scope.previous_ = previous == device ? -1 : previous;
  return scope;
}

ScopedDevice::ScopedDevice(ScopedDevice&& other) noexcept : previous_(std::exchange(other.previous_, -1)) {}

ScopedDevice::~ScopedDevice() {
  if (previous_ >= 0) {
    CountCudaCall(CudaCall::kSetDevice);
    cudaSetDevice(previous_);
  }
}

StatusOr<MappedHostMemory> MappedHostMemory::Allocate(size_t bytes) {
  MappedHostMemory m;
  CountCudaCall(CudaCall::kOther);
  RINGO_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&m.host_, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
  std::memset(m.host_, 0, bytes);
  CountCudaCall(CudaCall::kOther);
  RINGO_CUDA_RETURN_IF_ERROR(cudaHostGetDevicePointer(&m.device_, m.host_, 0));
  return m;
}

void MappedHostMemory::Reset() {
  if (host_ != nullptr) {
    CountCudaCall(CudaCall::kOther);
    cudaFreeHost(host_);
  }
  host_ = device_ = nullptr;
}

StatusOr<DeviceCopy> DeviceCopy::Of(int device, const void* host, size_t bytes) {
  ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device));
  DeviceCopy c;
  c.device_ = device;
  CountCudaCall(CudaCall::kOther);
  RINGO_CUDA_RETURN_IF_ERROR(cudaMalloc(&c.ptr_, bytes > 0 ? bytes : 1));
  if (bytes == 0) return c;
  cudaStream_t stream = nullptr;
  CountCudaCall(CudaCall::kOther);
  RINGO_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CountCudaCall(CudaCall::kMemcpyAsync);
  cudaError_t err = cudaMemcpyAsync(c.ptr_, host, bytes, cudaMemcpyHostToDevice, stream);
  CountCudaCall(CudaCall::kStreamSynchronize);
  const cudaError_t synced = cudaStreamSynchronize(stream);
  CountCudaCall(CudaCall::kOther);
  cudaStreamDestroy(stream);
  if (err == cudaSuccess) err = synced;
  RINGO_CUDA_RETURN_IF_ERROR(err);
  return c;
}

void DeviceCopy::Reset() {
  if (ptr_ != nullptr) {
    auto scope = ScopedDevice::Enter(device_);
    CountCudaCall(CudaCall::kOther);
    cudaFree(ptr_);
  }
  ptr_ = nullptr;
}

StatusOr<CudaEvent> CudaEvent::Create(int device) {
  ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device));
  CudaEvent e;
  cudaEvent_t ev = nullptr;
  CountCudaCall(CudaCall::kOther);
  RINGO_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  e.event_ = ev;
  e.device_ = device;
  return e;
}

Status CudaEvent::Record(void* stream) {
  CountCudaCall(CudaCall::kEventRecord);
  RINGO_CUDA_RETURN_IF_ERROR(cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(stream)));
  recorded_ = true;
  return Status();
}

Status CudaEvent::RecordInGraph(void* stream) {
  CountCudaCall(CudaCall::kEventRecord);
  RINGO_CUDA_RETURN_IF_ERROR(cudaEventRecordWithFlags(static_cast<cudaEvent_t>(event_),
                                                      static_cast<cudaStream_t>(stream), cudaEventRecordExternal));
  recorded_ = true;
  return Status();
}

Status CudaEvent::MakeStreamWait(void* stream) {
  if (event_ == nullptr || !recorded_) return Status();
  CountCudaCall(CudaCall::kStreamWaitEvent);
  RINGO_CUDA_RETURN_IF_ERROR(
      cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event_), 0));
  return Status();
}

Status CudaEvent::Synchronize() {
  if (event_ == nullptr || !recorded_) return Status();
  CountCudaCall(CudaCall::kEventSynchronize);
  RINGO_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)));
  return Status();
}

void CudaEvent::Reset() {
  if (event_ != nullptr) {
    CountCudaCall(CudaCall::kOther);
    cudaEventDestroy(static_cast<cudaEvent_t>(event_));
  }
  event_ = nullptr;
  recorded_ = false;
}

StatusOr<GpuDirectAttrs> DeviceGpuDirect(int device) {
  GpuDirectAttrs a;
  int v = 0;
  CountCudaCall(CudaCall::kOther);
  RINGO_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&v, cudaDevAttrGPUDirectRDMASupported, device));
  a.rdma = v != 0;
  // The dma-buf attribute (the driver's CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED,
  // 124): runtimes that do not know it say so, which reads as no.
  v = 0;
  CountCudaCall(CudaCall::kOther);
  if (cudaDeviceGetAttribute(&v, static_cast<cudaDeviceAttr>(124), device) == cudaSuccess) a.dmabuf = v != 0;
  v = 0;
  CountCudaCall(CudaCall::kOther);
  if (cudaDeviceGetAttribute(&v, cudaDevAttrGPUDirectRDMAWritesOrdering, device) == cudaSuccess) {
    a.writes_ordered = v >= cudaGPUDirectRDMAWritesOrderingOwner;
  }
  v = 0;
  CountCudaCall(CudaCall::kOther);
  if (cudaDeviceGetAttribute(&v, cudaDevAttrGPUDirectRDMAFlushWritesOptions, device) == cudaSuccess) {
    a.flush = (v & cudaFlushGPUDirectRDMAWritesOptionHost) != 0;
  }
  CountCudaCall(CudaCall::kGetLastError);
  (void)cudaGetLastError();
  return a;
}

StatusOr<DmaBuf> ExportDmaBuf(const void* ptr, size_t bytes) {
  // CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD (1) of cuMemGetHandleForAddressRange (CUDA 11.7).
  using GetHandleFn = int (*)(void* handle, unsigned long long dptr, size_t size, int type,
                              unsigned long long flags);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  CountCudaCall(CudaCall::kOther);
  if (cudaGetDriverEntryPointByVersion("cuMemGetHandleForAddressRange", &fn, 11070, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess || fn == nullptr) {
    CountCudaCall(CudaCall::kGetLastError);
    (void)cudaGetLastError();
    return InvalidUsage("cuMemGetHandleForAddressRange: this CUDA driver does not export device memory as a dma-buf");
  }
  const long page_size = ::sysconf(_SC_PAGESIZE);
  const size_t page = page_size > 0 ? static_cast<size_t>(page_size) : 4096;
  const auto start = reinterpret_cast<uintptr_t>(ptr);
  if (start % page != 0) {
    // Rounding down could leave the allocation: its start must be a page's.
    return InvalidArgument("cuMemGetHandleForAddressRange: device memory at " + std::to_string(start) +
                           " does not start a host page");
  }
  const uintptr_t first = start;
  const uintptr_t end = (start + bytes + page - 1) / page * page;
  DmaBuf d;
  d.offset = start - first;
  d.length = end - first;
  const int rc = reinterpret_cast<GetHandleFn>(fn)(&d.fd, first, d.length, 1, 0);
  if (rc != 0) {
    return Status(Code::kCudaError, "cuMemGetHandleForAddressRange of " + std::to_string(d.length) +
                                        " bytes of device memory failed at " + __FILE__ + ":" +
                                        std::to_string(__LINE__) + ": CUDA driver error " + std::to_string(rc));
  }
  return d;
}

Status FlushGpuDirectWrites(int device) {
  ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device));
  CountCudaCall(CudaCall::kOther);
  RINGO_CUDA_RETURN_IF_ERROR(cudaDeviceFlushGPUDirectRDMAWrites(cudaFlushGPUDirectRDMAWritesTargetCurrentDevice,
                                                                cudaFlushGPUDirectRDMAWritesToOwner));
  return Status();
}

StatusOr<std::unique_ptr<CudaEventSet>> CudaEventSet::Create(int device, int n) {
  ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device));
  std::unique_ptr<CudaEventSet> set(new CudaEventSet());
  set->device_ = device;
  cudaStream_t stream = nullptr;
  CountCudaCall(CudaCall::kOther);
  RINGO_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  set->stream_ = stream;
  for (int i = 0; i < n; ++i) {
    cudaEvent_t ev = nullptr;
    CountCudaCall(CudaCall::kOther);
    RINGO_CUDA_RETURN_IF_ERROR(cudaEventCreate(&ev));  // with timing
    set->events_.push_back(ev);
  }
  return set;
}

CudaEventSet::~CudaEventSet() {
  if (device_ < 0) return;
  auto scope = ScopedDevice::Enter(device_);
  for (void* ev : events_) {
    CountCudaCall(CudaCall::kOther);
    cudaEventDestroy(static_cast<cudaEvent_t>(ev));
  }
  if (stream_ != nullptr) {
    CountCudaCall(CudaCall::kOther);
    cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  }
}

Status CudaEventSet::Record(int i, void* stream) {
  CountCudaCall(CudaCall::kEventRecord);
  RINGO_CUDA_RETURN_IF_ERROR(cudaEventRecord(static_cast<cudaEvent_t>(events_[i]), static_cast<cudaStream_t>(stream)));
  return Status();
}

StatusOr<bool> CudaEventSet::Done(int i) {
  CountCudaCall(CudaCall::kEventQuery);
  const cudaError_t rc = cudaEventQuery(static_cast<cudaEvent_t>(events_[i]));
  if (rc == cudaErrorNotReady) return false;
  RETURN_IF_ERROR(CudaCallStatus(static_cast<int>(rc), "cudaEventQuery", __FILE__, __LINE__));
  return true;
}

StatusOr<float> CudaEventSet::ElapsedMs(int from, int to) {
  float ms = 0;
  CountCudaCall(CudaCall::kEventElapsedTime);
  RINGO_CUDA_RETURN_IF_ERROR(
      cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(events_[from]), static_cast<cudaEvent_t>(events_[to])));
  return ms;
}

Status CudaEventSet::RecordAside(int i) {
  ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
  CountCudaCall(CudaCall::kEventRecord);
  RINGO_CUDA_RETURN_IF_ERROR(cudaEventRecord(static_cast<cudaEvent_t>(events_[i]), static_cast<cudaStream_t>(stream_)));
  return Status();
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

DeviceCopy::DeviceCopy(DeviceCopy&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), device_(std::exchange(other.device_, -1)) {}

DeviceCopy& DeviceCopy::operator=(DeviceCopy&& other) noexcept {
  if (this != &other) {
    Reset();
    ptr_ = std::exchange(other.ptr_, nullptr);
    device_ = std::exchange(other.device_, -1);
  }
  return *this;
}

DeviceCopy::~DeviceCopy() { Reset(); }

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
