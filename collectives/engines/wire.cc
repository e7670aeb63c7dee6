#include "collectives/engines/wire.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <cstring>
#include <string>

#include "base/cuda.h"
#include "base/device/half.h"
#include "base/logging.h"
#include "collectives/engines/doubling.h"
#include "topology/cost_model.h"

namespace ringo::collectives {

using base::DataType;
using base::RedOp;
using base::Status;
using kernels::Coll;
using kernels::Wire;

namespace {

// Scratch for one round's shard piece of every rank: at most 2 MiB of fp32
// values over all shards, at least 4096 values (and whole blocks) a shard.
constexpr int64_t kRoundBytes = int64_t{2} << 20;

// `n` values of `dtype` at `src` into fp32, times `scale` (avg's 1/N).
void ToFloat(DataType dtype, const void* src, int64_t n, float scale, float* dst) {
  switch (dtype) {
    case DataType::kFloat32: {
      const float* s = static_cast<const float*>(src);
      if (scale == 1.0f) {
        std::memcpy(dst, s, static_cast<size_t>(n) * 4);
      } else {
        for (int64_t i = 0; i < n; ++i) dst[i] = s[i] * scale;
      }
      return;
    }
    case DataType::kBFloat16:
    case DataType::kFloat16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      const bool bf = dtype == DataType::kBFloat16;
      for (int64_t i = 0; i < n; ++i) {
        const float v = bf ? base::BFloat16BitsToFloat(s[i]) : base::HalfBitsToFloat(s[i]);
        dst[i] = scale == 1.0f ? v : v * scale;
      }
      return;
    }
    default: return;
  }
}

// `n` values of `dtype` at `src` as fp32 times `scale`: `src` itself where
// they are fp32 already and the scale is 1, else converted into `scratch`.
const float* AsFloat(DataType dtype, const void* src, int64_t n, float scale, float* scratch) {
  if (dtype == DataType::kFloat32 && scale == 1.0f) return static_cast<const float*>(src);
  ToFloat(dtype, src, n, scale, scratch);
  return scratch;
}

// fp32 values into `dtype` at `dst`, rounded to nearest even.
void FromFloat(DataType dtype, const float* src, int64_t n, void* dst) {
  switch (dtype) {
    case DataType::kFloat32: std::memmove(dst, src, static_cast<size_t>(n) * 4); return;
    case DataType::kBFloat16:
    case DataType::kFloat16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      const bool bf = dtype == DataType::kBFloat16;
      for (int64_t i = 0; i < n; ++i) d[i] = bf ? base::FloatToBFloat16Bits(src[i]) : base::FloatToHalfBits(src[i]);
      return;
    }
    default: return;
  }
}

using Shard = WireShard;

}  // namespace

WireShard WireShardOf(const kernels::CollArgs& args, int q, int nranks) {
  if (args.coll == Coll::kReduceScatter) return {q * args.count, args.count};
  // All-reduce: equal shards in whole blocks, the last ones shorter or empty.
  const int64_t per = (args.count + nranks - 1) / nranks;
  const int64_t size = (per + kernels::kWireBlock - 1) / kernels::kWireBlock * kernels::kWireBlock;
  const int64_t begin = std::min(args.count, q * size);
  return {begin, std::min(args.count, begin + size) - begin};
}

void WireRounds::Cut(const kernels::CollArgs& args, int nranks, int64_t piece_elems) {
  piece = piece_elems;
  shards.resize(static_cast<size_t>(nranks));
  int64_t longest = 0;
  for (int q = 0; q < nranks; ++q) {
    shards[q] = WireShardOf(args, q, nranks);
    longest = std::max(longest, shards[q].len);
  }
  rounds = (longest + piece - 1) / piece;
}

bool WireApplies(const kernels::CollArgs& args) {
  const bool coll = args.coll == Coll::kAllReduce || args.coll == Coll::kReduceScatter;
  const bool dtype = args.dtype == DataType::kFloat32 || args.dtype == DataType::kBFloat16 ||
                     args.dtype == DataType::kFloat16;
  const bool op = args.op == RedOp::kSum || args.op == RedOp::kAvg || args.op == RedOp::kPreMulSum;
  return coll && dtype && op;
}

