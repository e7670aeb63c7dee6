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
  void Done(uint64_t seq);

  // Marks this rank's board aborted and wakes everyone waiting on any board.
  void Abort();

 private:
  struct View {
    BoardHeader* header;
    char* data;
  };
  char* Buffer(int rank, uint64_t seq) const { return views_[rank].data + (seq % 2) * buffer_bytes_; }

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
