// The point-to-point engine of a host communicator: runs a batch of sends
// and receives (one ringoSend/ringoRecv, or every one of a group, and the
// all-to-all, gather and scatter built on them) to completion, over one FIFO
// per ordered pair of ranks (transport/peer_links.h), connected the first
// time a pair is used.
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
#ifndef RINGO_COLLECTIVES_P2P_ENGINE_H_
#define RINGO_COLLECTIVES_P2P_ENGINE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <vector>

#include "base/status.h"
#include "transport/shm/counter.h"
#include "transport/connect/peer_links.h"
#include "transport/shm/shared_region.h"

namespace ringo::collectives {

struct P2pOp {
  bool send = true;
  int peer = 0;
  const void* send_buf = nullptr;  // send: the bytes to send
  void* recv_buf = nullptr;        // recv: where they go
  size_t bytes = 0;
};

class P2pEngine {
 public:
  P2pEngine(int rank, int nranks, std::unique_ptr<transport::PeerLinks> links);

  // Whether `ops` can run on rank `rank`: sends to and receives from
  // oneself pair up, with equal sizes (InvalidUsage otherwise). Touches
  // nothing; the GPU engine's rule too.
  static base::Status CheckSelf(int rank, const std::vector<P2pOp>& ops);
  base::Status Check(const std::vector<P2pOp>& ops) const { return CheckSelf(rank_, ops); }

  // Runs `ops` (which passed Check) to completion on this rank. `wait` is the communicator's
  // (abort flag, patience, wait states); any failure leaves the pairs in an
  // unknown state (the communicator fails).
  base::Status Run(const std::vector<P2pOp>& ops, const transport::WaitContext& wait);

  void Abort(const base::Status& why, int self_rank, uint64_t seq) { links_->Abort(why, self_rank, seq); }
  void Shutdown(bool drain, int64_t timeout_ms) { links_->Shutdown(drain, timeout_ms); }
  const transport::PeerLinks& links() const { return *links_; }

 private:
  struct Progress;
  void RunSelf(const std::vector<P2pOp>& ops);
  base::Status Advance(Progress& p, bool* moved);
  base::Status WaitOn(Progress& p, const transport::WaitContext& ctx);

  const int rank_;
  const int nranks_;
  std::unique_ptr<transport::PeerLinks> links_;
  std::vector<uint64_t> sent_;      // messages sent to each peer so far
  std::vector<uint64_t> received_;  // messages received from each peer so far
  transport::PeerRegions regions_;   // senders' ringoMemAlloc regions mapped here
  std::set<int32_t> unmappable_;     // senders whose regions could not be mapped
};

// The shape word of point-to-point slots (transport::CallSignature::shape):
// the message's bytes, or a descriptor of the sender's buffer.
inline constexpr uint32_t kP2pShape = 0x50325000u;
inline constexpr uint32_t kP2pDirectShape = 0x50325001u;
// Messages from this size go as a descriptor where the receiver can read
// the sender's memory.
inline constexpr size_t kDirectMinBytes = size_t{64} << 10;

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_P2P_ENGINE_H_
