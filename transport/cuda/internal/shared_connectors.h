// The allocations of a process's ranks that a ring neighbour in the same
// process also uses (P2pIpcRing: a rank's receive connectors, which its ring
// predecessor writes when both are threads of one process), with a count of
// their users. The last user to let go frees the memory, so neither rank
// waits for the other at destruction (one thread may destroy both, one after
// the other). No CUDA here: the free is a function given at construction.
//
// Thread safety: every method is thread-safe.
#ifndef RINGO_TRANSPORT_CUDA_INTERNAL_SHARED_CONNECTORS_H_
#define RINGO_TRANSPORT_CUDA_INTERNAL_SHARED_CONNECTORS_H_

#include <cstddef>
#include <functional>
#include <map>
#include <mutex>

namespace ringo::transport::internal {

class SharedConnectors {
 public:
  using FreeFn = std::function<void(void* ptr, int device)>;
  explicit SharedConnectors(FreeFn free) : free_(std::move(free)) {}

  // `ptr` (memory of `device`) with one user, its owner.
  void Register(void* ptr, int device);
  // One more user of a registered allocation; false when `ptr` is not one.
  bool Retain(void* ptr);
  // One user fewer; frees the memory (outside the lock) when it was the
  // last. True when this call freed it.
  bool Release(void* ptr);
  size_t size() const;

 private:
  struct Entry {
    int device;
    int users;
  };
  FreeFn free_;
  mutable std::mutex mu_;
  std::map<void*, Entry> entries_;  // GUARDED_BY(mu_)
};

}  // namespace ringo::transport::internal

#endif  // RINGO_TRANSPORT_CUDA_INTERNAL_SHARED_CONNECTORS_H_
