// Where ringo-perf's buffers live, how it times a batch of collectives and
// how it fills inputs and checks results. Host memory with steady_clock is
// here (MakeBackend); the CUDA backend (cuda_backend.h: cudaMalloc, a stream,
// event timing, verification kernels) plugs in behind the same interface, so
// the benchmark loop never learns which one it drives.
//
// Thread safety: one backend per rank, used by that rank's thread only.
#ifndef RINGO_TOOLS_PERF_BACKEND_H_
#define RINGO_TOOLS_PERF_BACKEND_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/device/dtype.h"
#include "base/status.h"
#include "tools/perf/verify.h"

namespace ringo::perf {

class Backend {
 public:
  virtual ~Backend() = default;

  // Memory the communicator can use, 64-byte aligned and touched once (so
  // page faults stay out of the timings). Owned by the caller: Free it.
  virtual base::StatusOr<void*> Alloc(size_t bytes) = 0;
  virtual void Free(void* ptr) = 0;
  // Copies between host memory and backend memory (either may be the same
  // kind for the host backend); blocking.
  virtual base::Status CopyToBackend(void* dst, const void* host_src, size_t bytes) = 0;
  virtual base::Status CopyToHost(void* host_dst, const void* src, size_t bytes) = 0;
  // Sets `bytes` bytes at dst to `byte`; ordered before later work on the
  // stream and complete when Synchronize or a copy returns.
  virtual base::Status Fill(void* dst, uint8_t byte, size_t bytes) = 0;

  // verify.h's FillInput and CountWrong on backend memory; blocking (the
  // count waits for the work issued before it). The defaults go through a
  // host staging buffer a piece at a time; a device backend computes them
  // where the data is.
  virtual base::Status FillInput(base::DataType type, const Pattern& pattern, size_t first,
                                 size_t count, void* dst);
  virtual base::StatusOr<int64_t> CountWrong(base::DataType type, const Pattern& pattern,
                                             size_t first, size_t count, const void* got);

  // For the header's device lines: a GPU's "[bus id] name"
  // ("[0000:07:00.0] NVIDIA H100 80GB HBM3"); "" for host memory.
  virtual std::string DeviceDescription() const { return ""; }

  // The stream every collective is issued on, as the library's stream type
  // (cudaStream_t); NULL for host memory.
  virtual void* stream() const = 0;
  // Blocks until every collective issued so far has completed.
  virtual base::Status Synchronize() = 0;

  // Timing of what is issued between StartTimer and StopTimer, which returns
  // the elapsed seconds once that work has completed.
  virtual base::Status StartTimer() = 0;
  virtual base::StatusOr<double> StopTimer() = 0;

  // CUDA graphs (-G): BeginCapture starts capturing the stream (thread-local
  // mode, so ranks that are threads capture at once); what is issued until
  // EndCapture goes into a graph, which EndCapture instantiates and returns;
  // LaunchGraph enqueues one replay of it on the stream; DestroyGraph frees
  // it. The host backend refuses them (its collectives run in the call).
  virtual base::Status BeginCapture();
  virtual base::StatusOr<void*> EndCapture();
  virtual base::Status LaunchGraph(void* graph);
  virtual void DestroyGraph(void* graph) {}

 private:
  std::vector<char> staging_;  // the default FillInput/CountWrong's host buffer
};

// Where host buffers come from when not from posix_memalign (-R 1).
struct HostAllocator {
  std::function<base::StatusOr<void*>(size_t)> alloc;
  std::function<void(void*)> free;
};

// The backend for a communicator on CUDA device `cuda_device` (-1: host);
// host buffers from `allocator` where it is not null. Host memory only: a
// device >= 0 is InvalidUsage (ringo-perf links cuda_backend.h instead; the
// peers of bench/peers are host-only).
base::StatusOr<std::unique_ptr<Backend>> MakeBackend(int cuda_device,
                                                     const HostAllocator* allocator = nullptr);

// How a benchmark program makes its Backend (MakeBackend's signature).
using BackendFactory =
    std::function<base::StatusOr<std::unique_ptr<Backend>>(int cuda_device, const HostAllocator*)>;

// A backend buffer freed on destruction.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend* backend, void* ptr) : backend_(backend), ptr_(ptr) {}
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  char* data() const { return static_cast<char*>(ptr_); }

 private:
  Backend* backend_ = nullptr;
  void* ptr_ = nullptr;
};

base::StatusOr<Buffer> AllocBuffer(Backend* backend, size_t bytes);

}  // namespace ringo::perf

#endif  // RINGO_TOOLS_PERF_BACKEND_H_
