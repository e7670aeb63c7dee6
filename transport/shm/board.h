// The board: one-shot exchange for small messages between the ranks of one
// host. Every rank's shared pages (host_pages.h) hold two buffers and two
// counters of its board:
// `posted` (the sequence number of the operation whose data is in buffer
// seq % 2) and `done` (the last operation this rank finished reading). Every
// rank maps every other rank's segment, so an operation is: wait until every
// rank is done with seq-2 (its buffer is free), write, publish posted = seq,
// read what the others posted for seq, publish done = seq. One hop instead of
// the ring's 2(N-1), for data that fits a buffer.
//
// Ordering and waits are counter.h's. Owned by one thread (the communicator's
// running collective); Abort() may be called from any thread.
//
// Crowded waits (WaitContext::crowded: ranks outnumber cores). Every switch
// between processes costs microseconds, and a rank that yields to a
// neighbour on its core that cannot move either wastes two of them. So each
// rank publishes in its control page the core it last ran on and what it
// waits for (`want`); a
// waiter gives its core away only to a rank on the same core that can move
// (it is busy outside a wait, or what it waits for has arrived) and polls
// otherwise: the ranks it waits for run on other cores. In steady state
// that is one switch per core per operation, the least two ranks sharing a
// core can do. Published cores can be stale (the scheduler may have moved
// a rank), so a waiter that polls kCrowdedPollUs without progress yields
// anyway; after yield_count yields, or kCrowdedPhaseUs, it waits as
// counter.h's waits do (which notice a peer that exited, keep the deadline,
// and sleep).
#ifndef RINGO_TRANSPORT_SHM_BOARD_H_
#define RINGO_TRANSPORT_SHM_BOARD_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "transport/fifo/counter.h"
#include "transport/peer_state.h"
#include "transport/shm/host_pages.h"
#include "transport/signature.h"

namespace ringo::transport {

// The board's part of a rank's shared pages (host_pages.h), buffers after it.
struct BoardHeader {
  uint32_t magic;
  uint32_t version;
  uint64_t buffer_bytes;
  SharedCounter posted;
  SharedCounter done;
  // The signature of the collective whose post is in buffer seq % 2, written
  // before `posted` is published.
  alignas(64) CallSignature sig[2];
};

// The board area a rank's pages need for buffers of `buffer_bytes`.
size_t BoardBytes(size_t buffer_bytes);

class Board {
 public:
  // Over `pages`, whose board areas hold BoardBytes(buffer_bytes) each:
  // formats this rank's; every rank must do so before any rank posts (the
  // communicator's setup agrees on that).
  Board(std::shared_ptr<HostPages> pages, size_t buffer_bytes);

  size_t buffer_bytes() const { return buffer_bytes_; }
  int nranks() const { return static_cast<int>(views_.size()); }

  // Waits until every rank has finished operation seq-2; returns this rank's buffer for seq.
  base::StatusOr<void*> AcquireWrite(uint64_t seq, const WaitContext& ctx);
  // Publishes this rank's post for seq (its buffer, written after
  // AcquireWrite) with the signature of the collective it belongs to.
  void Post(uint64_t seq, const CallSignature& sig = CallSignature());
  // Waits until rank `rank` has posted seq; returns its buffer.
  base::StatusOr<const void*> WaitPosted(int rank, uint64_t seq, const WaitContext& ctx);

  // Small posts in the LL format: each 8-byte word of the buffer carries 4
  // bytes and the low 32 bits of seq, written with one 8-byte store, so a
  // reader that sees the flag in a word has its data with it: one
  // cache-line transfer per line instead of the counter's line and then the
  // data's. Word 0 carries the signature's digest, the data follows. PostLL
  // writes the words into this rank's buffer for seq (after AcquireWrite),
  // then publishes `posted` as Post does, for readers that sleep. ReadLL
  // polls rank `rank`'s words until every one carries seq (ctx.spin_count
  // polls, then WaitPosted's wait: crowded, then sleeping; it reports
  // aborts, exits and timeouts) and copies the data to `dst`, 4-byte aligned
  // with room for `bytes` rounded up to 4. Returns false, without waiting
  // for data words, when the post's signature differs from `expect` (seq 0:
  // unchecked; PostedSignature then says what was posted); a post shorter
  // than `bytes` is a RemoteError naming the poster, never a wait past its
  // post. A post takes twice its size plus 8 bytes of the buffer.
  void PostLL(uint64_t seq, const CallSignature& sig, const void* data, size_t bytes);
  base::StatusOr<bool> ReadLL(int rank, uint64_t seq, const CallSignature& expect, void* dst, size_t bytes,
                              const WaitContext& ctx);
  // Waits for rank `rank`'s post of seq; whether its signature is `expect`
  // (always true for an unchecked expect, seq 0).
  base::StatusOr<bool> PostMatches(int rank, uint64_t seq, const CallSignature& expect, const WaitContext& ctx);
  static size_t LLPostBytes(size_t bytes);
  // The signature rank `rank` posted with seq (after a wait for its post).
  CallSignature PostedSignature(int rank, uint64_t seq) const { return views_[rank].header->sig[seq % 2]; }
  // A post that holds only a signature, for a collective that runs on the
  // ring: a rank that expects another collective's post for seq finds the
  // mismatch instead of waiting. Marks this rank done with seq at once.
  base::Status PostSignatureOnly(uint64_t seq, const CallSignature& sig, const WaitContext& ctx);
  // Waits until every rank has posted seq; Posted() then gives their buffers.
  base::Status WaitAllPosted(uint64_t seq, const WaitContext& ctx);
  const void* Posted(int rank, uint64_t seq) const { return Buffer(rank, seq); }
  void Done(uint64_t seq);

  // Wakes this rank's waits on the board (after its pages' abort flag was raised).
  void WakeAll();

  // Rank `rank`'s part of the board (mapped by every rank).
  BoardHeader* header(int rank) const { return views_[rank].header; }

 private:
  struct View {
    BoardHeader* header;
    ControlPage* control;
    char* data;
  };
  char* Buffer(int rank, uint64_t seq) const { return views_[rank].data + (seq % 2) * buffer_bytes_; }
  enum Kind : uint64_t { kPosted = 1, kDone = 2 };
  // Whether `only`'s counter (every rank's when only < 0) has reached target.
  bool Reached(Kind kind, uint64_t target, int only) const;
  // Whether a rank other than this one, last seen on `cpu`, can move now.
  bool NeighbourCanMove(int cpu) const;
  base::Status WaitFor(Kind kind, uint64_t target, int only, const WaitContext& ctx);
  // counter.h's wait on one rank's counter (sleeps; reports aborts, exits, timeouts).
  base::Status WaitOne(Kind kind, uint64_t target, int rank, const WaitContext& ctx);

  std::shared_ptr<HostPages> pages_;
  int rank_;
  size_t buffer_bytes_;
  std::vector<View> views_;
};

// Checks every rank's board header (after every rank built its Board):
// another layout or size is an error naming the rank.
base::Status CheckBoards(const HostPages& pages, size_t buffer_bytes);

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_SHM_BOARD_H_
