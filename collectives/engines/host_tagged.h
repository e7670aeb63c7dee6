// Tagged point-to-point on host communicators (ringoSendTagged,
// ringoRecvTagged): a receive names a tag and one sender or any sender
// (RINGO_ANY_SOURCE), and takes the first message with that tag to arrive
// from a sender it accepts, as MPI's and gloo's receives do.
//
// Pairs: one FIFO per ordered pair of ranks on its own lane (kTaggedLane),
// apart from ringoSend/ringoRecv's, so tagged and ordered messages never
// meet. A receive from any source must be able to hear every rank, so every
// pair is connected at init (Connect, collective), only on communicators
// made with ringoConfig_t::tagged_p2p. Each FIFO has kSlots slots of
// TaggedSlotBytes.
//
// A message is one or more consecutive slots of its pair (a sender posts a
// whole message before its next: calls are blocking and not grouped). Each
// slot's signature carries the message's number on the pair (checked, from
// 1), its size, its tag and kTaggedShape; a message of 0 bytes is one empty
// slot.
//
// Matching, on the receiving rank: messages are taken in the order their
// first slots are seen. A receive first looks through the messages already
// seen and not taken (arrival order); failing that it polls every pair. The
// first new message that matches streams straight into the receive's
// buffer; every other one is copied into a buffer of its own (the
// unexpected queue) as its slots arrive, so a pair's FIFO never stays full
// behind a message nobody asked for yet. A message of another size than the
// receive's is left in the queue and the receive fails with
// ringoInvalidUsage (the communicator stays usable).
//
// Progress: while a tagged call waits (a send for room, a receive for its
// message) it drains every pair into the queue, so two ranks that send to
// each other at once never deadlock. A send returns once its last slot is
// posted. The peer of a send, and the sender of a receive from one rank,
// are watched as ringoRecv's are (a failed or vanished peer ends the wait
// naming it); a receive from any source watches its own abort flag and the
// timeout only, since ranks that have finished and left are no fault of it.
// A receive from oneself with nothing queued is refused at once (nothing
// could arrive while it waits).
//
// Thread safety: Send and Recv by the communicator's one thread; Abort from
// any.
#ifndef RINGO_COLLECTIVES_ENGINES_HOST_TAGGED_H_
#define RINGO_COLLECTIVES_ENGINES_HOST_TAGGED_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <memory>
#include <mutex>
#include <vector>

#include "base/status.h"
#include "transport/connect/connector.h"
#include "transport/fifo/counter.h"
#include "transport/fifo/fifo.h"

namespace ringo::collectives {

// The lane of tagged pairs.
inline constexpr int kTaggedLane = 1001;
// The shape word of tagged slots (transport::CallSignature::shape).
inline constexpr uint32_t kTaggedShape = 0x50325400u;
// Receive from any rank.
inline constexpr int kAnySource = -1;

// The slot of tagged FIFOs: every pair is connected, so they stay small
// (8 slots of 64 KiB: 512 KiB per pair and direction), or RINGO_SLOT_BYTES
// when that is smaller.
size_t TaggedSlotBytes(int64_t slot_setting);

class HostTagged {
 public:
  HostTagged(int rank, int nranks, transport::Connector* connector, size_t slot_bytes);
  ~HostTagged();

  // Connects every pair with this rank (collective: every rank calls it).
  base::Status Connect(const std::atomic<bool>* abort);

  // Sends `bytes` at `buf` to `peer` (which may be this rank) with `tag`.
  base::Status Send(const void* buf, size_t bytes, int peer, int32_t tag, const transport::WaitContext& wait);
  // Receives the first message with `tag` from `peer` (kAnySource: any
  // rank) into `buf`, which holds `bytes`; the sender in *source.
  // InvalidUsage (nothing taken) when the matching message has another size.
  base::Status Recv(void* buf, size_t bytes, int peer, int32_t tag, int* source,
                    const transport::WaitContext& wait);

  // Ends this rank's waits and tells its peers.
  void Abort(const base::Status& why, uint64_t seq);

  // Messages seen and not taken yet (for tests and the log).
  size_t unexpected() const { return queue_.size(); }
  // Set when a failure may have left a pair in an unknown state (the
  // communicator then fails); a refused receive leaves it false.
  bool fatal() const { return fatal_; }

 private:
  struct Message;
  struct Incoming;
  struct Want;
  // How long a call has waited without anything moving.
  struct Clock {
    int64_t idle = 0;
    int64_t since_ms = -1;
  };

  // Moves what has arrived on every pair (into the wanted receive's buffer
  // or the queue); *moved when anything did.
  base::Status Drain(Want* want, bool* moved);
  base::Status DrainPair(int peer, Want* want, bool* moved);
  // One idle pass of a waiting call: spins, yields, then sleeps until
  // anything arrives or `send_peer`'s FIFO (>= 0) frees a slot; fails when
  // `watch` (a peer, -1 none) or any peer that aborted is heard to have
  // failed, or when nothing moved for the timeout (`what` the call is doing).
  base::Status Idle(int send_peer, int watch, Clock* clock, const transport::WaitContext& wait,
                    const std::function<std::string()>& what);

  const int rank_;
  const int nranks_;
  transport::Connector* const connector_;
  const transport::FifoGeometry geometry_;
  std::mutex ends_mu_;  // the ends appear under it (Abort reads them from any thread)
  std::vector<std::unique_ptr<transport::SendEnd>> send_;  // by peer; null for this rank
  std::vector<std::unique_ptr<transport::RecvEnd>> recv_;
  std::vector<uint64_t> sent_;      // messages sent to each peer so far
  std::vector<uint64_t> received_;  // messages begun from each peer so far
  std::vector<Incoming> incoming_;  // by peer: the message whose slots are arriving
  std::deque<std::unique_ptr<Message>> queue_;  // seen, not taken, in arrival order
  bool fatal_ = false;
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_HOST_TAGGED_H_
