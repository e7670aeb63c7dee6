// Shared regions: host memory that the other processes of this host can
// map, so that a collective can read and write every rank's buffer directly
// instead of passing the data through FIFOs (ringoMemAlloc).
//
// A region is a memfd mapped MAP_SHARED into the allocating process. It is
// named to the others by (pid, fd, id): a peer opens /proc/<pid>/fd/<fd>
// (allowed to processes of the same user that may ptrace-read the owner,
// which Yama's ptrace_scope does not restrict) and maps it. `id` is unique
// within the owner's lifetime, so a peer never mistakes a new region for a
// freed one that reused the descriptor number.
//
// Thread safety: SharedAlloc, SharedFree and FindSharedRegion may be called
// from any thread. A PeerRegions cache belongs to one communicator and is
// used by its one running collective at a time.
#ifndef RINGO_TRANSPORT_SHM_SHARED_REGION_H_
#define RINGO_TRANSPORT_SHM_SHARED_REGION_H_

#include <cstddef>
#include <cstdint>
#include <list>

#include "base/status.h"

namespace ringo::transport {

// How a region is named to the other processes.
struct RegionName {
  int32_t pid = 0;
  int32_t fd = -1;  // -1: not in a shared region
  uint64_t id = 0;
  uint64_t bytes = 0;  // the region's whole length
};

// Allocates `bytes` (> 0) of zeroed shared host memory, page-aligned.
base::StatusOr<void*> SharedAlloc(size_t bytes);
// Frees what SharedAlloc returned; InvalidArgument for any other pointer.
base::Status SharedFree(void* ptr);

// If [ptr, ptr+bytes) lies inside one region of this process, writes its
// name and the offset of `ptr` in it and returns true.
bool FindSharedRegion(const void* ptr, size_t bytes, RegionName* name, uint64_t* offset);

// The regions of other processes mapped into this one, most recently used
// first. Mappings stay until evicted (beyond `capacity`) or destruction; a
// mapping keeps the region's pages alive after its owner frees it.
class PeerRegions {
 public:
  explicit PeerRegions(size_t capacity = 64) : capacity_(capacity) {}
  ~PeerRegions();
  PeerRegions(const PeerRegions&) = delete;
  PeerRegions& operator=(const PeerRegions&) = delete;

  // This process's address of the region's first byte: the owner's own
  // address when the owner is this process, else a mapping (made on first
  // use, populated). Fails with the system's reason when the region cannot
  // be opened or mapped. The address stays valid while fewer than
  // `capacity` other regions are mapped after it (Reserve for more).
  base::StatusOr<char*> Map(const RegionName& name);

  size_t mapped() const { return entries_.size(); }
  // Keeps at least `n` regions mapped from now on.
  void Reserve(size_t n) { capacity_ = n > capacity_ ? n : capacity_; }

 private:
  struct Entry {
    RegionName name;
    char* base;
  };
  size_t capacity_;
  std::list<Entry> entries_;
};

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_SHM_SHARED_REGION_H_