float WireInputScale(const kernels::CollArgs& args, int nranks) {
  if (args.op == RedOp::kAvg) return 1.0f / static_cast<float>(nranks);
  if (args.op != RedOp::kPreMulSum) return 1.0f;
  switch (args.dtype) {
    case DataType::kFloat32: {
      const auto bits = static_cast<uint32_t>(args.scalar);
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case DataType::kBFloat16: return base::BFloat16BitsToFloat(static_cast<uint16_t>(args.scalar));
    case DataType::kFloat16: return base::HalfBitsToFloat(static_cast<uint16_t>(args.scalar));
    default: return 1.0f;
  }
}

WireEngine::WireEngine(const EngineSetup& setup, PointToPoint* p2p)
    : rank_(setup.rank),
      nranks_(setup.nranks),
      p2p_(p2p),
      shared_(setup.settings.shared),
      net_(static_cast<size_t>(setup.nranks), 0) {
  const std::vector<bool>& net = setup.connector->spec().net;
  for (int r = 0; r < nranks_ && r < static_cast<int>(net.size()); ++r) net_[r] = net[r] ? 1 : 0;
}

bool WireLeavesToDoubling(const kernels::CollArgs& a, int wire, int nranks, const SharedSettings& s) {
  if (!DoublingRuns(s) || a.coll != Coll::kAllReduce || a.dtype != DataType::kFloat32 || a.count <= 0) return false;
  if (a.op == RedOp::kPreMulSum && a.scalar_ptr != nullptr) return false;  // doubling leaves it to the ring
  const double bytes = 4.0 * static_cast<double>(a.count);
  if (bytes > topology::kDoublingMaxBytes) return false;
  const double fraction = static_cast<double>(kernels::WireBytes(static_cast<Wire>(wire), a.count)) / bytes;
  return s.algorithm == Algorithm::kDoubling || topology::WireYieldsToDoubling(nranks, bytes, fraction);
}

bool WireEngine::Takes(Call& call) {
  return call.wire != 0 && WireApplies(call.args) && !WireLeavesToDoubling(call.args, call.wire, nranks_, shared_);
}

int64_t WireEngine::PieceElems(int nranks) {
  int64_t piece = kRoundBytes / 4 / std::max(1, nranks);
  piece = std::max<int64_t>(piece, 4096);
  return piece / kernels::kWireBlock * kernels::kWireBlock;
}

std::string WireEdgesSaid(int rank, const std::vector<char>& net, Wire wire) {
  std::string across, local;
  for (int r = 0; r < static_cast<int>(net.size()); ++r) {
    if (r == rank) continue;
    std::string& list = net[r] ? across : local;
    list += (list.empty() ? "" : ",") + std::to_string(r);
  }
  const char* name = kernels::WireName(wire);
  return std::string("contributions to ranks ") + (across.empty() ? "none" : across) + " (network) in " + name +
         ", to ranks " + (local.empty() ? "none" : local) + " (this host) in fp32; every summed shard sent once in " +
         name;
}

void WireEngine::LogOnce(Wire wire) {
  if (logged_) return;
  logged_ = true;
  RINGO_LOG(INFO) << "rank " << rank_ << ": wire " << kernels::WireName(wire)
                  << ": fp32/bf16/fp16 sum, avg and premul-sum all-reduce and reduce-scatter by direct exchange; "
                  << WireEdgesSaid(rank_, net_, wire);
}

// The exchanges run on a thread of the engine's own, so that this rank's
// encoding and decoding of the neighbouring rounds overlaps them.
WireEngine::Exchanger::Exchanger(PointToPoint* p2p) : p2p_(p2p), thread_([this] { Loop(); }) {}

WireEngine::Exchanger::~Exchanger() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void WireEngine::Exchanger::Start(const std::vector<std::vector<P2pOp>>* ops, P2pCall* call) {
  std::lock_guard<std::mutex> lock(mu_);
  batches_ = ops;
  call_ = call;
  busy_ = true;
  cv_.notify_all();
}

Status WireEngine::Exchanger::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !busy_; });
  return status_;
}

void WireEngine::Exchanger::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || (busy_ && batches_ != nullptr); });
    if (stop_) return;
    const std::vector<std::vector<P2pOp>>* batches = batches_;
    P2pCall* call = call_;
    batches_ = nullptr;
    lock.unlock();
    Status st;
    for (const std::vector<P2pOp>& batch : *batches) {
      if (!batch.empty()) st = p2p_->Run(batch, *call);
      if (!st.ok()) break;
    }
    lock.lock();
    status_ = st;
    busy_ = false;
    cv_.notify_all();
  }
}

