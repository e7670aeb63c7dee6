// A medium: one way to hold a pair's FIFO (connector.h). The connector runs
// the handshake and calls a medium at each of its steps; a medium knows
// only its memory (or connection) and what travels in its offer.
//
//   receiver                          sender
//   Create(made, offer)  -- offer -->
//   Accept(made)   (helper thread)    Open(offer) -> link
//                       <-- answer --
//   Settle(made, opened) -> link
//
// Thread safety: Create, Open and Settle run on the connecting thread;
// Accept on a helper thread, on Made objects of its own.
#ifndef RINGO_TRANSPORT_CONNECT_MEDIUM_H_
#define RINGO_TRANSPORT_CONNECT_MEDIUM_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "transport/connect/connector.h"
#include "transport/net/net.h"
#include "transport/socket.h"

namespace ringo::transport {

// What a medium puts in an offer for its sender (a segment's name, a network
// handle, a CUDA IPC record); opaque to the connector.
inline constexpr size_t kOfferBlobBytes = 256;
struct OfferBlob {
  uint8_t bytes[kOfferBlobBytes] = {};
};

// The pair being connected, as this rank sees it.
struct PairContext {
  const ConnectorSpec* spec = nullptr;
  int peer = -1;
  int lane = 0;
  bool gpu = false;  // a GPU FIFO (the engine's kernels read or write it)
  FifoGeometry geometry;
  Deadline deadline;
  std::string where;  // "rank 3 connecting to rank 1 (lane 0)", for messages

  const PeerInfo& self_info() const { return spec->peers[spec->rank]; }
  const PeerInfo& peer_info() const { return spec->peers[peer]; }
};

// The receiver's FIFO between its offer and its sender's answer.
struct Made {
  std::shared_ptr<FifoMemory> memory;
  FifoHeader* header = nullptr;
  void* slots = nullptr;  // the Simple slots apart from the header (GPUDirect), as FifoLink's
  int device = -1;
  std::string name;  // what Settle releases (a segment's name, a registry key)
  std::unique_ptr<net::Listener> listener;
  std::unique_ptr<net::RecvConnection> accepted;
  base::Status accept_status;
};

// What the sender tells the receiver besides success: where the receiver
// may test reading its memory (process_vm_readv), so that point-to-point
// can copy large messages straight out of the sender's buffers.
struct SenderProbe {
  uint64_t addr = 0;
  uint64_t value = 0;
};

class FifoMedium {
 public:
  virtual ~FifoMedium() = default;
  virtual Medium kind() const = 0;
  // Receiver, before it waits for anything: makes the FIFO and fills the offer.
  virtual base::Status Create(const PairContext& pair, Made* made, OfferBlob* offer) = 0;
  // Receiver, while this rank answers its own offers: what must wait for
  // the sender (a network accept). Most media need nothing.
  virtual base::Status Accept(const PairContext& pair, Made* made) { return base::OkStatus(); }
  // Sender: opens the FIFO of `offer`.
  virtual base::StatusOr<FifoLink> Open(const PairContext& pair, const OfferBlob& offer) = 0;
  // Receiver, once the sender answered: `opened` whether it opened the FIFO
  // (false: undo what Create did). The link, when it did.
  virtual base::StatusOr<FifoLink> Settle(const PairContext& pair, Made* made, bool opened,
                                          const SenderProbe& probe) = 0;
  // Receiver, when no answer came (the sender's process or the exchange
  // went away): whether the sender opened the FIFO is unknown.
  virtual void Forget(const PairContext& pair, Made* made) { (void)Settle(pair, made, false, SenderProbe()); }
};

template <size_t N>
void PutText(char (&dst)[N], const std::string& text) {
  std::snprintf(dst, N, "%s", text.c_str());
}

template <size_t N>
std::string GetText(const char (&src)[N]) {
  return std::string(src, strnlen(src, N));
}

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_CONNECT_MEDIUM_H_
