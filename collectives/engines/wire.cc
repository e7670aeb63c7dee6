#include "collectives/engines/wire.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/device/half.h"
#include "base/logging.h"

namespace ringo::collectives {

using base::DataType;
using base::RedOp;
using base::Status;
using kernels::Coll;
using kernels::Wire;

namespace {

// Scratch for one round's shard piece of every rank: at most 8 MiB of fp32
// values over all shards, at least 4096 values (and whole blocks) a shard.
constexpr int64_t kRoundBytes = int64_t{8} << 20;

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

// Shard q of a call: the elements [begin, begin + len) of the input that
// rank q sums (and, for reduce-scatter, receives).
struct Shard {
  int64_t begin = 0;
  int64_t len = 0;
};

Shard ShardOf(const kernels::CollArgs& args, int q, int nranks) {
  if (args.coll == Coll::kReduceScatter) return {q * args.count, args.count};
  // All-reduce: equal shards in whole blocks, the last ones shorter or empty.
  const int64_t per = (args.count + nranks - 1) / nranks;
  const int64_t size = (per + kernels::kWireBlock - 1) / kernels::kWireBlock * kernels::kWireBlock;
  const int64_t begin = std::min(args.count, q * size);
  return {begin, std::min(args.count, begin + size) - begin};
}

}  // namespace

bool WireApplies(const kernels::CollArgs& args) {
  const bool coll = args.coll == Coll::kAllReduce || args.coll == Coll::kReduceScatter;
  const bool dtype = args.dtype == DataType::kFloat32 || args.dtype == DataType::kBFloat16 ||
                     args.dtype == DataType::kFloat16;
  const bool op = args.op == RedOp::kSum || args.op == RedOp::kAvg;
  return coll && dtype && op;
}

WireEngine::WireEngine(const EngineSetup& setup, PointToPoint* p2p)
    : rank_(setup.rank), nranks_(setup.nranks), p2p_(p2p), net_(static_cast<size_t>(setup.nranks), 0),
      out_(static_cast<size_t>(setup.nranks)), in_(static_cast<size_t>(setup.nranks)) {
  const std::vector<bool>& net = setup.connector->spec().net;
  for (int r = 0; r < nranks_ && r < static_cast<int>(net.size()); ++r) net_[r] = net[r] ? 1 : 0;
}

int64_t WireEngine::PieceElems(int nranks) {
  int64_t piece = kRoundBytes / 4 / std::max(1, nranks);
  piece = std::max<int64_t>(piece, 4096);
  return piece / kernels::kWireBlock * kernels::kWireBlock;
}

void WireEngine::LogOnce(Wire wire) {
  if (logged_) return;
  logged_ = true;
  std::string net, local;
  for (int r = 0; r < nranks_; ++r) {
    if (r == rank_) continue;
    std::string& list = net_[r] ? net : local;
    list += (list.empty() ? "" : ",") + std::to_string(r);
  }
  RINGO_LOG(INFO) << "rank " << rank_ << ": wire " << kernels::WireName(wire)
                  << ": fp32/bf16/fp16 sum and avg all-reduce and reduce-scatter by direct exchange; contributions to ranks "
                  << (net.empty() ? "none" : net) << " (network) in " << kernels::WireName(wire) << ", to ranks "
                  << (local.empty() ? "none" : local)
                  << " (this host) in fp32; every summed shard sent once in " << kernels::WireName(wire);
}

Status WireEngine::Run(Call& call) {
  const kernels::CollArgs& args = call.args;
  const Wire wire = static_cast<Wire>(call.wire);
  LogOnce(wire);
  const size_t esize = base::DataTypeSize(args.dtype);
  const float scale = args.op == RedOp::kAvg ? 1.0f / static_cast<float>(nranks_) : 1.0f;
  const bool all_reduce = args.coll == Coll::kAllReduce;
  const char* send = static_cast<const char*>(args.send);
  char* recv = static_cast<char*>(args.recv);
  const int64_t piece = PieceElems(nranks_);
  std::vector<Shard> shards(static_cast<size_t>(nranks_));
  int64_t longest = 0;
  for (int q = 0; q < nranks_; ++q) {
    shards[q] = ShardOf(args, q, nranks_);
    longest = std::max(longest, shards[q].len);
  }
  const Shard mine = shards[rank_];
  // The output offset of shard q's element i: all-reduce writes where it
  // read; reduce-scatter writes its own shard from the start of recv.
  auto out_at = [&](int q, int64_t i) -> char* {
    return recv + static_cast<size_t>((all_reduce ? shards[q].begin : 0) + i) * esize;
  };
  acc_.resize(static_cast<size_t>(piece));
  tmp_.resize(static_cast<size_t>(piece));
  P2pCall p2p_call;
  p2p_call.wait = call.wait;
  auto exchange = [&]() -> Status {
    if (ops_.empty()) return Status();
    Status st = p2p_->Run(ops_, p2p_call);
    if (!st.ok()) call.fatal = true;
    return st;
  };
  for (int64_t at = 0; at < longest; at += piece) {
    auto len_of = [&](int q) { return std::max<int64_t>(0, std::min(piece, shards[q].len - at)); };
    const int64_t n_mine = len_of(rank_);
    // 1. Each peer's piece of its shard, out; this rank's piece of its own
    // shard, in from every peer.
    ops_.clear();
    for (int q = 0; q < nranks_; ++q) {
      if (q == rank_) continue;
      const Wire w = net_[q] ? wire : Wire::kNone;
      const int64_t n = len_of(q);
      if (n > 0) {
        ToFloat(args.dtype, send + static_cast<size_t>(shards[q].begin + at) * esize, n, scale, tmp_.data());
        out_[q].resize(static_cast<size_t>(kernels::WireBytes(w, n)));
        kernels::WireEncode(w, tmp_.data(), n, out_[q].data());
        ops_.push_back({true, q, out_[q].data(), nullptr, out_[q].size()});
      }
      if (n_mine > 0) {
        in_[q].resize(static_cast<size_t>(kernels::WireBytes(w, n_mine)));
        ops_.push_back({false, q, nullptr, in_[q].data(), in_[q].size()});
      }
    }
    RETURN_IF_ERROR(exchange());
    // The sum, in rank order, in fp32.
    if (n_mine > 0) {
      for (int r = 0; r < nranks_; ++r) {
        if (r == rank_) {
          ToFloat(args.dtype, send + static_cast<size_t>(mine.begin + at) * esize, n_mine, scale, tmp_.data());
          if (r == 0) {
            std::memcpy(acc_.data(), tmp_.data(), static_cast<size_t>(n_mine) * 4);
          } else {
            for (int64_t i = 0; i < n_mine; ++i) acc_[i] += tmp_[i];
          }
          continue;
        }
        const Wire w = net_[r] ? wire : Wire::kNone;
        if (r == 0) {
          kernels::WireDecode(w, in_[r].data(), n_mine, acc_.data());
        } else {
          kernels::WireDecodeAdd(w, in_[r].data(), n_mine, acc_.data());
        }
      }
    }
    if (!all_reduce) {
      if (n_mine > 0) FromFloat(args.dtype, acc_.data(), n_mine, out_at(rank_, at));
      continue;
    }
    // 2. The summed piece, rounded once to the wire format, to every rank.
    ops_.clear();
    std::vector<uint8_t>& result = out_[rank_];
    if (n_mine > 0) {
      result.resize(static_cast<size_t>(kernels::WireBytes(wire, n_mine)));
      kernels::WireEncode(wire, acc_.data(), n_mine, result.data());
      for (int q = 0; q < nranks_; ++q) {
        if (q != rank_) ops_.push_back({true, q, result.data(), nullptr, result.size()});
      }
    }
    for (int q = 0; q < nranks_; ++q) {
      const int64_t n = len_of(q);
      if (q == rank_ || n == 0) continue;
      in_[q].resize(static_cast<size_t>(kernels::WireBytes(wire, n)));
      ops_.push_back({false, q, nullptr, in_[q].data(), in_[q].size()});
    }
    RETURN_IF_ERROR(exchange());
    for (int q = 0; q < nranks_; ++q) {
      const int64_t n = len_of(q);
      if (n == 0) continue;
      kernels::WireDecode(wire, q == rank_ ? result.data() : in_[q].data(), n, tmp_.data());
      FromFloat(args.dtype, tmp_.data(), n, out_at(q, at));
    }
  }
  return Status();
}

}  // namespace ringo::collectives
