// GPU FIFOs: the FIFO of transport/fifo/layout.h in device memory, as the
// GPU medium of the connector (transport/connect/) makes, shares and frees
// it, and the one way a host thread writes a word of one (an abort flag,
// the release word).
//
// Release across processes: CUDA leaves undefined what happens when the
// exporter frees memory that an importer still has open. So a FIFO opened
// through CUDA IPC is closed in two steps: the sender writes the header's
// sender_released word, then closes its mapping; the receiver frees its
// allocation only once that word is set, the sender's process is gone, or
// the timeout passes (then the memory is left allocated, with a warning,
// rather than freed under a live mapping). Within one process the sender
// and the receiver share the allocation, and whichever lets go last frees
// it, without waiting.
//
// Everything here depends on the GPU, the driver and the IPC support of
// the machine; without the CUDA toolkit every creation returns an error.
//
// Thread safety: the FifoMemory objects are immutable after creation
// (their destructors must run once no kernel uses them); DeviceWords may
// be used from any thread.
#ifndef RINGO_TRANSPORT_CUDA_GPU_FIFO_H_
#define RINGO_TRANSPORT_CUDA_GPU_FIFO_H_

#include <cstdint>
#include <memory>
#include <string>

#include "base/cuda.h"
#include "base/status.h"
#include "transport/fifo/layout.h"
#include "transport/fifo/fifo.h"

namespace ringo::transport {

// Bytes of the CUDA IPC handle (sizeof(cudaIpcMemHandle_t)).
inline constexpr size_t kCudaIpcHandleBytes = 64;
inline constexpr size_t kCudaBusIdBytes = 32;

// A FIFO this rank receives on: device memory of `device`, formatted
// (FormatFifoHeader's header uploaded, everything else zero) before this
// returns. Blocking.
class OwnedDeviceFifo : public FifoMemory {
 public:
  static base::StatusOr<std::shared_ptr<OwnedDeviceFifo>> Create(int device, const FifoGeometry& geometry,
                                                                 int receiver_rank);
  ~OwnedDeviceFifo() override;
  void* base() override { return memory_; }
  int device() const { return device_; }

  // Its CUDA IPC handle and the PCI bus id of its GPU, for a sender in
  // another process.
  base::Status Export(unsigned char handle[kCudaIpcHandleBytes], char bus_id[kCudaBusIdBytes]) const;
  // A sender in process `pid` opened it through CUDA IPC: the destructor
  // waits for its release (at most `timeout_ms`). Unset, or `pid` 0: no wait.
  void ExpectRelease(int32_t pid, int64_t timeout_ms) {
    release_pid_ = pid;
    release_timeout_ms_ = timeout_ms;
  }
  // The exchange broke after the offer: whether a sender maps it is
  // unknown, and it may never say. The memory is left allocated.
  void Abandon() { abandoned_ = true; }

 private:
  OwnedDeviceFifo(void* memory, int device) : memory_(memory), device_(device) {}
  void* memory_;
  int device_;
  int32_t release_pid_ = 0;
  int64_t release_timeout_ms_ = 0;
  bool abandoned_ = false;
};

// A FIFO another process receives on, opened from its IPC handle on this
// rank's `device`; the destructor writes the release word, then closes.
base::StatusOr<std::shared_ptr<FifoMemory>> OpenIpcDeviceFifo(const unsigned char handle[kCudaIpcHandleBytes],
                                                              int device);

// The device ordinal of the GPU with PCI bus id `bus_id` in this process,
// -1 where it is not visible.
int DeviceOfBusId(const std::string& bus_id);

// OK when device `from` can load and store device `to`'s memory (the same
// device, or a peer-to-peer path); InvalidUsage naming both otherwise.
base::Status CanAccessPeer(int from, int to);
// Lets device `from` load and store device `to`'s memory (no-op when they
// are the same); CanAccessPeer's error where they cannot. Blocking; changes
// no current device.
base::Status EnablePeerAccess(int from, int to);

// Writes 32-bit words of device FIFOs from the host (an end's abort flag):
// cudaMemcpyAsync from pinned memory on a private non-blocking stream of
// `device`, so it never waits behind the user's kernels. Best effort: the
// peers' deadline still stops them where a write fails.
class DeviceWords {
 public:
  static base::StatusOr<std::unique_ptr<DeviceWords>> Create(int device);
  ~DeviceWords();
  void WriteOne(uint32_t* device_word);  // does not wait
  // Waits for the writes made so far.
  void Flush();

 private:
  DeviceWords() = default;
  int device_ = 0;
  void* stream_ = nullptr;
  base::MappedHostMemory one_;
};

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_CUDA_GPU_FIFO_H_
