#include "transport/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/check.h"

namespace ringo::transport {
namespace {

class ShmFifoMemory : public FifoMemory {
 public:
  ShmFifoMemory(void* base, size_t bytes) : base_(base), bytes_(bytes) {}
  ~ShmFifoMemory() override { munmap(base_, bytes_); }
  void* base() override { return base_; }

 private:
  void* base_;
  size_t bytes_;
};

base::StatusOr<void*> Map(int fd, size_t bytes, const std::string& name) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    return base::SystemError("mmap of shared memory " + name + " (" + std::to_string(bytes) +
                             " bytes) failed: " + std::strerror(errno));
  }
  return p;
}

}  // namespace

std::string ShmFifoName(uint64_t tag, int receiver_rank, int channel) {
  char name[96];
  std::snprintf(name, sizeof(name), "/ringo-%016llx-r%d-c%d", static_cast<unsigned long long>(tag),
                receiver_rank, channel);
  return name;
}

base::StatusOr<std::shared_ptr<FifoMemory>> CreateShm(const std::string& name, size_t bytes) {
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return base::SystemError("shm_open(" + name + ") failed: " + std::strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int err = errno;
    close(fd);
    shm_unlink(name.c_str());
    return base::SystemError("sizing shared memory " + name + " failed (is /dev/shm full?): " +
                             std::strerror(err));
  }
  auto p = Map(fd, bytes, name);
  close(fd);
  if (!p.ok()) {
    shm_unlink(name.c_str());
    return p.status();
  }
  return std::shared_ptr<FifoMemory>(std::make_shared<ShmFifoMemory>(*p, bytes));
}

base::StatusOr<std::shared_ptr<FifoMemory>> OpenShm(const std::string& name, size_t bytes) {
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) return base::SystemError("shm_open(" + name + ") of a peer's segment failed: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
    close(fd);
    return base::Internal("peer segment " + name + " has the wrong size");
  }
  auto p = Map(fd, bytes, name);
  close(fd);
  if (!p.ok()) return p.status();
  return std::shared_ptr<FifoMemory>(std::make_shared<ShmFifoMemory>(*p, bytes));
}

base::StatusOr<std::shared_ptr<FifoMemory>> CreateShmFifo(const std::string& name, size_t slot_bytes,
                                                          int receiver_rank) {
  ASSIGN_OR_RETURN(auto memory, CreateShm(name, FifoBytes(slot_bytes)));
  InitFifo(memory->base(), slot_bytes, receiver_rank, SelfProcessId());
  return memory;
}

base::StatusOr<std::shared_ptr<FifoMemory>> OpenShmFifo(const std::string& name, size_t slot_bytes) {
  ASSIGN_OR_RETURN(auto memory, OpenShm(name, FifoBytes(slot_bytes)));
  RETURN_IF_ERROR(CheckFifo(memory->base(), slot_bytes).WithContext(name));
  return memory;
}

void UnlinkShm(const std::string& name) { shm_unlink(name.c_str()); }

}  // namespace ringo::transport
