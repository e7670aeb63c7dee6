// Helpers the FIFO tests share (this folder's, and shm/'s across
// processes): wait contexts, and messages of every size class whose bytes
// say which message they are.
#ifndef RINGO_TRANSPORT_FIFO_FIFO_TESTING_H_
#define RINGO_TRANSPORT_FIFO_FIFO_TESTING_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "transport/fifo/counter.h"

namespace ringo::transport::testing {

inline int64_t MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t).count();
}

inline WaitContext Ctx(int self_rank, int64_t timeout_ms, int spin_count, const std::atomic<bool>* abort = nullptr,
                       int yield_count = 0) {
  WaitContext c;
  c.local_abort = abort;
  c.timeout_ms = timeout_ms;
  c.spin_count = spin_count;
  c.yield_count = yield_count;
  c.self_rank = self_rank;
  c.channel = 0;
  return c;
}

// The size and contents of message i: sizes cover 0, 1, odd values and full slots.
inline size_t MessageBytes(uint64_t i, size_t slot_bytes) {
  switch (i % 7) {
    case 0: return 0;
    case 1: return 1;
    case 2: return slot_bytes;
    case 3: return slot_bytes - 1;
    default: return static_cast<size_t>((i * 2654435761u) % (slot_bytes + 1));
  }
}
inline uint8_t MessageByte(uint64_t i, size_t k) { return static_cast<uint8_t>((i * 131 + k * 7 + (k >> 8)) ^ (i >> 3)); }

inline uint64_t Checksum(const void* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t k = 0; k < n; ++k) h = (h ^ static_cast<const uint8_t*>(p)[k]) * 1099511628211ull;
  return h;
}

inline void Fill(void* slot, uint64_t i, size_t bytes) {
  auto* b = static_cast<uint8_t*>(slot);
  for (size_t k = 0; k < bytes; ++k) b[k] = MessageByte(i, k);
}

// Checks message i in a received slot; "" if intact.
inline std::string Verify(const void* slot, uint64_t i, size_t bytes, size_t slot_bytes) {
  if (bytes != MessageBytes(i, slot_bytes)) {
    return "message " + std::to_string(i) + " has " + std::to_string(bytes) + " bytes, expected " +
           std::to_string(MessageBytes(i, slot_bytes));
  }
  std::vector<uint8_t> want(bytes);
  Fill(want.data(), i, bytes);
  if (Checksum(slot, bytes) != Checksum(want.data(), bytes) || std::memcmp(slot, want.data(), bytes) != 0) {
    return "message " + std::to_string(i) + " is corrupted";
  }
  return "";
}


}  // namespace ringo::transport::testing

#endif  // RINGO_TRANSPORT_FIFO_FIFO_TESTING_H_
