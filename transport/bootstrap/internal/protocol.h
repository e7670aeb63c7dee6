// The bootstrap's wire format, shared by the root and the ranks.
#ifndef RINGO_TRANSPORT_BOOTSTRAP_INTERNAL_PROTOCOL_H_
#define RINGO_TRANSPORT_BOOTSTRAP_INTERNAL_PROTOCOL_H_

#include <cstdint>

#include "base/status.h"
#include "transport/socket.h"

namespace ringo::transport::internal {

inline constexpr uint32_t kWireMagic = 0x42474e52;  // "RNGB"
inline constexpr uint16_t kWireVersion = 1;
inline constexpr uint64_t kMaxGatherBytes = 1 << 20;  // per rank per round
inline constexpr uint64_t kMaxErrorBytes = 4096;

enum class MsgType : uint16_t { kHello = 1, kGather = 2, kGatherResult = 3, kError = 4 };

struct WireHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t type;
  int32_t rank;
  int32_t nranks;
  uint64_t nonce;
  uint64_t length;  // payload bytes that follow
};
static_assert(sizeof(WireHeader) == 32, "fixed wire header");

inline WireHeader MakeHeader(MsgType type, uint64_t nonce, int rank, int nranks, uint64_t length) {
  return WireHeader{kWireMagic, kWireVersion, static_cast<uint16_t>(type), rank, nranks, nonce, length};
}

// Checks magic, version, type and length bounds; says what is wrong.
base::Status ValidateHeader(const WireHeader& h);

// Starts the root's serving thread on a listening socket. `nonce` is the id's.
void StartRootThread(Socket listener, uint64_t nonce, int64_t timeout_ms);

// Returns once no root of this process serving `nonce` is still telling its
// ranks why it failed (at once where none runs here), or at `deadline`. A
// rank of the root's own process hears the verdict first; were it to return
// and its program exit, the root would die with it before the other ranks
// heard which rank was missing.
void AwaitRootVerdict(uint64_t nonce, Deadline deadline);

}  // namespace ringo::transport::internal

#endif  // RINGO_TRANSPORT_BOOTSTRAP_INTERNAL_PROTOCOL_H_
