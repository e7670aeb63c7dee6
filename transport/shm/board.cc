#include "transport/shm/board.h"

#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "base/check.h"
#include "base/cpu_relax.h"
#include "transport/shm/segment.h"

namespace ringo::transport {
namespace {

constexpr uint32_t kBoardMagic = 0x42474e52;  // "RNGB"
constexpr uint32_t kBoardVersion = 5;
constexpr size_t kBoardDataOffset = 4096;
static_assert(sizeof(BoardHeader) <= kBoardDataOffset, "header fits before the buffers");
// A crowded waiter that polled this long without its wait being met yields
// anyway, in case the rank it waits for was moved onto its core.
constexpr int64_t kCrowdedPollUs = 50;
// A crowded wait longer than this is no longer a peer a few switches away
// but one with work to do: it goes on as counter.h's waits (which also check
// for peers that exited and for the deadline) and sleeps at once, which
// frees the core for the scheduler to move a busy rank onto.
constexpr int64_t kCrowdedPhaseUs = 2000;

// `want`: bits 0-1 the counter (Board::Kind), bits 2-21 the one rank waited
// for plus one (0: every rank), bits 22-63 the target.
constexpr int kWantRankShift = 2;
constexpr int kWantTargetShift = 22;
constexpr uint64_t kWantRankMask = (uint64_t{1} << (kWantTargetShift - kWantRankShift)) - 1;

uint64_t EncodeWant(uint64_t kind, uint64_t target, int only) {
  return (target << kWantTargetShift) | ((static_cast<uint64_t>(only + 1) & kWantRankMask) << kWantRankShift) | kind;
}

using base::CpuRelax;

}  // namespace

size_t BoardBytes(size_t buffer_bytes) { return kBoardDataOffset + 2 * buffer_bytes; }

Board::Board(std::shared_ptr<HostPages> pages, size_t buffer_bytes)
    : pages_(std::move(pages)), rank_(pages_->rank()), buffer_bytes_(buffer_bytes) {
  RINGO_CHECK(pages_->board_bytes() >= BoardBytes(buffer_bytes), "the shared pages have no room for this board");
  for (int r = 0; r < pages_->nranks(); ++r) {
    char* area = static_cast<char*>(pages_->board(r));
    views_.push_back({reinterpret_cast<BoardHeader*>(area), pages_->control(r), area + kBoardDataOffset});
  }
  auto* h = new (views_[rank_].header) BoardHeader();
  h->magic = kBoardMagic;
  h->version = kBoardVersion;
  h->buffer_bytes = buffer_bytes;
}

base::Status CheckBoards(const HostPages& pages, size_t buffer_bytes) {
  for (int r = 0; r < pages.nranks(); ++r) {
    const auto* h = static_cast<const BoardHeader*>(pages.board(r));
    const std::string whose = "rank " + std::to_string(r) + "'s board";
    if (h == nullptr) return base::Internal("the shared pages have no board");
    if (h->magic != kBoardMagic || h->version != kBoardVersion) {
      return base::RemoteError(whose + " is not a board of this library (magic or version)").WithOrigin(r, whose);
    }
    if (h->buffer_bytes != buffer_bytes) {
      return base::RemoteError(whose + " has " + std::to_string(h->buffer_bytes) + "-byte buffers, expected " +
                               std::to_string(buffer_bytes))
          .WithOrigin(r, whose);
    }
  }
  return base::OkStatus();
}

base::StatusOr<void*> Board::AcquireWrite(uint64_t seq, const WaitContext& ctx) {
  if (seq > 2) RETURN_IF_ERROR(WaitFor(kDone, seq - 2, -1, ctx));
  return static_cast<void*>(Buffer(rank_, seq));
}

void Board::Post(uint64_t seq, const CallSignature& sig) {
  View& me = views_[rank_];
  me.header->sig[seq % 2] = sig;
  me.control->cpu.store(sched_getcpu(), std::memory_order_relaxed);
  Publish(me.header->posted, seq);
}

base::StatusOr<const void*> Board::WaitPosted(int rank, uint64_t seq, const WaitContext& ctx) {
  RETURN_IF_ERROR(WaitFor(kPosted, seq, rank, ctx));
  return static_cast<const void*>(Buffer(rank, seq));
}

base::Status Board::WaitAllPosted(uint64_t seq, const WaitContext& ctx) { return WaitFor(kPosted, seq, -1, ctx); }

namespace {

constexpr size_t kLLDataBytes = 4;  // per 8-byte word

size_t LLWords(size_t bytes) { return (bytes + kLLDataBytes - 1) / kLLDataBytes; }

// The words of the LL format live in shared memory the peer writes while we
// read: 8-byte relaxed atomics, single-copy atomic on every 64-bit target.
inline void StoreWord(uint64_t* w, uint64_t v) { __atomic_store_n(w, v, __ATOMIC_RELAXED); }
inline uint64_t LoadWord(const uint64_t* w) { return __atomic_load_n(w, __ATOMIC_RELAXED); }

}  // namespace

size_t Board::LLPostBytes(size_t bytes) { return (1 + LLWords(bytes)) * sizeof(uint64_t); }

void Board::PostLL(uint64_t seq, const CallSignature& sig, const void* data, size_t bytes) {
  RINGO_CHECK(LLPostBytes(bytes) <= buffer_bytes_, "LL post too large");
  auto* words = reinterpret_cast<uint64_t*>(Buffer(rank_, seq));
  const uint64_t flag = (seq & 0xffffffffu) << 32;
  views_[rank_].header->sig[seq % 2] = sig;
  StoreWord(words, flag | SignatureDigest(sig));
  ++words;
  const auto* src = static_cast<const unsigned char*>(data);
  const size_t full = bytes / kLLDataBytes;
  for (size_t i = 0; i < full; ++i) {
    uint32_t v;
    std::memcpy(&v, src + i * kLLDataBytes, kLLDataBytes);
    StoreWord(words + i, flag | v);
  }
  if (full * kLLDataBytes < bytes) {
    uint32_t v = 0;
    std::memcpy(&v, src + full * kLLDataBytes, bytes - full * kLLDataBytes);
    StoreWord(words + full, flag | v);
  }
  Post(seq, sig);
}

base::Status Board::PostSignatureOnly(uint64_t seq, const CallSignature& sig, const WaitContext& ctx) {
  RETURN_IF_ERROR(AcquireWrite(seq, ctx).status());
  PostLL(seq, sig, nullptr, 0);
  Done(seq);
  return base::OkStatus();
}

base::StatusOr<bool> Board::ReadLL(int rank, uint64_t seq, const CallSignature& expect, void* dst, size_t bytes,
                                  const WaitContext& ctx) {
  const auto* head = reinterpret_cast<const uint64_t*>(Buffer(rank, seq));
  const auto* words = head + 1;
  const uint64_t flag = seq & 0xffffffffu;
  const uint64_t sig_word = (flag << 32) | SignatureDigest(expect);
  const size_t n = LLWords(bytes);
  auto* out = static_cast<uint32_t*>(dst);  // room for whole words (board.h)
  // Copies the words that carry seq, from `from` on; returns the first that does not.
  auto drain = [&](size_t from) {
    size_t i = from;
    for (; i < n; ++i) {
      const uint64_t w = LoadWord(words + i);
      if ((w >> 32) != flag) break;
      out[i] = static_cast<uint32_t>(w);
    }
    return i;
  };
  // The signature word first: a post of another collective is not waited
  // for word by word.
  uint64_t got = LoadWord(head);
  for (int spin = 0; got >> 32 != flag && spin < ctx.spin_count; ++spin) {
    CpuRelax();
    got = LoadWord(head);
  }
  size_t done = 0;
  const bool signed_in = got >> 32 == flag;  // the post has begun to arrive
  if (signed_in) {
    if (expect.seq != 0 && got != sig_word) return PostMatches(rank, seq, expect, ctx);  // the full signature
    done = drain(0);
    for (int spin = 0; done < n && spin < ctx.spin_count; ++spin) {
      CpuRelax();
      done = drain(done);
    }
  }
  if (signed_in && done == n) {
    // The data is here; a peer that aborted after posting must still be
    // heard, as counter.h's waits do.
    if (views_[rank].control->aborted.load(std::memory_order_acquire) != 0) {
      RETURN_IF_ERROR(WaitOne(kPosted, seq, rank, ctx));
    }
    return true;
  }
  RETURN_IF_ERROR(WaitFor(kPosted, seq, rank, ctx));  // crowded or sleeping; the words precede `posted`
  if (expect.seq != 0 && LoadWord(head) != sig_word) return PostMatches(rank, seq, expect, ctx);
  done = drain(done);
  if (done != n) {
    const std::string where = "rank " + std::to_string(ctx.self_rank) + " reading the board of peer rank " +
                              std::to_string(rank) + " (post " + std::to_string(seq) + ")";
    return base::RemoteError(where + ": the peer's post holds fewer than the " + std::to_string(bytes) +
                             " bytes expected").WithOrigin(rank, where + ": a short post");
  }
  return true;
}

base::StatusOr<bool> Board::PostMatches(int rank, uint64_t seq, const CallSignature& expect,
                                        const WaitContext& ctx) {
  if (expect.seq == 0) return true;
  RETURN_IF_ERROR(WaitFor(kPosted, seq, rank, ctx));
  return views_[rank].header->sig[seq % 2] == expect;
}

bool Board::Reached(Kind kind, uint64_t target, int only) const {
  auto value = [&](int r) {
    const BoardHeader* h = views_[r].header;
    return (kind == kPosted ? h->posted : h->done).value.load(std::memory_order_acquire);
  };
  if (only >= 0) return value(only) >= target;
  for (int r = 0; r < nranks(); ++r) {
    if (value(r) < target) return false;
  }
  return true;
}

bool Board::NeighbourCanMove(int cpu) const {
  for (int r = 0; r < nranks(); ++r) {
    const ControlPage* c = views_[r].control;
    if (r == rank_ || c->cpu.load(std::memory_order_relaxed) != cpu) continue;
    const uint64_t want = c->want.load(std::memory_order_relaxed);
    if (want == 0) return true;  // busy outside a wait: it needs the core
    const int only = static_cast<int>((want >> kWantRankShift) & kWantRankMask) - 1;
    if (Reached(static_cast<Kind>(want & 3), want >> kWantTargetShift, only)) return true;
  }
  return false;
}

base::Status Board::WaitOne(Kind kind, uint64_t target, int rank, const WaitContext& ctx) {
  BoardHeader* h = views_[rank].header;
  const ControlPage* c = views_[rank].control;
  const PeerRef peer{&c->aborted,
                     rank,
                     c->process,
                     kind == kPosted ? "reading the board of" : "reusing the board after",
                     static_cast<int64_t>(target),
                     &c->notice};
  return WaitAtLeast(kind == kPosted ? h->posted : h->done, target, peer, ctx).status();
}

base::Status Board::WaitFor(Kind kind, uint64_t target, int only, const WaitContext& ctx) {
  const int first = only < 0 ? 0 : only;
  const int last = only < 0 ? nranks() - 1 : only;
  auto peers_aborted = [&] {
    for (int r = first; r <= last; ++r) {
      if (views_[r].control->aborted.load(std::memory_order_acquire) != 0) return true;
    }
    return false;
  };
  WaitContext rest = ctx;
  ControlPage* me = views_[rank_].control;
  bool wanting = false;
  if (ctx.crowded && !Reached(kind, target, only)) {
    int cpu = sched_getcpu();
    me->cpu.store(cpu, std::memory_order_relaxed);
    me->want.store(EncodeWant(kind, target, only), std::memory_order_seq_cst);
    wanting = true;
    using Clock = std::chrono::steady_clock;
    const auto started = Clock::now();
    auto polled_since = started;
    int yields = 0;
    for (uint32_t i = 1;; ++i) {
      if (Reached(kind, target, only)) break;
      bool yield = NeighbourCanMove(cpu);
      if ((i & 63) == 0 || yield) {
        if ((ctx.local_abort != nullptr && ctx.local_abort->load(std::memory_order_relaxed)) || peers_aborted()) break;
        const auto now = Clock::now();
        if (now - started >= std::chrono::microseconds(kCrowdedPhaseUs)) {
          rest.spin_count = 0;
          rest.yield_count = 0;
          break;
        }
        if (now - polled_since >= std::chrono::microseconds(kCrowdedPollUs)) yield = true;
      }
      if (!yield) {
        CpuRelax();
        continue;
      }
      // What let the neighbour move may have let this rank move too: then
      // keep the core (a switch costs more than the rest of the operation).
      if (Reached(kind, target, only)) break;
      if (++yields > ctx.yield_count) {  // a long wait: sleep below
        rest.spin_count = 0;
        rest.yield_count = 0;
        break;
      }
      sched_yield();
      cpu = sched_getcpu();
      me->cpu.store(cpu, std::memory_order_relaxed);
      polled_since = Clock::now();
    }
  }
  // counter.h's waits: they return at once where the counter is there (but
  // still report a peer that aborted), and sleep where it is not. `want`
  // stays published meanwhile: a sleeping rank does not need the core.
  base::Status st;
  for (int r = first; r <= last && st.ok(); ++r) st = WaitOne(kind, target, r, rest);
  if (wanting) me->want.store(0, std::memory_order_relaxed);
  return st;
}

void Board::Done(uint64_t seq) { Publish(views_[rank_].header->done, seq); }

void Board::WakeAll() {
  for (View& v : views_) {  // our own waits sleep on the peers' counters
    Wake(v.header->posted);
    Wake(v.header->done);
  }
}

}  // namespace ringo::transport
