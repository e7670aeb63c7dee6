#include "tools/perf/backend.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

namespace ringo::perf {
namespace {

using base::Status;
using base::StatusOr;

// The default FillInput/CountWrong stage this many bytes at a time: a host
// buffer of the largest message would cost each rank as many page faults as
// its send buffer, at every launch. A multiple of every element size.
constexpr size_t kStagingBytes = size_t{4} << 20;

// Host memory: collectives finish before the call returns (ringo.h), so the
// wall clock around the calls is the collective's time.
class HostBackend final : public Backend {
 public:
  explicit HostBackend(const HostAllocator* allocator) {
    if (allocator != nullptr) allocator_ = *allocator;
  }
  StatusOr<void*> Alloc(size_t bytes) override {
    if (allocator_.alloc) {
      ASSIGN_OR_RETURN(void* ptr, allocator_.alloc(bytes));
      std::memset(ptr, 0, bytes);  // fault the pages in now, not inside a timed loop
      return ptr;
    }
    void* ptr = nullptr;
    // posix_memalign(0) may return NULL; ask for a byte so every buffer is real.
    const int err = posix_memalign(&ptr, 64, bytes > 0 ? bytes : 1);
    if (err != 0) {
      return base::SystemError("posix_memalign(" + std::to_string(bytes) +
                               " bytes) failed: " + std::strerror(err));
    }
    std::memset(ptr, 0, bytes);  // fault the pages in now, not inside a timed loop
    return ptr;
  }
  void Free(void* ptr) override {
    if (allocator_.free) {
      allocator_.free(ptr);
    } else {
      std::free(ptr);
    }
  }
  Status CopyToBackend(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return Status();
  }
  Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return Status();
  }
  Status Fill(void* dst, uint8_t byte, size_t bytes) override {
    std::memset(dst, byte, bytes);
    return Status();
  }
  void* stream() const override { return nullptr; }
  Status Synchronize() override { return Status(); }
  Status StartTimer() override {
    start_ = std::chrono::steady_clock::now();
    return Status();
  }
  StatusOr<double> StopTimer() override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
  HostAllocator allocator_;
};

}  // namespace

Status Backend::BeginCapture() {
  return base::InvalidUsage("-G (CUDA graphs) needs GPU buffers: host-memory collectives run inside the call");
}
StatusOr<void*> Backend::EndCapture() { return BeginCapture(); }
Status Backend::LaunchGraph(void*) { return BeginCapture(); }

Status Backend::FillInput(base::DataType type, const Pattern& pattern, size_t first, size_t count,
                          void* dst) {
  const size_t ts = base::DataTypeSize(type);
  const size_t piece = kStagingBytes / ts;
  staging_.resize(std::min(count, piece) * ts);
  for (size_t i = 0; i < count; i += piece) {
    const size_t n = std::min(piece, count - i);
    perf::FillInput(type, pattern, first + i, n, staging_.data());
    RETURN_IF_ERROR(CopyToBackend(static_cast<char*>(dst) + i * ts, staging_.data(), n * ts));
  }
  return Status();
}

StatusOr<int64_t> Backend::CountWrong(base::DataType type, const Pattern& pattern, size_t first,
                                      size_t count, const void* got) {
  const size_t ts = base::DataTypeSize(type);
  const size_t piece = kStagingBytes / ts;
  staging_.resize(std::min(count, piece) * ts);
  int64_t wrong = 0;
  for (size_t i = 0; i < count; i += piece) {
    const size_t n = std::min(piece, count - i);
    RETURN_IF_ERROR(CopyToHost(staging_.data(), static_cast<const char*>(got) + i * ts, n * ts));
    wrong += perf::CountWrong(type, pattern, first + i, n, staging_.data());
  }
  return wrong;
}

StatusOr<std::unique_ptr<Backend>> MakeBackend(int cuda_device, const HostAllocator* allocator) {
  if (cuda_device >= 0) {
    return base::InvalidUsage("the communicator uses CUDA device " + std::to_string(cuda_device) +
                              ", but this program has only host buffers; pass --host");
  }
  return std::unique_ptr<Backend>(new HostBackend(allocator));
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    if (ptr_ != nullptr) backend_->Free(ptr_);
    backend_ = std::exchange(other.backend_, nullptr);
    ptr_ = std::exchange(other.ptr_, nullptr);
  }
  return *this;
}

Buffer::~Buffer() {
  if (ptr_ != nullptr) backend_->Free(ptr_);
}

StatusOr<Buffer> AllocBuffer(Backend* backend, size_t bytes) {
  ASSIGN_OR_RETURN(void* ptr, backend->Alloc(bytes));
  return Buffer(backend, ptr);
}

}  // namespace ringo::perf
