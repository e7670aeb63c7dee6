// A collective's signature, as the ranks that exchange data compare it:
// its sequence number on the communicator, the element count, and a packed
// shape (collective, datatype, op) and root. The transport carries it opaque
// beside the data it belongs to (FIFO slots, board posts); kernels/ makes and
// describes it. Plain data: it lives in shared memory.
#ifndef RINGO_TRANSPORT_SIGNATURE_H_
#define RINGO_TRANSPORT_SIGNATURE_H_

#include <cstdint>

namespace ringo::transport {

struct CallSignature {
  uint64_t seq = 0;    // 0: none (a signature that is not checked)
  int64_t count = 0;
  uint32_t shape = 0;  // set by the maker: which collective, datatype and op
  int32_t root = 0;

  bool operator==(const CallSignature& o) const {
    return seq == o.seq && count == o.count && shape == o.shape && root == o.root;
  }
  bool operator!=(const CallSignature& o) const { return !(*this == o); }
};
static_assert(sizeof(CallSignature) == 24, "fixed layout in shared memory");

// A 32-bit digest of everything but the sequence number (which the board's
// LL words carry already): a few multiplications, computed on every
// one-shot call.
inline uint32_t SignatureDigest(const CallSignature& s) {
  uint64_t h = static_cast<uint64_t>(s.count) * 0x9e3779b97f4a7c15ull;
  h ^= (static_cast<uint64_t>(s.shape) << 32 | static_cast<uint32_t>(s.root)) * 0xc2b2ae3d27d4eb4full;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  return static_cast<uint32_t>(h ^ (h >> 32));
}

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_SIGNATURE_H_
