#include "transport/shm/shared_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <string>

namespace ringo::transport {
namespace {

struct OwnRegion {
  int fd;
  uint64_t id;
  size_t bytes;
};

// This process's regions by base address.
struct Registry {
  std::mutex mu;
  std::map<uintptr_t, OwnRegion> regions;  // GUARDED_BY(mu)
  uint64_t next_id = 1;                     // GUARDED_BY(mu)
};

Registry& GetRegistry() {
  static Registry* registry = new Registry();  // never destroyed: used until exit
  return *registry;
}

std::string Errno(const std::string& what) { return what + " failed: " + std::strerror(errno); }

}  // namespace

base::StatusOr<void*> SharedAlloc(size_t bytes) {
  if (bytes == 0) return base::InvalidArgument("a shared allocation of 0 bytes");
  const int fd = memfd_create("ringo-mem", MFD_CLOEXEC);
  if (fd < 0) return base::SystemError(Errno("memfd_create"));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    base::Status st = base::SystemError(Errno("ftruncate(" + std::to_string(bytes) + " bytes)"));
    close(fd);
    return st;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    base::Status st = base::SystemError(Errno("mmap(" + std::to_string(bytes) + " bytes)"));
    close(fd);
    return st;
  }
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.regions[reinterpret_cast<uintptr_t>(p)] = OwnRegion{fd, r.next_id++, bytes};
  return p;
}

base::Status SharedFree(void* ptr) {
  Registry& r = GetRegistry();
  OwnRegion region{};
  {
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.regions.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == r.regions.end()) {
      return base::InvalidArgument("the pointer was not returned by ringoMemAlloc, or was freed already");
    }
    region = it->second;
    r.regions.erase(it);
  }
  munmap(ptr, region.bytes);
  close(region.fd);
  return base::OkStatus();
}

bool FindSharedRegion(const void* ptr, size_t bytes, RegionName* name, uint64_t* offset) {
  Registry& r = GetRegistry();
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.regions.upper_bound(p);
  if (it == r.regions.begin()) return false;
  it = std::prev(it);
  const uintptr_t base = it->first;
  const OwnRegion& region = it->second;
  if (p - base > region.bytes || bytes > region.bytes - (p - base)) return false;
  name->pid = static_cast<int32_t>(getpid());
  name->fd = region.fd;
  name->id = region.id;
  name->bytes = region.bytes;
  *offset = p - base;
  return true;
}

PeerRegions::~PeerRegions() {
  const int32_t self = static_cast<int32_t>(getpid());
  for (const Entry& e : entries_) {
    if (e.name.pid != self) munmap(e.base, e.name.bytes);
  }
}

base::StatusOr<char*> PeerRegions::Map(const RegionName& name) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->name.pid == name.pid && it->name.id == name.id) {
      if (it->name.bytes != name.bytes) {
        return base::InvalidUsage("a peer named its ringoMemAlloc region " + std::to_string(name.id) + " with " +
                                  std::to_string(name.bytes) + " bytes; it has " + std::to_string(it->name.bytes));
      }
      entries_.splice(entries_.begin(), entries_, it);
      return it->base;
    }
  }
  char* base = nullptr;
  if (name.pid == static_cast<int32_t>(getpid())) {
    Registry& r = GetRegistry();
    std::lock_guard<std::mutex> lock(r.mu);
    for (const auto& [addr, region] : r.regions) {
      if (region.id == name.id && region.bytes == name.bytes) base = reinterpret_cast<char*>(addr);
    }
    if (base == nullptr) return base::InvalidUsage("shared region " + std::to_string(name.id) + " was freed");
  } else {
    const std::string path = "/proc/" + std::to_string(name.pid) + "/fd/" + std::to_string(name.fd);
    const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return base::SystemError(Errno("opening a peer's ringoMemAlloc region (" + path + ")"));
    // The descriptor number may have been reused by the owner for another
    // file since it named the region: the size is a sanity check.
    off_t size = lseek(fd, 0, SEEK_END);
    if (size < 0 || static_cast<uint64_t>(size) != name.bytes) {
      close(fd);
      return base::InvalidUsage("a peer's ringoMemAlloc region (" + path + ") is no longer the region it named");
    }
    void* p = mmap(nullptr, name.bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return base::SystemError(Errno("mapping a peer's ringoMemAlloc region (" + path + ")"));
    base = static_cast<char*>(p);
  }
  entries_.push_front(Entry{name, base});
  while (entries_.size() > capacity_) {
    const Entry& last = entries_.back();
    if (last.name.pid != static_cast<int32_t>(getpid())) munmap(last.base, last.name.bytes);
    entries_.pop_back();
  }
  return base;
}

}  // namespace ringo::transport
