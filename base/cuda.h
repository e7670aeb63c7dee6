// What the CUDA runtime (linked statically) says about this machine, asked
// once, and the small wrappers every cudart call of Ringo goes through. A
// missing driver or device is not an error: Ringo then uses host memory, and
// says so in the log. Without the CUDA toolkit at build time every function
// below compiles and reports that (no device, or an error Status saying so).
//
// Thread safety: ProbeCuda and the free functions are thread-safe; the RAII
// classes are owned and used by one thread at a time.
#ifndef RINGO_BASE_CUDA_H_
#define RINGO_BASE_CUDA_H_

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace ringo::base {

struct CudaProbe {
  int device_count = 0;  // 0 when there is no usable GPU
  std::string reason;    // why there is none (driver missing, no device, ...)
  // Hardware work queues of this process's device contexts
  // (CUDA_DEVICE_MAX_CONNECTIONS when the driver creates them): streams beyond
  // it share queues, and kernels in one queue wait for each other. The probe
  // sets the variable to 32 when it is unset, before its first CUDA call; a
  // context already active then keeps what the variable held before (CUDA's
  // default 8 when unset).
  int work_queues = 8;
  bool context_before_probe = false;  // some device's primary context was already active
};

// Thread-safe; the answer is computed once per process. The first call sets
// CUDA_DEVICE_MAX_CONNECTIONS (see CudaProbe::work_queues) and initialises
// the CUDA driver, but creates no context.
const CudaProbe& ProbeCuda();

// Whether this build links the CUDA runtime at all.
bool CudaRuntimeBuilt();

// Whether `ptr` is device (or managed) memory; false when CUDA is unusable.
bool IsDevicePointer(const void* ptr);

// The device ordinal that owns `ptr` when it is device (or managed) memory;
// -1 for host memory, unknown pointers, or when CUDA is unusable.
int PointerDevice(const void* ptr);

// The calling thread's current CUDA device.
StatusOr<int> CurrentDevice();

// Device `device`'s PCI bus id ("0000:07:00.0"), NUL-terminated, into out[0..size).
Status PciBusId(int device, char* out, int size);

// What a stream (a cudaStream_t) is: the legacy default stream (NULL or
// cudaStreamLegacy), and whether it was made with cudaStreamNonBlocking
// (false for the legacy and the per-thread default streams).
struct StreamFacts {
  bool legacy = false;
  bool non_blocking = false;
};
StatusOr<StreamFacts> GetStreamFacts(void* stream);
// The stream's id (cudaStreamGetId): unique in the process, never given to
// another stream, also where a destroyed stream's handle is reused.
StatusOr<unsigned long long> StreamId(void* stream);
// Whether work enqueued on `stream` now is being captured into a CUDA graph
// (it runs when the graph is launched); false without CUDA or on error.
bool StreamCapturing(void* stream);
// The same with the capture sequence's id (unique in the process): `active`
// false and id 0 when the stream is not capturing; an error when its capture
// was invalidated (an earlier call in it failed) or the stream is not valid.
struct StreamCapture {
  bool active = false;
  unsigned long long id = 0;
};
StatusOr<StreamCapture> GetStreamCapture(void* stream);

// cudaMalloc on the calling thread's current device (libnccl.so.2's
// ncclMemAlloc), and cudaFree of what it returned. Blocking.
StatusOr<void*> DeviceMalloc(size_t bytes);
Status DeviceFree(void* ptr);

// Copies `bytes` from `src` (host or device memory) into host memory at
// `dst`; blocking (the copy is complete on return). Host memory needs no
// CUDA at all.
Status CopyToHost(void* dst, const void* src, size_t bytes);

// OK for error 0 (cudaSuccess); otherwise kCudaError naming the call, where
// it was made and CUDA's name and text for the error. Clears the runtime's
// last-error slot. `error` is a cudaError_t.
Status CudaCallStatus(int error, const char* call, const char* file, int line);

// Wraps one cudart call: returns from the enclosing function on failure.
#define RINGO_CUDA_RETURN_IF_ERROR(call) \
  RETURN_IF_ERROR(::ringo::base::CudaCallStatus(static_cast<int>(call), #call, __FILE__, __LINE__))

// Makes `device` the calling thread's current device for the scope and puts
// the previous one back on destruction (blocking: no; the current device is
// per thread).
class ScopedDevice {
 public:
  static StatusOr<ScopedDevice> Enter(int device);
  ScopedDevice() = default;  // restores nothing
  ScopedDevice(ScopedDevice&& other) noexcept;
  ScopedDevice& operator=(ScopedDevice&&) = delete;
  ~ScopedDevice();

 private:
  int previous_ = -1;  // -1: nothing to restore
};

// `bytes` of zeroed pinned host memory mapped into every device's address
// space (cudaHostAlloc, mapped and portable). Owns the memory; freed on
// destruction (cudaFreeHost, which waits for nothing: free it only once no
// kernel uses it).
class MappedHostMemory {
 public:
  static StatusOr<MappedHostMemory> Allocate(size_t bytes);
  MappedHostMemory() = default;
  MappedHostMemory(MappedHostMemory&& other) noexcept;
  MappedHostMemory& operator=(MappedHostMemory&& other) noexcept;
  ~MappedHostMemory();

  void* host() const { return host_; }
  void* device() const { return device_; }  // the same memory as the kernels address it

 private:
  void Reset();
  void* host_ = nullptr;
  void* device_ = nullptr;
};

// Device memory on one device holding a copy of some host data, uploaded
// once (a kernel's constant table). Owns the memory; freed on destruction
// (cudaFree, which waits for the device's outstanding work).
class DeviceCopy {
 public:
  // Allocates `bytes` on `device` and copies host[0..bytes) there; the copy
  // is complete on return (a private non-blocking stream, synchronised, so
  // no other work of the device is waited for). Blocking.
  static StatusOr<DeviceCopy> Of(int device, const void* host, size_t bytes);
  DeviceCopy() = default;
  DeviceCopy(DeviceCopy&& other) noexcept;
  DeviceCopy& operator=(DeviceCopy&& other) noexcept;
  ~DeviceCopy();

  void* get() const { return ptr_; }

 private:
  void Reset();
  void* ptr_ = nullptr;
  int device_ = -1;
};

// A timing-free CUDA event on one device: Record() marks the work enqueued so
// far on a stream; Synchronize() blocks the calling thread until it is done.
class CudaEvent {
 public:
  static StatusOr<CudaEvent> Create(int device);
  CudaEvent() = default;
  CudaEvent(CudaEvent&& other) noexcept;
  CudaEvent& operator=(CudaEvent&& other) noexcept;
  ~CudaEvent();

  // `stream` is a cudaStream_t (null: the legacy default stream) of the
  // event's device, which the caller has made current.
  Status Record(void* stream);
  // On a capturing stream: adds a node to the graph that records the event
  // each time a replay reaches it (cudaEventRecordExternal). Until a replay
  // has, MakeStreamWait and Synchronize find nothing to wait for.
  Status RecordInGraph(void* stream);
  // Makes `stream`'s later work wait for the work Record() marked (nothing
  // when nothing was recorded). Does not block the calling thread.
  Status MakeStreamWait(void* stream);
  // Blocks until the recorded work completes; OK when nothing was recorded.
  Status Synchronize();

 private:
  void Reset();
  void* event_ = nullptr;  // cudaEvent_t
  int device_ = -1;
  bool recorded_ = false;
};

// What a device says of GPUDirect RDMA: its support (cudaDevAttrGPUDirect-
// RDMASupported), whether its memory can be exported as a dma-buf, and how
// the NIC's writes become visible to its kernels.
struct GpuDirectAttrs {
  bool rdma = false;
  bool dmabuf = false;
  // The NIC's writes into its memory are seen by its own kernels without a
  // flush (cudaDevAttrGPUDirectRDMAWritesOrdering at least "owner"), or,
  // where not, cudaDeviceFlushGPUDirectRDMAWrites makes them seen.
  bool writes_ordered = false;
  bool flush = false;
};
StatusOr<GpuDirectAttrs> DeviceGpuDirect(int device);

// Device memory exported for a NIC (GPUDirect RDMA through dma-buf): a file
// descriptor of the pages holding [ptr, ptr + bytes) and where ptr lies in
// them (cuMemGetHandleForAddressRange, reached through the runtime's driver
// entry points so that nothing links libcuda). The caller owns `fd` (close it
// once the NIC registered it). `ptr` must start a host page (an error
// otherwise) and its allocation cover the range rounded up to one (DeviceMalloc
// of a multiple of 2 MiB returns 2 MiB-aligned memory that does).
struct DmaBuf {
  int fd = -1;
  size_t offset = 0;  // of ptr within the exported range
  size_t length = 0;  // of the exported range
};
StatusOr<DmaBuf> ExportDmaBuf(const void* ptr, size_t bytes);

// Makes the NIC's writes into `device`'s memory that completed before this
// call visible to the kernels that run after it reads a flag
// (cudaDeviceFlushGPUDirectRDMAWrites, to the owner): what a proxy calls
// between a receive into device memory and publishing it, on devices whose
// writes are not ordered (GpuDirectAttrs). Blocking; sets and restores the
// calling thread's current device.
Status FlushGpuDirectWrites(int device);

// `n` timing CUDA events on one device, numbered 0..n-1 (the flight
// recorder's: when GPU work started and finished on its stream).
class CudaEventSet {
 public:
  static StatusOr<std::unique_ptr<CudaEventSet>> Create(int device, int n);
  ~CudaEventSet();
  CudaEventSet(const CudaEventSet&) = delete;
  CudaEventSet& operator=(const CudaEventSet&) = delete;

  int size() const { return static_cast<int>(events_.size()); }
  // Records event `i` on `stream` (a cudaStream_t).
  Status Record(int i, void* stream);
  // Whether the work before event `i` has completed (cudaEventQuery).
  StatusOr<bool> Done(int i);
  // Milliseconds from event `from` to event `to` (both completed).
  StatusOr<float> ElapsedMs(int from, int to);
  // Records event `i` on a stream of its own, where nothing runs before
  // it; does not wait (Done(i) says when it completed).
  Status RecordAside(int i);

 private:
  CudaEventSet() = default;
  int device_ = -1;
  std::vector<void*> events_;  // cudaEvent_t
  void* stream_ = nullptr;     // RecordAside's cudaStream_t
};

}  // namespace ringo::base

#endif  // RINGO_BASE_CUDA_H_
