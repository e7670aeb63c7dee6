// A symbolic simulator of the ring schedule for kernels/schedule_test.cc
// (test-only). Every rank gets symbolic buffers: an input element is "rank
// r's contribution to element e", and a reduction adds contributions, so the
// end state says exactly who contributed to what, how often, and whether the
// final operation (Post: the integer avg division) ran exactly once. Every
// rank's steps run through per-edge FIFO queues of bounded depth (a send of
// position p is received by position p+1 at its matching receive), and a
// receive checks that the sender's span equals the receiver's in offset and
// count. Uses nothing but schedule.h.
#ifndef RINGO_KERNELS_SCHEDULE_SIM_H_
#define RINGO_KERNELS_SCHEDULE_SIM_H_

#include <cstdint>
#include <deque>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/schedule.h"

namespace ringo::kernels::sim {

inline constexpr int kFifoSlots = 8;  // transport::kSlots: the depth of every ring edge

inline const char* CollName(Coll c) {
  switch (c) {
    case Coll::kAllReduce: return "AllReduce";
    case Coll::kReduceScatter: return "ReduceScatter";
    case Coll::kAllGather: return "AllGather";
    case Coll::kBroadcast: return "Broadcast";
    case Coll::kReduce: return "Reduce";
  }
  return "?";
}

inline constexpr Coll kAllColls[] = {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather,
                                     Coll::kBroadcast, Coll::kReduce};

inline bool IsReduction(Coll c) { return c == Coll::kAllReduce || c == Coll::kReduceScatter || c == Coll::kReduce; }
inline bool ByRank(Coll c) { return c == Coll::kReduceScatter || c == Coll::kAllGather; }
inline bool Rooted(Coll c) { return c == Coll::kBroadcast || c == Coll::kReduce; }

// One symbolic element: which ranks contributed (one byte per rank, so a
// duplicate shows as a 2), which element it is (an index into the
// collective's full index space), and how many times Post was applied.
struct Val {
  uint64_t contrib = 0;
  int64_t elem = -1;
  int posts = 0;
};

inline uint64_t Contribution(int rank) { return uint64_t{1} << (8 * rank); }
inline uint64_t AllContributions(int n) {
  uint64_t all = 0;
  for (int r = 0; r < n; ++r) all += Contribution(r);
  return all;
}

inline std::string Hex(uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

struct Case {
  Coll coll = Coll::kAllReduce;
  int nranks = 1;
  int64_t count = 0;  // elements (AllReduce, Broadcast, Reduce) or elements per rank (RS, AG)
  int nchannels = 1;
  int64_t align = 1;
  int64_t slice = 1;
  int root = 0;            // a rank (Broadcast, Reduce)
  std::vector<int> order;  // ring position -> rank
  int slots = kFifoSlots;
  bool in_place = false;  // check the read-after-write hazards of in-place buffers
  std::vector<uint32_t> split;  // cumulative channel weights (nchannels + 1), or empty: equal parts

  std::string Describe() const {
    std::ostringstream s;
    s << CollName(coll) << " nranks=" << nranks << " count=" << count << " nchannels=" << nchannels
      << " align=" << align << " slice=" << slice;
    if (Rooted(coll)) s << " root=" << root;
    s << " order=";
    for (int r : order) s << r;
    s << " slots=" << slots;
    if (!split.empty()) {
      s << " split=";
      for (uint32_t w : split) s << w << ",";
    }
    return s.str();
  }
};

// Records a problem and says the step did not run.
inline bool Fail(std::string* err, const std::string& message) {
  *err = message;
  return false;
}

class Simulator {
 public:
  explicit Simulator(const Case& c) : k_(c), n_(c.nranks) {
    for (int p = 0; p < n_; ++p) {
      if (k_.order[p] == k_.root) root_pos_ = p;
    }
    const int64_t in_size = k_.coll == Coll::kReduceScatter ? n_ * k_.count : k_.count;
    const int64_t out_size = k_.coll == Coll::kAllGather ? n_ * k_.count : k_.count;
    in_.resize(n_);
    out_.assign(n_, std::vector<Val>(out_size));
    reads_.assign(n_, std::vector<int>(in_size, 0));
    writes_.assign(n_, std::vector<int>(out_size, 0));
    write_time_.assign(n_, std::vector<int64_t>(out_size, -1));
    time_.assign(n_, 0);
    for (int r = 0; r < n_; ++r) {
      in_[r].resize(in_size);
      for (int64_t i = 0; i < in_size; ++i) {
        const int64_t elem = k_.coll == Coll::kAllGather ? r * k_.count + i : i;
        in_[r][i] = Val{Contribution(r), elem, 0};
      }
    }
  }

  // Runs every channel; returns "" or the first problem found.
  std::string Run() {
    std::string err = CheckChannelRanges();
    for (int c = 0; c < k_.nchannels && err.empty(); ++c) err = RunChannel(c);
    if (err.empty()) err = CheckResults();
    return err;
  }

 private:
  struct Msg {
    Span span;
    std::vector<Val> data;
  };

  Range Channel(int c) const {
    return k_.split.empty() ? ChannelRange(k_.count, k_.nchannels, c, k_.align)
                            : WeightedChannelRange(k_.count, k_.split.data(), k_.nchannels, c, k_.align);
  }

  // The channels split [0, count) into contiguous parts with aligned starts.
  std::string CheckChannelRanges() {
    int64_t next = 0;
    for (int c = 0; c < k_.nchannels; ++c) {
      const Range r = Channel(c);
      if (r.lo != next) return "channel " + std::to_string(c) + " starts at " + std::to_string(r.lo) +
                                 ", the previous one ended at " + std::to_string(next);
      if (r.hi < r.lo) return "channel " + std::to_string(c) + " has a negative range";
      if (r.hi > r.lo && r.lo % k_.align != 0) {
        return "channel " + std::to_string(c) + " starts at " + std::to_string(r.lo) + ", not a multiple of " +
               std::to_string(k_.align);
      }
      next = r.hi;
    }
    if (next != k_.count) return "the channels cover [0, " + std::to_string(next) + ") of " + std::to_string(k_.count);
    return "";
  }

  std::string RunChannel(int channel) {
    range_ = Channel(channel);
    steps_ = NumSteps(k_.coll, n_);
    loops_ = NumLoops(k_.coll, n_, range_, k_.slice);
    const int64_t size = range_.hi - range_.lo;
    // NumLoops is the fewest loops that cover the range.
    const int64_t per_loop = k_.coll == Coll::kAllReduce ? k_.slice * n_ : k_.slice;
    if (loops_ * per_loop < size || (loops_ > 0 && (loops_ - 1) * per_loop >= size) || (size == 0 && loops_ != 0)) {
      return "NumLoops=" + std::to_string(loops_) + " for " + std::to_string(size) + " elements, " +
             std::to_string(per_loop) + " per loop";
    }
    queues_.assign(n_, std::deque<Msg>());
    sent_.assign(n_, 0);
    next_.assign(n_, 0);
    const int64_t total = loops_ * steps_;
    while (true) {
      bool progressed = false, done = true;
      for (int p = 0; p < n_; ++p) {
        // Run as far as this rank can go; interleaving does not change the
        // result, only whether the ring deadlocks.
        while (next_[p] < total) {
          std::string err;
          if (!TryStep(channel, p, &err)) {
            if (!err.empty()) return err;
            break;
          }
          progressed = true;
        }
        done = done && next_[p] == total;
      }
      if (done) break;
      if (!progressed) {
        std::ostringstream s;
        s << "deadlock in channel " << channel << ": positions at step";
        for (int p = 0; p < n_; ++p) s << " " << next_[p] << "/" << total;
        return s.str();
      }
    }
    for (int p = 0; p < n_; ++p) {
      if (!queues_[p].empty()) {
        return "channel " + std::to_string(channel) + ": " + std::to_string(queues_[p].size()) +
               " chunk(s) sent by position " + std::to_string(p) + " were never received";
      }
      // Transfers per edge.
      int64_t want = static_cast<int64_t>(NumTransfers(k_.coll, n_)) * loops_;
      if (Rooted(k_.coll)) {
        // The edge into the root (Broadcast) or out of it (Reduce) carries nothing.
        const int idle = k_.coll == Coll::kBroadcast ? Mod(root_pos_ - 1, n_) : root_pos_;
        if (p == idle) want = 0;
      }
      if (sent_[p] != want) {
        return "channel " + std::to_string(channel) + ": edge from position " + std::to_string(p) + " carried " +
               std::to_string(sent_[p]) + " chunks, expected " + std::to_string(want) + " (NumTransfers " +
               std::to_string(NumTransfers(k_.coll, n_)) + " x " + std::to_string(loops_) + " loops)";
      }
    }
    return "";
  }

  // Executes position p's next step if its inputs are ready and its output
  // slot is free. False with *err empty: not ready yet.
  bool TryStep(int channel, int p, std::string* err) {
    const int64_t g = next_[p];
    const int64_t loop = g / steps_;
    const int s = static_cast<int>(g % steps_);
    const int rank = k_.order[p];
    const Step st = RingStep(k_.coll, n_, p, root_pos_, s);
    auto where = [&] {
      return "position " + std::to_string(p) + " (rank " + std::to_string(rank) + ") channel " +
             std::to_string(channel) + " loop " + std::to_string(loop) + " step " + std::to_string(s);
    };
    if (n_ == 1 && st.prim != Prim::kCopy) return Fail(err, where() + ": one rank must copy");
    if (n_ > 1 && st.prim == Prim::kCopy) return Fail(err, where() + ": kCopy with several ranks");
    if (st.chunk < 0 || st.chunk >= n_ || (Rooted(k_.coll) && st.chunk != 0)) {
      return Fail(err, where() + ": chunk " + std::to_string(st.chunk));
    }
    const int block = ByRank(k_.coll) ? k_.order[st.chunk] : st.chunk;
    const Span span = ChunkSpan(k_.coll, n_, range_, k_.slice, loop, block, k_.count, k_.align);

    // The span lies inside this channel's part of the buffer it indexes.
    const int64_t base = ByRank(k_.coll) ? block * k_.count : 0;
    if (span.count < 0 || span.count > k_.slice) {
      return Fail(err, where() + ": span of " + std::to_string(span.count) + " elements, slice " +
                    std::to_string(k_.slice));
    }
    if (span.offset < base + range_.lo || span.offset + span.count > base + range_.hi) {
      return Fail(err, where() + ": span [" + std::to_string(span.offset) + ", +" + std::to_string(span.count) +
                    ") outside the channel's [" + std::to_string(base + range_.lo) + ", " +
                    std::to_string(base + range_.hi) + ")");
    }
    if (k_.slice % k_.align == 0 && span.count > 0 && (span.offset - base) % k_.align != 0) {
      return Fail(err, where() + ": chunk starts at " + std::to_string(span.offset - base) + ", not aligned to " +
                    std::to_string(k_.align));
    }
    if (!ByRank(k_.coll) && !Rooted(k_.coll) && span.count > 0 && n_ > 1) {
      // AllReduce: the chunk of position c lies at c * chunk in its loop.
      const int64_t chunk = AllReduceChunk(n_, range_, k_.slice, loop, k_.align);
      const int64_t loop_lo = range_.lo + loop * k_.slice * n_;
      if (span.offset != loop_lo + st.chunk * chunk) {
        return Fail(err, where() + ": AllReduce chunk " + std::to_string(st.chunk) + " at " +
                      std::to_string(span.offset));
      }
    }

    // Ready?
    std::deque<Msg>& in_q = queues_[Mod(p - 1, n_)];
    std::deque<Msg>& out_q = queues_[p];
    if (PrimRecvs(st.prim) && in_q.empty()) return false;
    if (PrimSends(st.prim) && static_cast<int>(out_q.size()) >= k_.slots) return false;

    std::vector<Val> data(static_cast<size_t>(span.count));
    Msg msg;
    if (PrimRecvs(st.prim)) {
      msg = std::move(in_q.front());
      in_q.pop_front();
      if (msg.span.offset != span.offset || msg.span.count != span.count) {
        return Fail(err, where() + ": received span [" + std::to_string(msg.span.offset) + ", +" +
                      std::to_string(msg.span.count) + ") but expected [" + std::to_string(span.offset) + ", +" +
                      std::to_string(span.count) + ")");
      }
    }
    const int64_t now = time_[rank]++;
    for (int64_t i = 0; i < span.count; ++i) {
      const int64_t elem = span.offset + i;
      Val v;
      if (PrimRecvs(st.prim)) {
        v = msg.data[i];
        if (v.elem != elem) {
          return Fail(err, where() + ": received element " + std::to_string(v.elem) + " at " + std::to_string(elem));
        }
      }
      if (PrimReads(st.prim)) {
        int64_t j = span.offset + i;  // the input index
        if (k_.coll == Coll::kAllGather) j -= rank * k_.count;
        if (j < 0 || j >= static_cast<int64_t>(in_[rank].size())) {
          return Fail(err, where() + ": reads input " + std::to_string(j) + " outside its buffer");
        }
        if (k_.in_place) {
          const int64_t o = AliasedOutput(rank, j);
          if (o >= 0 && write_time_[rank][o] >= 0 && write_time_[rank][o] < now) {
            return Fail(err, where() + ": in place, input " + std::to_string(j) + " is read after output " +
                          std::to_string(o) + " overwrote it");
          }
        }
        ++reads_[rank][j];
        const Val& src = in_[rank][j];
        if (PrimRecvs(st.prim)) {
          if (v.posts != 0) return Fail(err, where() + ": reduces into a value that was already final");
          v.contrib += src.contrib;
        } else {
          v = src;
        }
      }
      if (PrimFinal(st.prim)) ++v.posts;
      if (PrimWrites(st.prim)) {
        int64_t o = span.offset + i;  // the output index
        if (k_.coll == Coll::kReduceScatter) o -= rank * k_.count;
        if (o < 0 || o >= static_cast<int64_t>(out_[rank].size())) {
          return Fail(err, where() + ": writes output " + std::to_string(o) + " outside its buffer");
        }
        out_[rank][o] = v;
        ++writes_[rank][o];
        write_time_[rank][o] = now;
      }
      data[i] = v;
    }
    if (PrimSends(st.prim)) {
      out_q.push_back(Msg{span, std::move(data)});
      ++sent_[p];
    }
    ++next_[p];
    return true;
  }

  // The output element an input element shares memory with when the
  // collective runs in place (NCCL's conventions), or -1.
  int64_t AliasedOutput(int rank, int64_t j) const {
    switch (k_.coll) {
      case Coll::kReduceScatter: {  // recvbuff = sendbuff + rank * count
        const int64_t o = j - rank * k_.count;
        return o >= 0 && o < k_.count ? o : -1;
      }
      case Coll::kAllGather:  // sendbuff = recvbuff + rank * count
        return rank * k_.count + j;
      default:
        return j;
    }
  }

  std::string CheckResults() const {
    const uint64_t all = AllContributions(n_);
    const int want_posts = IsReduction(k_.coll) && n_ > 1 ? 1 : 0;
    for (int r = 0; r < n_; ++r) {
      auto at = [&](int64_t i) { return "rank " + std::to_string(r) + " output " + std::to_string(i) + ": "; };
      const bool writes_output = k_.coll != Coll::kReduce || r == k_.root;
      for (int64_t i = 0; i < static_cast<int64_t>(out_[r].size()); ++i) {
        const Val& v = out_[r][i];
        if (writes_[r][i] != (writes_output ? 1 : 0)) {
          return at(i) + "written " + std::to_string(writes_[r][i]) + " times";
        }
        if (!writes_output) continue;
        Val want;
        switch (k_.coll) {
          case Coll::kAllReduce:
          case Coll::kReduce: want = Val{all, i, want_posts}; break;
          case Coll::kReduceScatter: want = Val{all, r * k_.count + i, want_posts}; break;
          case Coll::kAllGather: want = Val{Contribution(static_cast<int>(i / k_.count)), i, 0}; break;
          case Coll::kBroadcast: want = Val{Contribution(k_.root), i, 0}; break;
        }
        if (v.elem != want.elem) {
          return at(i) + "holds element " + std::to_string(v.elem) + ", expected " + std::to_string(want.elem);
        }
        if (v.contrib != want.contrib) {
          return at(i) + "contributions " + Hex(v.contrib) + " (one byte per rank), expected " + Hex(want.contrib);
        }
        if (v.posts != want.posts) {
          return at(i) + "final operation applied " + std::to_string(v.posts) + " times, expected " +
                 std::to_string(want.posts);
        }
      }
      // Inputs: every element read exactly once, except on Broadcast's non-roots.
      const int want_reads = k_.coll == Coll::kBroadcast && r != k_.root ? 0 : 1;
      for (int64_t j = 0; j < static_cast<int64_t>(reads_[r].size()); ++j) {
        if (reads_[r][j] != want_reads) {
          return "rank " + std::to_string(r) + " input " + std::to_string(j) + " read " +
                 std::to_string(reads_[r][j]) + " times, expected " + std::to_string(want_reads);
        }
      }
    }
    return "";
  }

  const Case& k_;
  const int n_;
  int root_pos_ = 0;
  std::vector<std::vector<Val>> in_, out_;
  std::vector<std::vector<int>> reads_, writes_;
  std::vector<std::vector<int64_t>> write_time_;
  std::vector<int64_t> time_;  // per rank: primitives executed so far
  // Per channel.
  Range range_{0, 0};
  int steps_ = 0;
  int64_t loops_ = 0;
  std::vector<std::deque<Msg>> queues_;  // queues_[p]: the edge from position p to p+1
  std::vector<int64_t> sent_;
  std::vector<int64_t> next_;
};

inline std::vector<std::vector<int>> Orders(int n, bool all_kinds) {
  std::vector<int> id(n);
  std::iota(id.begin(), id.end(), 0);
  std::vector<std::vector<int>> out = {id};
  if (!all_kinds || n < 3) return out;
  std::vector<int> rev(id.rbegin(), id.rend());
  out.push_back(rev);
  // A fixed shuffle: positions 0, 2, 4, ..., then 1, 3, 5, ...
  std::vector<int> shuffled;
  for (int r = 0; r < n; r += 2) shuffled.push_back(r);
  for (int r = 1; r < n; r += 2) shuffled.push_back(r);
  if (shuffled != id) out.push_back(shuffled);
  return out;
}

// Every root, or (for the larger sweeps) the first, a middle and the last.
inline std::vector<int> Roots(Coll coll, int n, bool every = true) {
  if (!Rooted(coll)) return {0};
  std::vector<int> roots(n);
  std::iota(roots.begin(), roots.end(), 0);
  if (every || n <= 3) return roots;
  return {0, n / 2, n - 1};
}

// Runs one case and reports the first problem, with the case spelled out.
inline ::testing::AssertionResult Simulate(const Case& c) {
  Simulator sim(c);
  const std::string err = sim.Run();
  if (err.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << c.Describe() << ": " << err;
}

// Slices for each alignment: multiples of it (the executor's slices are
// slot_bytes / size with slot_bytes a multiple of 64 = align * size), and for
// alignment 1 a few odd ones.
inline std::vector<int64_t> SlicesFor(int64_t align) {
  if (align == 1) return {1, 2, 3, 5, 8};
  if (align == 2) return {2, 4, 6};
  return {align, 2 * align, 3 * align};
}

}  // namespace ringo::kernels::sim

#endif  // RINGO_KERNELS_SCHEDULE_SIM_H_
