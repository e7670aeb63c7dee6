#include "transport/cuda/gpu_fifo.h"

#include <signal.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/logging.h"

#if RINGO_P2P_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ringo::transport {

using base::Status;
using base::StatusOr;

#if RINGO_P2P_CUDA

namespace {

static_assert(sizeof(cudaIpcMemHandle_t) == kCudaIpcHandleBytes, "IPC handle size");

// Reads or writes one 32-bit word of device memory from the host on a
// private stream, synchronously.
Status CopyWord(void* dst, const void* src) {
  cudaStream_t s = nullptr;
  RINGO_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaError_t err = cudaMemcpyAsync(dst, src, sizeof(uint32_t), cudaMemcpyDefault, s);
  if (err == cudaSuccess) err = cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  RINGO_CUDA_RETURN_IF_ERROR(err);
  return Status();
}

bool ProcessGone(int32_t pid) { return pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH; }

// A FIFO of another process opened through CUDA IPC.
class OpenedIpcFifo : public FifoMemory {
 public:
  OpenedIpcFifo(void* memory, int device) : memory_(memory), device_(device) {}
  ~OpenedIpcFifo() override {
    auto scope = base::ScopedDevice::Enter(device_);
    const uint32_t one = 1;
    // The receiver frees its memory once it reads this (gpu_fifo.h).
    (void)CopyWord(&static_cast<FifoHeader*>(memory_)->sender_released, &one);
    (void)cudaIpcCloseMemHandle(memory_);
    cudaGetLastError();
  }
  void* base() override { return memory_; }

 private:
  void* memory_;
  int device_;
};

}  // namespace

StatusOr<std::shared_ptr<OwnedDeviceFifo>> OwnedDeviceFifo::Create(int device, const FifoGeometry& geometry,
                                                                   int receiver_rank) {
  ASSIGN_OR_RETURN(base::ScopedDevice scope, base::ScopedDevice::Enter(device));
  void* memory = nullptr;
  RINGO_CUDA_RETURN_IF_ERROR(cudaMalloc(&memory, geometry.Bytes()));
  std::shared_ptr<OwnedDeviceFifo> fifo(new OwnedDeviceFifo(memory, device));
  // The header as a host FIFO's, written into zeroed memory before any
  // peer can open it (the offer follows).
  FifoHeader header;
  FormatFifoHeader(&header, geometry, receiver_rank, ProcessId{});
  cudaStream_t s = nullptr;
  RINGO_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaError_t err = cudaMemsetAsync(memory, 0, geometry.Bytes(), s);
  if (err == cudaSuccess) err = cudaMemcpyAsync(memory, &header, sizeof(header), cudaMemcpyHostToDevice, s);
  if (err == cudaSuccess) err = cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  RINGO_CUDA_RETURN_IF_ERROR(err);
  return fifo;
}

OwnedDeviceFifo::~OwnedDeviceFifo() {
  auto scope = base::ScopedDevice::Enter(device_);
  if (abandoned_) {
    RINGO_LOG(WARN) << "leaving a GPU FIFO allocated: the connection broke after it was offered, and its "
                    << "sender may map it";
    return;
  }
  if (release_pid_ > 0) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(release_timeout_ms_);
    bool released = false;
    while (!released) {
      uint32_t seen = 0;
      if (!CopyWord(&seen, &static_cast<FifoHeader*>(memory_)->sender_released).ok()) break;  // the device is gone
      // A sender process that is gone has lost its mappings with its context.
      released = seen != 0 || ProcessGone(release_pid_);
      if (released || std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!released) {
      RINGO_LOG(WARN) << "the sender (pid " << release_pid_ << ") of a GPU FIFO did not release it within "
                      << release_timeout_ms_ << " ms; leaving it allocated (freeing memory another process "
                      << "maps is undefined)";
      return;
    }
  }
  (void)cudaFree(memory_);  // waits for the device's outstanding work
  cudaGetLastError();
}

Status OwnedDeviceFifo::Export(unsigned char handle[kCudaIpcHandleBytes], char bus_id[kCudaBusIdBytes]) const {
  ASSIGN_OR_RETURN(base::ScopedDevice scope, base::ScopedDevice::Enter(device_));
  cudaIpcMemHandle_t h;
  RINGO_CUDA_RETURN_IF_ERROR(cudaIpcGetMemHandle(&h, memory_));
  std::memcpy(handle, &h, sizeof(h));
  return base::PciBusId(device_, bus_id, static_cast<int>(kCudaBusIdBytes));
}

