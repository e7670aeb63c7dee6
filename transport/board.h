// The board: one-shot exchange for small messages between the ranks of one
// host. Every rank owns a segment with two buffers and two counters:
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
// rank publishes the core it last ran on and what it waits for (`want`); a
// waiter gives its core away only to a rank on the same core that can move
// (it is busy outside a wait, or what it waits for has arrived) and polls
// otherwise: the ranks it waits for run on other cores. In steady state
// that is one switch per core per operation, the least two ranks sharing a
// core can do. Published cores can be stale (the scheduler may have moved
// a rank), so a waiter that polls kCrowdedPollUs without progress yields
// anyway; after yield_count yields, or kCrowdedPhaseUs, it waits as
// counter.h's waits do (which notice a peer that exited, keep the deadline,
// and sleep).
#ifndef RINGO_TRANSPORT_BOARD_H_
#define RINGO_TRANSPORT_BOARD_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "transport/bootstrap.h"
#include "transport/counter.h"
#include "transport/fifo.h"  // FifoMemory

namespace ringo::transport {

struct BoardHeader {
  uint32_t magic;
  uint32_t version;
  uint64_t buffer_bytes;
  int32_t rank;
  int32_t pid;
  std::atomic<uint32_t> aborted{0};
  SharedCounter posted;
  SharedCounter done;
  // Crowded waits: what this rank waits for (0: none, it is busy; see
  // EncodeWant in board.cc) and the core it last ran on (-1: unknown).
  alignas(64) std::atomic<uint64_t> want{0};
  std::atomic<int32_t> cpu{-1};
  // The claims on this rank's part of a direct collective (kernels::DirectShare),
  // on a line of its own: the other ranks take chunks from it.
  alignas(64) std::atomic<uint64_t> direct_work{0};
};

class Board {
 public:
  // `segments[r]` is rank r's memory, formatted by FormatBoard.
  Board(int rank, std::vector<std::shared_ptr<FifoMemory>> segments);

  size_t buffer_bytes() const { return buffer_bytes_; }
  int nranks() const { return static_cast<int>(views_.size()); }

  // Waits until every rank has finished operation seq-2; returns this rank's buffer for seq.
  base::StatusOr<void*> AcquireWrite(uint64_t seq, const WaitContext& ctx);
  void Post(uint64_t seq);
  // Waits until rank `rank` has posted seq; returns its buffer.
  base::StatusOr<const void*> WaitPosted(int rank, uint64_t seq, const WaitContext& ctx);

  // Posts of at most kLLMaxBytes in the LL format: each 8-byte word of the
  // buffer carries 4 bytes of data and the low 32 bits of seq, written with
  // one 8-byte store, so a reader that sees the flag in a word has its data
  // with it: one cache-line transfer per line instead of the counter's line
  // and then the data's. PostLL writes the words into this rank's buffer
  // for seq (after AcquireWrite), then publishes `posted` as Post does, for
  // readers that sleep. ReadLL polls rank `rank`'s words until every one
  // carries seq (ctx.spin_count polls, then WaitPosted's wait: crowded,
  // then sleeping; it reports aborts, exits and timeouts) and copies the
  // data to `dst`, 4-byte aligned with room for `bytes` rounded up to 4.
  // A post takes twice its size in the buffer.
  void PostLL(uint64_t seq, const void* data, size_t bytes);
  base::Status ReadLL(int rank, uint64_t seq, void* dst, size_t bytes, const WaitContext& ctx);
  // Waits until every rank has posted seq; Posted() then gives their buffers.
  base::Status WaitAllPosted(uint64_t seq, const WaitContext& ctx);
  const void* Posted(int rank, uint64_t seq) const { return Buffer(rank, seq); }
  void Done(uint64_t seq);

  // Rank `rank`'s header (mapped by every rank).
  BoardHeader* header(int rank) const { return views_[rank].header; }

  // Marks this rank's board aborted and wakes everyone waiting on any board.
  void Abort();

 private:
  struct View {
    BoardHeader* header;
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

  int rank_;
  size_t buffer_bytes_;
  std::vector<std::shared_ptr<FifoMemory>> segments_;
  std::vector<View> views_;
};

size_t BoardBytes(size_t buffer_bytes);
void FormatBoard(void* memory, size_t buffer_bytes, int rank, int pid);

// Connects the boards of every rank (all on this host) through the bootstrap.
base::StatusOr<std::unique_ptr<Board>> ConnectBoard(Bootstrap& bootstrap, uint64_t tag, int rank, int nranks,
                                                    size_t buffer_bytes);
// Boards for ranks that are threads of this process; result[rank].
std::vector<std::unique_ptr<Board>> ConnectBoardsInProcess(int nranks, size_t buffer_bytes);

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_BOARD_H_
