#include "transport/cuda/internal/shared_connectors.h"

namespace ringo::transport::internal {

void SharedConnectors::Register(void* ptr, int device) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_[ptr] = Entry{device, 1};
}

bool SharedConnectors::Retain(void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(ptr);
  if (it == entries_.end()) return false;
  ++it->second.users;
  return true;
}

bool SharedConnectors::Release(void* ptr) {
  int device = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(ptr);
    if (it == entries_.end() || --it->second.users > 0) return false;
    device = it->second.device;
    entries_.erase(it);
  }
  free_(ptr, device);
  return true;
}

size_t SharedConnectors::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace ringo::transport::internal