StatusOr<std::shared_ptr<FifoMemory>> OpenIpcDeviceFifo(const unsigned char handle[kCudaIpcHandleBytes], int device) {
  ASSIGN_OR_RETURN(base::ScopedDevice scope, base::ScopedDevice::Enter(device));
  cudaIpcMemHandle_t h;
  std::memcpy(&h, handle, sizeof(h));
  void* mapped = nullptr;
  const cudaError_t err = cudaIpcOpenMemHandle(&mapped, h, cudaIpcMemLazyEnablePeerAccess);
  if (err != cudaSuccess) return base::CudaCallStatus(err, "cudaIpcOpenMemHandle", __FILE__, __LINE__);
  return std::shared_ptr<FifoMemory>(std::make_shared<OpenedIpcFifo>(mapped, device));
}

int DeviceOfBusId(const std::string& bus_id) {
  int device = -1;
  if (cudaDeviceGetByPCIBusId(&device, bus_id.c_str()) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return device;
}

Status CanAccessPeer(int from, int to) {
  if (from == to) return Status();
  int can = 0;
  RINGO_CUDA_RETURN_IF_ERROR(cudaDeviceCanAccessPeer(&can, from, to));
  if (can == 0) {
    return base::InvalidUsage("GPU " + std::to_string(from) + " cannot access GPU " + std::to_string(to) +
                              "'s memory (no peer-to-peer path); use host memory (RINGO_DEVICE=host) between them");
  }
  return Status();
}

Status EnablePeerAccess(int from, int to) {
  if (from == to) return Status();
  RETURN_IF_ERROR(CanAccessPeer(from, to));
  ASSIGN_OR_RETURN(base::ScopedDevice scope, base::ScopedDevice::Enter(from));
  const cudaError_t err = cudaDeviceEnablePeerAccess(to, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError();
    return Status();
  }
  RINGO_CUDA_RETURN_IF_ERROR(err);
  return Status();
}

StatusOr<std::unique_ptr<DeviceWords>> DeviceWords::Create(int device) {
  std::unique_ptr<DeviceWords> w(new DeviceWords());
  w->device_ = device;
  ASSIGN_OR_RETURN(base::ScopedDevice scope, base::ScopedDevice::Enter(device));
  ASSIGN_OR_RETURN(w->one_, base::MappedHostMemory::Allocate(sizeof(uint32_t)));
  *static_cast<volatile uint32_t*>(w->one_.host()) = 1;
  cudaStream_t s = nullptr;
  RINGO_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  w->stream_ = s;
  return w;
}

DeviceWords::~DeviceWords() {
  if (stream_ == nullptr) return;
  auto scope = base::ScopedDevice::Enter(device_);
  (void)cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
  (void)cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  cudaGetLastError();
}

void DeviceWords::WriteOne(uint32_t* device_word) {
  auto scope = base::ScopedDevice::Enter(device_);
  (void)cudaMemcpyAsync(device_word, one_.host(), sizeof(uint32_t), cudaMemcpyDefault,
                        static_cast<cudaStream_t>(stream_));
  cudaGetLastError();
}

void DeviceWords::Flush() {
  auto scope = base::ScopedDevice::Enter(device_);
  (void)cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
  cudaGetLastError();
}

#else  // !RINGO_P2P_CUDA

namespace {
Status NoCuda() { return base::InvalidUsage("GPU FIFOs: Ringo was built without the CUDA toolkit"); }
}  // namespace

StatusOr<std::shared_ptr<OwnedDeviceFifo>> OwnedDeviceFifo::Create(int, const FifoGeometry&, int) { return NoCuda(); }
OwnedDeviceFifo::~OwnedDeviceFifo() = default;
Status OwnedDeviceFifo::Export(unsigned char*, char*) const { return NoCuda(); }
StatusOr<std::shared_ptr<FifoMemory>> OpenIpcDeviceFifo(const unsigned char*, int) { return NoCuda(); }
int DeviceOfBusId(const std::string&) { return -1; }
Status CanAccessPeer(int, int) { return NoCuda(); }
Status EnablePeerAccess(int, int) { return NoCuda(); }
StatusOr<std::unique_ptr<DeviceWords>> DeviceWords::Create(int) { return NoCuda(); }
DeviceWords::~DeviceWords() = default;
void DeviceWords::WriteOne(uint32_t*) {}
void DeviceWords::Flush() {}

#endif  // RINGO_P2P_CUDA

}  // namespace ringo::transport
