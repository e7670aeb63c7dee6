#include "transport/shm/host_pages.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "base/check.h"
#include "transport/shm/segment.h"

namespace ringo::transport {
namespace {

constexpr uint32_t kPagesMagic = 0x50474e52;  // "RNGP"
constexpr uint32_t kPagesVersion = 1;
constexpr size_t kPage = 4096;
constexpr size_t kWordsOffset = kPage;
constexpr size_t kBoardOffset = 2 * kPage;
static_assert(sizeof(ControlPage) <= kPage, "the control page is one page");
static_assert(sizeof(EngineWords) <= kPage, "the engine words fit a page");


std::string PagesName(uint64_t tag, int rank) {
  char name[96];
  std::snprintf(name, sizeof(name), "/ringo-%016llx-pages%d", static_cast<unsigned long long>(tag), rank);
  return name;
}


base::Status CheckSegment(const void* memory, size_t board_bytes, int rank) {
  const auto* c = static_cast<const ControlPage*>(memory);
  const std::string whose = "rank " + std::to_string(rank) + "'s shared pages";
  if (c->magic != kPagesMagic) return base::RemoteError(whose + " are not Ringo's (bad magic)");
  if (c->version != kPagesVersion) {
    return base::RemoteError(whose + " have layout version " + std::to_string(c->version) + ", this library " +
                             std::to_string(kPagesVersion));
  }
  if (c->board_bytes != board_bytes || c->rank != rank) {
    return base::RemoteError(whose + " say rank " + std::to_string(c->rank) + " with a " +
                             std::to_string(c->board_bytes) + "-byte board, expected " + std::to_string(board_bytes));
  }
  return base::OkStatus();
}

class HeapMemory : public FifoMemory {
 public:
  explicit HeapMemory(size_t bytes) : base_(std::aligned_alloc(kPage, bytes)) {
    RINGO_CHECK(base_ != nullptr, "out of memory allocating shared pages");
  }
  ~HeapMemory() override { std::free(base_); }
  void* base() override { return base_; }

 private:
  void* base_;
};

}  // namespace

size_t HostPages::SegmentBytes(size_t board_bytes) { return kBoardOffset + board_bytes; }

void HostPages::FormatSegment(void* memory, size_t board_bytes, int rank, const ProcessId& process) {
  std::memset(memory, 0, SegmentBytes(board_bytes));  // touch every page now
  auto* c = new (memory) ControlPage();
  c->magic = kPagesMagic;
  c->version = kPagesVersion;
  c->rank = rank;
  c->board_bytes = board_bytes;
  c->process = process;
  new (static_cast<char*>(memory) + kWordsOffset) EngineWords();
}

std::shared_ptr<HostPages> HostPages::Over(int rank, size_t board_bytes,
                                           std::vector<std::shared_ptr<FifoMemory>> segments) {
  return std::shared_ptr<HostPages>(new HostPages(rank, board_bytes, std::move(segments)));
}

std::vector<std::shared_ptr<HostPages>> HostPages::InProcess(int nranks, size_t board_bytes) {
  std::vector<std::shared_ptr<FifoMemory>> segments;
  for (int r = 0; r < nranks; ++r) {
    segments.push_back(std::make_shared<HeapMemory>(SegmentBytes(board_bytes)));
    FormatSegment(segments.back()->base(), board_bytes, r, SelfProcessId());
  }
  std::vector<std::shared_ptr<HostPages>> pages;
  for (int r = 0; r < nranks; ++r) pages.push_back(std::shared_ptr<HostPages>(new HostPages(r, board_bytes, segments)));
  return pages;
}

HostPages::HostPages(int rank, size_t board_bytes, std::vector<std::shared_ptr<FifoMemory>> segments)
    : rank_(rank), board_bytes_(board_bytes), segments_(std::move(segments)) {
  for (auto& s : segments_) {
    char* base = static_cast<char*>(s->base());
    View v{reinterpret_cast<ControlPage*>(base), reinterpret_cast<EngineWords*>(base + kWordsOffset),
           board_bytes > 0 ? base + kBoardOffset : nullptr};
    RINGO_CHECK(v.control->magic == kPagesMagic, "shared pages are not formatted");
    views_.push_back(v);
    rank_waits_.push_back(&v.control->waits);
  }
}

base::StatusOr<std::unique_ptr<HostPages>> HostPages::Connect(Exchange& exchange, uint64_t tag, size_t board_bytes) {
  const int rank = exchange.rank();
  const int nranks = exchange.nranks();
  const std::string mine = PagesName(tag, rank);
  const size_t bytes = SegmentBytes(board_bytes);
  std::vector<std::shared_ptr<FifoMemory>> segments(nranks);
  auto created = CreateShm(mine, bytes);
  if (created.ok()) {
    segments[rank] = *created;
    FormatSegment(segments[rank]->base(), board_bytes, rank, SelfProcessId());
  }
  // Everyone reaches each barrier, so one rank's failure is everyone's error.
  RETURN_IF_ERROR(AgreeOk(exchange, created.status(), "create its shared pages"));
  base::Status st;
  for (int r = 0; r < nranks && st.ok(); ++r) {
    if (r == rank) continue;
    auto opened = OpenShm(PagesName(tag, r), bytes);
    if (opened.ok()) st = CheckSegment((*opened)->base(), board_bytes, r);
    else st = opened.status();
    if (st.ok()) segments[r] = *opened;
  }
  const base::Status agreed = AgreeOk(exchange, st, "open the other ranks' shared pages");
  UnlinkShm(mine);
  RETURN_IF_ERROR(agreed);
  return std::unique_ptr<HostPages>(new HostPages(rank, board_bytes, std::move(segments)));
}

void HostPages::Abort(const base::Status& why, uint64_t seq) {
  ControlPage* me = views_[rank_].control;
  WriteFaultNotice(me->notice, why, rank_, seq);
  me->aborted.store(1, std::memory_order_seq_cst);
}

}  // namespace ringo::transport
