// Copies that write with non-temporal (streaming) stores where the CPU has
// them: the destination lines are not read first and do not evict what the
// executor still needs (the FIFO slots). For outputs of large collectives,
// which nobody reads again before the call returns. Weakly ordered: call
// StreamFence() before anything that publishes the data to another thread.
#ifndef RINGO_KERNELS_INTERNAL_STREAM_STORE_H_
#define RINGO_KERNELS_INTERNAL_STREAM_STORE_H_

#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace ringo::kernels::internal {

// Writes 64 bytes at `dst` (any alignment) from `src`.
inline void Store64(void* dst, const void* src, bool stream) {
#if defined(__SSE2__)
  if (stream && (reinterpret_cast<uintptr_t>(dst) & 15) == 0) {
    auto* d = static_cast<__m128i*>(dst);
    auto* s = static_cast<const __m128i*>(src);
    _mm_stream_si128(d + 0, _mm_loadu_si128(s + 0));
    _mm_stream_si128(d + 1, _mm_loadu_si128(s + 1));
    _mm_stream_si128(d + 2, _mm_loadu_si128(s + 2));
    _mm_stream_si128(d + 3, _mm_loadu_si128(s + 3));
    return;
  }
#endif
  std::memcpy(dst, src, 64);
}

// memcpy, streaming whole 64-byte blocks when asked.
inline void CopyOut(void* dst, const void* src, size_t bytes, bool stream) {
  if (!stream || bytes < 256) {
    std::memcpy(dst, src, bytes);
    return;
  }
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<const char*>(src);
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) Store64(d + i, s + i, true);
  std::memcpy(d + i, s + i, bytes - i);
}

inline void StreamFence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace ringo::kernels::internal

#endif  // RINGO_KERNELS_INTERNAL_STREAM_STORE_H_