Status WireEngine::Run(Call& call) {
  kernels::CollArgs args = call.args;
  const Wire wire = static_cast<Wire>(call.wire);
  LogOnce(wire);
  RETURN_IF_ERROR(ReadScalarNow(&args));
  const size_t esize = base::DataTypeSize(args.dtype);
  const float scale = WireInputScale(args, nranks_);
  const bool all_reduce = args.coll == Coll::kAllReduce;
  const char* send = static_cast<const char*>(args.send);
  char* recv = static_cast<char*>(args.recv);
  cut_.Cut(args, nranks_, PieceElems(nranks_));
  const int64_t piece = cut_.piece;
  const int64_t rounds = cut_.rounds;
  const std::vector<WireShard>& shards = cut_.shards;
  const Shard mine = shards[rank_];
  auto len_of = [&](int q, int64_t j) { return cut_.Len(q, j); };
  // The output of shard q's element i: all-reduce writes where it read;
  // reduce-scatter writes its own shard from the start of recv.
  auto out_at = [&](int q, int64_t i) -> char* {
    return recv + static_cast<size_t>((all_reduce ? shards[q].begin : 0) + i) * esize;
  };
  acc_.resize(static_cast<size_t>(piece));
  tmp_.resize(static_cast<size_t>(piece));
  for (Buffers& b : sets_) {
    b.out.resize(static_cast<size_t>(nranks_));
    b.in.resize(static_cast<size_t>(nranks_));
    b.gathered.resize(static_cast<size_t>(nranks_));
  }
  P2pCall p2p_call;
  p2p_call.wait = call.wait;
  p2p_call.collective = true;

  // Round j's stages, on buffer set j % 3 (three rounds are in flight: one
  // encoded, one exchanging, one decoded):
  //   Encode: each peer's piece of its shard, for the reduce-scatter;
  //   exchange j: that reduce-scatter, and round j - 1's all-gather;
  //   Sum: this rank's piece summed in fp32, rounded once (all-reduce);
  //   Spread: round j's gathered pieces into the output.
  auto encode = [&](int64_t j) {
    Buffers& b = sets_[j % 3];
    for (int q = 0; q < nranks_; ++q) {
      const int64_t n = len_of(q, j);
      if (q == rank_ || n == 0) continue;
      const Wire w = net_[q] ? wire : Wire::kNone;
      const float* values =
          AsFloat(args.dtype, send + static_cast<size_t>(shards[q].begin + j * piece) * esize, n, scale, tmp_.data());
      b.out[q].resize(static_cast<size_t>(kernels::WireBytes(w, n)));
      kernels::WireEncode(w, values, n, b.out[q].data());
    }
  };
  // Exchange j in N - 1 steps: at step s this rank sends to rank + s and
  // receives from rank - s (round j - 1's all-gather first, then round j's
  // reduce-scatter), so each rank has one flow out and one in at a time, as
  // on a ring, instead of N - 1 flows sharing its link; both ends of a pair
  // post their messages in the same order, so they match in order.
  auto exchange_ops = [&](int64_t j) {
    steps_.resize(static_cast<size_t>(nranks_ - 1));
    for (int s = 1; s < nranks_; ++s) {
      std::vector<P2pOp>& ops = steps_[s - 1];
      ops.clear();
      const int to = (rank_ + s) % nranks_, from = (rank_ + nranks_ - s) % nranks_;
      if (all_reduce && j >= 1) {
        Buffers& g = sets_[(j - 1) % 3];
        if (len_of(rank_, j - 1) > 0) ops.push_back({true, to, g.result.data(), nullptr, g.result.size()});
        const int64_t n = len_of(from, j - 1);
        if (n > 0) {
          g.gathered[from].resize(static_cast<size_t>(kernels::WireBytes(wire, n)));
          ops.push_back({false, from, nullptr, g.gathered[from].data(), g.gathered[from].size()});
        }
      }
      if (j < rounds) {
        Buffers& b = sets_[j % 3];
        if (len_of(to, j) > 0) ops.push_back({true, to, b.out[to].data(), nullptr, b.out[to].size()});
        const int64_t n_mine = len_of(rank_, j);
        if (n_mine > 0) {
          const Wire w = net_[from] ? wire : Wire::kNone;
          b.in[from].resize(static_cast<size_t>(kernels::WireBytes(w, n_mine)));
          ops.push_back({false, from, nullptr, b.in[from].data(), b.in[from].size()});
        }
      }
    }
  };
  auto sum = [&](int64_t j) {
    Buffers& b = sets_[j % 3];
    const int64_t n_mine = len_of(rank_, j);
    if (n_mine == 0) return;
    // This rank's own contribution enters as fp32 bytes (the wire none).
    const float* own =
        AsFloat(args.dtype, send + static_cast<size_t>(mine.begin + j * piece) * esize, n_mine, scale, tmp_.data());
    for (int r = 0; r < nranks_; ++r) {
      const bool self = r == rank_;
      const Wire w = !self && net_[r] ? wire : Wire::kNone;
      const uint8_t* bytes = self ? reinterpret_cast<const uint8_t*>(own) : b.in[r].data();
      if (r == 0) {
        kernels::WireDecode(w, bytes, n_mine, acc_.data());
      } else {
        kernels::WireDecodeAdd(w, bytes, n_mine, acc_.data());
      }
    }
    if (!all_reduce) {
      FromFloat(args.dtype, acc_.data(), n_mine, out_at(rank_, j * piece));
      return;
    }
    b.result.resize(static_cast<size_t>(kernels::WireBytes(wire, n_mine)));
    kernels::WireEncode(wire, acc_.data(), n_mine, b.result.data());
  };
  // `scratch`: a float buffer of this thread's (spread runs beside encode).
  auto spread = [&](int64_t j, float* scratch) {
    Buffers& b = sets_[j % 3];
    for (int q = 0; q < nranks_; ++q) {
      const int64_t n = len_of(q, j);
      if (n == 0) continue;
      kernels::WireDecode(wire, q == rank_ ? b.result.data() : b.gathered[q].data(), n, scratch);
      FromFloat(args.dtype, scratch, n, out_at(q, j * piece));
    }
  };

  // Exchange j runs on the exchanger while this thread encodes round j + 1
  // and spreads round j - 2 (gathered by exchange j - 1). In place is safe:
  // round j - 2's output is written after every read of its input. One
  // round has nothing to overlap: its exchanges run on this thread.
  spread_.resize(static_cast<size_t>(piece));
  const bool overlap = rounds > 1;
  if (overlap && exchanger_ == nullptr) exchanger_ = std::make_unique<Exchanger>(p2p_);
  if (overlap) {
    // An exchange of rounds this size lasts milliseconds: its waits sleep
    // at once rather than spin on a core the encoding needs.
    p2p_call.wait.spin_count = 0;
    p2p_call.wait.yield_count = 0;
  }
  if (rounds > 0) encode(0);
  const int64_t last = all_reduce ? rounds : rounds - 1;  // the last exchange: round rounds - 1's all-gather
  for (int64_t j = 0; j <= last; ++j) {
    exchange_ops(j);
    Status st;
    if (overlap) {
      exchanger_->Start(&steps_, &p2p_call);
      if (j + 1 < rounds) encode(j + 1);
      if (all_reduce && j >= 2) spread(j - 2, spread_.data());
      st = exchanger_->Wait();
    } else {
      for (const std::vector<P2pOp>& ops : steps_) {
        if (!ops.empty()) st = p2p_->Run(ops, p2p_call);
        if (!st.ok()) break;
      }
    }
    if (!st.ok()) {
      call.fatal = true;
      return st;
    }
    if (j < rounds) sum(j);
  }
  if (all_reduce && rounds > 0) spread(rounds - 1, spread_.data());  // gathered by the last exchange
  return Status();
}

