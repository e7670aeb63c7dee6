#include "transport/board.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "base/check.h"
#include "transport/shm.h"

namespace ringo::transport {
namespace {

constexpr uint32_t kBoardMagic = 0x42474e52;  // "RNGB"
constexpr size_t kBoardDataOffset = 4096;
static_assert(sizeof(BoardHeader) <= kBoardDataOffset, "header fits before the buffers");

std::string BoardName(uint64_t tag, int rank) {
  char name[96];
  std::snprintf(name, sizeof(name), "/ringo-%016llx-board%d", static_cast<unsigned long long>(tag), rank);
  return name;
}

class HeapMemory : public FifoMemory {
 public:
  explicit HeapMemory(size_t bytes) : base_(std::aligned_alloc(4096, bytes)) {
    RINGO_CHECK(base_ != nullptr, "out of memory allocating a board");
  }
  ~HeapMemory() override { std::free(base_); }
  void* base() override { return base_; }

 private:
  void* base_;
};

}  // namespace

size_t BoardBytes(size_t buffer_bytes) { return kBoardDataOffset + 2 * buffer_bytes; }

void FormatBoard(void* memory, size_t buffer_bytes, int rank, int pid) {
  std::memset(memory, 0, BoardBytes(buffer_bytes));  // touch every page now
  auto* h = new (memory) BoardHeader();
  h->magic = kBoardMagic;
  h->version = 1;
  h->buffer_bytes = buffer_bytes;
  h->rank = rank;
  h->pid = pid;
}

Board::Board(int rank, std::vector<std::shared_ptr<FifoMemory>> segments)
    : rank_(rank), segments_(std::move(segments)) {
  for (auto& s : segments_) {
    auto* h = static_cast<BoardHeader*>(s->base());
    RINGO_CHECK(h->magic == kBoardMagic, "board memory is not formatted");
    views_.push_back({h, static_cast<char*>(s->base()) + kBoardDataOffset});
  }
  buffer_bytes_ = views_[rank_].header->buffer_bytes;
}

base::StatusOr<void*> Board::AcquireWrite(uint64_t seq, const WaitContext& ctx) {
  if (seq > 2) {
    for (int r = 0; r < nranks(); ++r) {
      BoardHeader* h = views_[r].header;
      const PeerRef peer{&h->aborted, h->rank, h->pid, "reusing the board after", static_cast<int64_t>(seq)};
      RETURN_IF_ERROR(WaitAtLeast(h->done, seq - 2, peer, ctx).status());
    }
  }
  return static_cast<void*>(Buffer(rank_, seq));
}

void Board::Post(uint64_t seq) { Publish(views_[rank_].header->posted, seq); }

base::StatusOr<const void*> Board::WaitPosted(int rank, uint64_t seq, const WaitContext& ctx) {
  BoardHeader* h = views_[rank].header;
  const PeerRef peer{&h->aborted, h->rank, h->pid, "reading the board of", static_cast<int64_t>(seq)};
  RETURN_IF_ERROR(WaitAtLeast(h->posted, seq, peer, ctx).status());
  return static_cast<const void*>(Buffer(rank, seq));
}

void Board::Done(uint64_t seq) { Publish(views_[rank_].header->done, seq); }

void Board::Abort() {
  views_[rank_].header->aborted.store(1, std::memory_order_seq_cst);
  for (View& v : views_) {  // our own waits sleep on the peers' counters
    Wake(v.header->posted);
    Wake(v.header->done);
  }
}

base::StatusOr<std::unique_ptr<Board>> ConnectBoard(Bootstrap& bootstrap, uint64_t tag, int rank, int nranks,
                                                    size_t buffer_bytes) {
  const std::string mine = BoardName(tag, rank);
  const size_t bytes = BoardBytes(buffer_bytes);
  std::vector<std::shared_ptr<FifoMemory>> segments(nranks);
  auto created = CreateShm(mine, bytes);
  if (created.ok()) {
    segments[rank] = *created;
    FormatBoard(segments[rank]->base(), buffer_bytes, rank, getpid());
  }
  // Everyone reaches each barrier, so one rank's failure is everyone's error.
  RETURN_IF_ERROR(AgreeOk(bootstrap, created.status(), "create its board").WithContext("board"));
  base::Status st;
  for (int r = 0; r < nranks && st.ok(); ++r) {
    if (r == rank) continue;
    auto opened = OpenShm(BoardName(tag, r), bytes);
    if (opened.ok()) segments[r] = *opened;
    else st = opened.status();
  }
  base::Status agreed = AgreeOk(bootstrap, st, "open the other ranks' boards");
  UnlinkShm(mine);
  RETURN_IF_ERROR(agreed.WithContext("board"));
  return std::make_unique<Board>(rank, std::move(segments));
}

std::vector<std::unique_ptr<Board>> ConnectBoardsInProcess(int nranks, size_t buffer_bytes) {
  std::vector<std::shared_ptr<FifoMemory>> segments;
  for (int r = 0; r < nranks; ++r) {
    auto mem = std::make_shared<HeapMemory>(BoardBytes(buffer_bytes));
    FormatBoard(mem->base(), buffer_bytes, r, getpid());
    segments.push_back(mem);
  }
  std::vector<std::unique_ptr<Board>> boards;
  for (int r = 0; r < nranks; ++r) boards.push_back(std::make_unique<Board>(r, segments));
  return boards;
}

}  // namespace ringo::transport
