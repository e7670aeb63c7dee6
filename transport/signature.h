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
// LL words carry already).
inline uint32_t SignatureDigest(const CallSignature& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h = (h ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
    }
  };
  mix(static_cast<uint64_t>(s.count));
  mix(s.shape);
  mix(static_cast<uint32_t>(s.root));
  return static_cast<uint32_t>(h ^ (h >> 32));
}

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_SIGNATURE_H_
