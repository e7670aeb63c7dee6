// The pages every rank of one memory domain shares with the others: one
// POSIX shared-memory segment per rank, which every rank maps. Its parts:
//
//   ControlPage   who the rank is (its process), whether it stopped and why
//                 (its abort flag and fault notice), whom it waits on (wait
//                 cells, peer_state.h), and the scheduling hints of crowded
//                 waits (the core it last ran on, what it waits for)
//   engine words  words the engines share per call: the direct path's
//                 claim word (kernels/direct_executor.h)
//   board         the one-shot board's counters, signatures and buffers
//                 (board.h), when the communicator has one
//
// Every rank formats its own segment before the others open it; nothing a
// peer wrote is trusted (a page of another layout is an error naming it).
//
// Thread safety: immutable after Connect, but for the atomics in the pages;
// Abort from any thread.
#ifndef RINGO_TRANSPORT_SHM_HOST_PAGES_H_
#define RINGO_TRANSPORT_SHM_HOST_PAGES_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "transport/bootstrap/exchange.h"
#include "transport/peer_state.h"
#include "transport/fifo/fifo.h"  // FifoMemory

namespace ringo::transport {

struct ControlPage {
  uint32_t magic;
  uint32_t version;
  int32_t rank;
  int32_t reserved;
  uint64_t board_bytes;  // the size of the board's area (0: none)
  ProcessId process;
  std::atomic<uint32_t> aborted{0};
  // Why this rank stopped (written before `aborted`).
  alignas(64) FaultNotice notice;
  // Whom its channels wait on.
  alignas(64) WaitCells waits;
  // Crowded waits (board.h): what this rank waits for (0: none, it is busy)
  // and the core it last ran on (-1: unknown).
  alignas(64) std::atomic<uint64_t> want{0};
  std::atomic<int32_t> cpu{-1};
};

// Words the engines share per call, each on a line of its own.
struct EngineWords {
  // The claims on this rank's part of a direct collective (kernels::DirectShare).
  alignas(64) std::atomic<uint64_t> direct_work{0};
};

class HostPages {
 public:
  // Every rank's pages, with `board_bytes` of board area each (0: none).
  // Collective over `exchange`, whose members are the ranks of one memory
  // domain; every rank learns of any rank's failure.
  static base::StatusOr<std::unique_ptr<HostPages>> Connect(Exchange& exchange, uint64_t tag, size_t board_bytes);
  // Every rank's view of pages in this process's heap (tests that run
  // ranks as threads without an exchange); result[rank].
  static std::vector<std::shared_ptr<HostPages>> InProcess(int nranks, size_t board_bytes);
  // Rank `rank`'s view of `segments` (one per rank, SegmentBytes long, each
  // formatted by FormatSegment): tests that fork ranks over shared memory.
  static std::shared_ptr<HostPages> Over(int rank, size_t board_bytes,
                                         std::vector<std::shared_ptr<FifoMemory>> segments);
  static size_t SegmentBytes(size_t board_bytes);
  static void FormatSegment(void* memory, size_t board_bytes, int rank, const ProcessId& process);

  int rank() const { return rank_; }
  int nranks() const { return static_cast<int>(views_.size()); }
  ControlPage* control(int rank) const { return views_[rank].control; }
  EngineWords* words(int rank) const { return views_[rank].words; }
  // The board's area of `rank` (board_bytes() long), null without a board.
  void* board(int rank) const { return views_[rank].board; }
  size_t board_bytes() const { return board_bytes_; }

  // Every rank's wait cells, by rank (WaitContext::rank_waits), and this rank's.
  const WaitCells* const* rank_waits() const { return rank_waits_.data(); }
  WaitCells* self_waits() const { return &views_[rank_].control->waits; }

  // Writes this rank's fault notice (`why`, not OK) and raises its abort flag.
  void Abort(const base::Status& why, uint64_t seq);

 private:
  struct View {
    ControlPage* control;
    EngineWords* words;
    void* board;
  };
  HostPages(int rank, size_t board_bytes, std::vector<std::shared_ptr<FifoMemory>> segments);

  int rank_;
  size_t board_bytes_;
  std::vector<std::shared_ptr<FifoMemory>> segments_;
  std::vector<View> views_;
  std::vector<const WaitCells*> rank_waits_;
};

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_SHM_HOST_PAGES_H_