void WireRoundContribution(const kernels::CollArgs& args, int wire, int rank, int nranks,
                           const std::vector<bool>& net, void* out) {
  const size_t esize = base::DataTypeSize(args.dtype);
  kernels::CollArgs resolved = args;
  if (!ReadScalarNow(&resolved).ok()) resolved.scalar = 0;
  const float scale = WireInputScale(resolved, nranks);
  const char* in = static_cast<const char*>(args.send);
  char* dst = static_cast<char*>(out);
  std::vector<float> buf;
  for (int q = 0; q < nranks; ++q) {
    const Shard s = WireShardOf(args, q, nranks);
    const size_t at = static_cast<size_t>(s.begin) * esize;
    if (q == rank || !(q < static_cast<int>(net.size()) && net[q])) {
      std::memmove(dst + at, in + at, static_cast<size_t>(s.len) * esize);
      continue;
    }
    buf.resize(static_cast<size_t>(s.len));
    ToFloat(args.dtype, in + at, s.len, scale, buf.data());  // rounded in place below
    kernels::WireRound(static_cast<Wire>(wire), buf.data(), s.len);
    // Back in the input's units: avg's 1/N undone; premul-sum's scalar
    // divided out (where it is zero nothing of the input was sent).
    if (args.op == RedOp::kAvg) {
      for (float& v : buf) v *= static_cast<float>(nranks);
    } else if (scale != 1.0f) {
      if (scale == 0.0f || !std::isfinite(scale)) {
        std::memmove(dst + at, in + at, static_cast<size_t>(s.len) * esize);
        continue;
      }
      for (float& v : buf) v /= scale;
    }
    FromFloat(args.dtype, buf.data(), s.len, dst + at);
  }
}

}  // namespace ringo::collectives
