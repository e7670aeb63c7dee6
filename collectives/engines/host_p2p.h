// The point-to-point engine of a host communicator: runs a batch of sends
// and receives (one ringoSend/ringoRecv, or every one of a group, and the
// all-to-all, gather and scatter built on them) to completion, over one FIFO
// per ordered pair of ranks (lane transport::kP2pLane of the connector),
// connected the first time a pair is used and kept.
//
// Matching: the k-th send from rank s to rank r meets the k-th receive
// posted by r from s, as NCCL's. A message is one or more slots, each
// carrying (in its signature) the message's number on the pair, its size and
// the slot's index, so a receive that expects another size fails with
// ringoInvalidUsage naming both sides instead of reading the wrong bytes. A
// message of 0 bytes is one empty slot. Sends and receives with oneself are
// copies and must be matched within the batch.
//
// Large messages (kDirectMinBytes and up) between ranks of one host whose
// receiver can read the sender's memory (the same process, or
// process_vm_readv) go as one descriptor slot (the sender's pid, address and
// size, and the ringoMemAlloc region they lie in, if any): the receiver
// copies straight from the sender's buffer into its own (a memcpy out of
// the region mapped here, up to 64 MiB; process_vm_readv otherwise) and
// releases the slot, which completes the send. One copy instead of two,
// and no slot-sized steps.
//
// Progress: every operation of a batch advances as far as its FIFO allows
// before the engine waits, so a batch never waits on one peer while another
// could move (a rank may send to and receive from the same peer, in any
// order). Operations on one pair and direction advance in issue order. The
// engine spins, then yields, then sleeps on one operation's counter at a
// time for a few milliseconds, in turn. No progress for the timeout is
// ringoTimeout naming the peer of the oldest operation left.
//
// Thread safety: Run by the communicator's one thread; Abort from any.
#ifndef RINGO_COLLECTIVES_ENGINES_HOST_P2P_H_
#define RINGO_COLLECTIVES_ENGINES_HOST_P2P_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <vector>

#include "base/status.h"
#include "collectives/engines/engine.h"
#include "collectives/engines/setup.h"
#include "transport/connect/connector.h"
#include "transport/fifo/counter.h"
#include "transport/fifo/fifo.h"
#include "transport/shm/shared_region.h"

namespace ringo::collectives {

class HostP2p : public PointToPoint {
 public:
  explicit HostP2p(const EngineSetup& setup);
  ~HostP2p() override;

  // Runs `ops` (which passed CheckSelf) to completion on this rank, waiting
  // as call.wait says; any failure leaves the pairs in an unknown state
  // (the communicator fails).
  base::Status Run(const std::vector<P2pOp>& ops, P2pCall& call) override;
  void Abort(const base::Status& why, uint64_t seq) override;

 private:
  struct Progress;
  // Connects the pairs `ops` need that are not connected yet.
  base::Status Connect(const std::vector<P2pOp>& ops, const std::atomic<bool>* abort);
  bool Connected(const P2pOp& op) const {
    return op.send ? send_[op.peer] != nullptr : recv_[op.peer] != nullptr;
  }
  void RunSelf(const std::vector<P2pOp>& ops);
  base::Status Advance(Progress& p, bool* moved);
  base::Status WaitOn(Progress& p, const transport::WaitContext& ctx);

  const int rank_;
  const int nranks_;
  bool collective_ = false;  // the running call's P2pCall::collective
  transport::Connector* const connector_;
  const transport::FifoGeometry geometry_;
  std::mutex ends_mu_;  // ends appear under it (Abort reads them from any thread)
  std::vector<std::unique_ptr<transport::SendEnd>> send_;  // by peer; null until connected
  std::vector<std::unique_ptr<transport::RecvEnd>> recv_;
  std::vector<uint64_t> sent_;      // messages sent to each peer so far
  std::vector<uint64_t> received_;  // messages received from each peer so far
  transport::PeerRegions regions_;   // senders' ringoMemAlloc regions mapped here
  std::set<int32_t> unmappable_;     // senders whose regions could not be mapped
  // Run's scratch, kept so that a call allocates nothing.
  std::vector<Progress> progress_;
  std::vector<char> busy_send_;  // by peer: an operation on the pair is in progress this pass
  std::vector<char> busy_recv_;
  std::vector<size_t> active_;
};

// The shape word of point-to-point slots (transport::CallSignature::shape):
// the message's bytes, or a descriptor of the sender's buffer.
inline constexpr uint32_t kP2pShape = 0x50325000u;
inline constexpr uint32_t kP2pDirectShape = 0x50325001u;
// Messages from this size go as a descriptor where the receiver can read
// the sender's memory.
inline constexpr size_t kDirectMinBytes = size_t{64} << 10;

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_HOST_P2P_H_
