// The compressed wire (collectives/engines/wire.h, docs/wire.md) end to end:
// every rank's result has the bits the algorithm promises (contributions
// rounded once on their way, the summed shard once, sums in fp32 in rank
// order) and the same bits on every rank; the error against an fp64
// reference stays within two roundings of the wire format at 2 to 16 ranks,
// where a ring that rounds its partial sums at every hop grows with N (the
// table this test prints is docs/wire.md's); what the wire does not apply
// to stays exact; the API's refusals.
//
// Ranks that are threads of one process cross "the network" with
// RINGO_SHM_DISABLE=1 (every pair over loopback TCP); processes with host
// ids of their own mix edges within and between hosts.
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "base/device/half.h"
#include "kernels/wire.h"
#include "ringo/ringo.h"
#include "tests/api_test_util.h"
#include "tests/harness.h"

namespace ringo::tests {
namespace {

using kernels::Wire;

constexpr auto kDeadline = std::chrono::seconds(240);

std::string Err(const char* what, ringoResult_t rc, ringoComm_t comm) {
  const char* last = ringoGetLastError(comm);
  return std::string(what) + ": " + ringoGetErrorString(rc) + " (" + (last != nullptr ? last : "") + ")";
}

ringoResult_t Init(ringoComm_t* comm, int rank, int nranks, const ringoUniqueId& id, int wire) {
  ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
  config.device_kind = RINGO_DEVICE_HOST;
  config.wire = wire;
  return ringoCommInitRankConfig(comm, nranks, id, rank, &config);
}

// Rank r's input: gradient-like values over several binades, of both
// signs, so that the sum cancels.
std::vector<float> Input(int rank, int64_t count, uint32_t seed) {
  std::mt19937 gen(seed * 7919u + static_cast<uint32_t>(rank));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> spread(-8, 2);
  std::vector<float> x(static_cast<size_t>(count));
  for (auto& v : x) v = std::ldexp(normal(gen), spread(gen));
  return x;
}

// The shard owner of all-reduce element i (the engine's split: equal
// shards of whole 32-value blocks).
int Owner(int64_t i, int64_t count, int nranks) {
  const int64_t per = (count + nranks - 1) / nranks;
  const int64_t size = (per + kernels::kWireBlock - 1) / kernels::kWireBlock * kernels::kWireBlock;
  return static_cast<int>(i / size);
}

std::vector<float> Rounded(Wire w, std::vector<float> x) {
  kernels::WireRound(w, x.data(), static_cast<int64_t>(x.size()));
  return x;
}

// What every rank of an all-reduce must hold: contribution r reaches owner
// q rounded to the wire unless r == q or `same_host(r, q)`; the owner sums
// in rank order in fp32 and rounds the sum once.
template <typename SameHost>
std::vector<float> Expected(Wire w, const std::vector<std::vector<float>>& x, float scale, SameHost same_host) {
  const int n = static_cast<int>(x.size());
  const int64_t count = static_cast<int64_t>(x[0].size());
  std::vector<std::vector<float>> rounded(n), scaled(n);
  for (int r = 0; r < n; ++r) {
    scaled[r] = x[r];
    for (float& v : scaled[r]) v = scale == 1.0f ? v : v * scale;
    rounded[r] = Rounded(w, scaled[r]);
  }
  std::vector<float> sum(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const int q = Owner(i, count, n);
    float acc = 0;
    for (int r = 0; r < n; ++r) {
      const float c = (r == q || same_host(r, q)) ? scaled[r][i] : rounded[r][i];
      acc = r == 0 ? c : acc + c;
    }
    sum[i] = acc;
  }
  return Rounded(w, sum);
}

double BlockAmax(const std::vector<float>& x, size_t i) {
  const size_t b = i / kernels::kWireBlock * kernels::kWireBlock;
  double amax = 0;
  for (size_t j = b; j < std::min(x.size(), b + kernels::kWireBlock); ++j) amax = std::max(amax, std::fabs(double{x[j]}));
  return amax;
}

// ||got - exact|| / ||exact||, exact the fp64 sum of `x`.
double NormError(const std::vector<float>& got, const std::vector<std::vector<double>>& x) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double exact = 0;
    for (const auto& xr : x) exact += xr[i];
    num += (got[i] - exact) * (got[i] - exact);
    den += exact * exact;
  }
  return std::sqrt(num / den);
}

std::vector<std::vector<double>> AsDouble(const std::vector<std::vector<float>>& x) {
  std::vector<std::vector<double>> d;
  for (const auto& xr : x) d.emplace_back(xr.begin(), xr.end());
  return d;
}

uint16_t Bf16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}
float FromBf16(uint16_t h) {
  const uint32_t b = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// A fresh folder for logs.
std::string LogDir() {
  char tmpl[] = "/tmp/ringo-wire-XXXXXX";
  const char* dir = mkdtemp(tmpl);
  return dir != nullptr ? dir : "/tmp";
}

bool LogSays(const std::string& path, const std::string& phrase) {
  std::ifstream in(path);
  const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return log.find(phrase) != std::string::npos;
}

class WireTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Every pair of thread ranks over loopback TCP; the bf16 comparison on
    // the ring (the direct engine would sum it in fp32 and round once).
    SetEnvAndReload("RINGO_SHM_DISABLE", "1");
    SetEnvAndReload("RINGO_ALGO", "ring");
  }
};

// The error table: fp32 all-reduce with the wire against what a program
// without it does, cast its fp32 gradients to bf16 and all-reduce those on
// the ring (combined in fp32, rounded at every hop), 2 to 16 ranks; both
// against the fp64 sum of the fp32 inputs.
TEST_F(WireTest, ErrorDoesNotGrowWithTheRankCount) {
  constexpr int64_t kCount = 4099;  // neither blocks nor ranks divide it
  std::map<std::pair<int, int>, double> wire_err;  // (wire, n) -> error
  std::map<int, double> ring_err;
  std::mutex mu;
  for (int n : {2, 4, 8, 16}) {
    std::vector<std::vector<float>> x;
    for (int r = 0; r < n; ++r) x.push_back(Input(r, kCount, 1));
    std::vector<std::vector<float>> xb(x);  // the bf16 ring's inputs, as bf16 values
    for (auto& xr : xb) {
      for (float& v : xr) v = FromBf16(Bf16(v));
    }
    auto results = RunRanks(n, RankMode::kThreads, kDeadline, [&](int rank, int nranks, const ringoUniqueId& id) -> std::string {
      ringoComm_t comm = nullptr;
      ringoResult_t rc = Init(&comm, rank, nranks, id, ringoWireBf16);
      if (rc != ringoSuccess) return Err("init", rc, nullptr);
      std::string fail;
      for (Wire w : {Wire::kBf16, Wire::kFp16, Wire::kE4m3, Wire::kE5m2}) {
        rc = ringoCommSetWire(comm, static_cast<int>(w));
        if (rc != ringoSuccess) return Err("set wire", rc, comm);
        std::vector<float> out(kCount, -7.0f);
        rc = ringoAllReduce(x[rank].data(), out.data(), kCount, ringoFloat32, ringoSum, comm, nullptr);
        if (rc != ringoSuccess) return Err("all-reduce", rc, comm);
        const std::vector<float> want = Expected(w, x, 1.0f, [](int, int) { return false; });
        if (std::memcmp(out.data(), want.data(), kCount * 4) != 0) {
          for (int64_t i = 0; i < kCount; ++i) {
            if (std::memcmp(&out[i], &want[i], 4) != 0) {
              return std::string(kernels::WireName(w)) + ": element " + std::to_string(i) + " is " +
                     std::to_string(out[i]) + ", the algorithm gives " + std::to_string(want[i]);
            }
          }
        }
        // Within two roundings of the wire plus fp32 summation, element by element.
        for (int i = 0; i < kCount && fail.empty(); ++i) {
          double exact = 0, abs_sum = 0, bound = 0;
          const int q = Owner(i, kCount, nranks);
          for (int r = 0; r < nranks; ++r) {
            exact += x[r][i];
            abs_sum += std::fabs(x[r][i]);
            if (r != q) bound += kernels::WireErrorBound(w, x[r][i], BlockAmax(x[r], static_cast<size_t>(i)));
          }
          // The final rounding's bound from the result's block maximum,
          // which can sit one binade below the unrounded sum's: counted twice.
          bound += 2 * kernels::WireErrorBound(w, out[i], BlockAmax(out, static_cast<size_t>(i)));
          bound += (nranks - 1) * std::ldexp(1.0, -24) * abs_sum * 1.01;
          if (std::isinf(out[i]) && w == Wire::kFp16) continue;  // fp16 overflow is not at stake here
          if (std::fabs(out[i] - exact) > bound) {
            fail = std::string(kernels::WireName(w)) + ": element " + std::to_string(i) + " off by " +
                   std::to_string(std::fabs(out[i] - exact)) + ", bound " + std::to_string(bound);
          }
        }
        if (!fail.empty()) return fail;
        if (rank == 0) {
          std::lock_guard<std::mutex> lock(mu);
          wire_err[{static_cast<int>(w), nranks}] = NormError(out, AsDouble(x));
        }
      }
      // The ring on bf16 buffers, exact wire: rounds its partial sums at every hop.
      rc = ringoCommSetWire(comm, ringoWireNone);
      if (rc != ringoSuccess) return Err("set wire none", rc, comm);
      std::vector<uint16_t> in(kCount), outb(kCount);
      for (int64_t i = 0; i < kCount; ++i) in[i] = Bf16(x[rank][i]);
      rc = ringoAllReduce(in.data(), outb.data(), kCount, ringoBfloat16, ringoSum, comm, nullptr);
      if (rc != ringoSuccess) return Err("bf16 all-reduce", rc, comm);
      if (rank == 0) {
        std::vector<float> got(kCount);
        for (int64_t i = 0; i < kCount; ++i) got[i] = FromBf16(outb[i]);
        std::lock_guard<std::mutex> lock(mu);
        ring_err[nranks] = NormError(got, AsDouble(x));  // against the fp32 inputs' sum, as the wire's
      }
      rc = ringoCommDestroy(comm);
      return rc == ringoSuccess ? "" : Err("destroy", rc, nullptr);
    });
    ASSERT_TRUE(AllRanksOk(results)) << n << " ranks";
  }
  std::printf("relative error (2-norm) of a %lld-value fp32 sum all-reduce against fp64:\n", static_cast<long long>(kCount));
  std::printf("ranks | wire bf16 | wire fp16 | wire e4m3 | wire e5m2 | ring on bf16 buffers\n");
  for (int n : {2, 4, 8, 16}) {
    std::printf("%5d | %9.2e | %9.2e | %9.2e | %9.2e | %9.2e\n", n, wire_err[{1, n}], wire_err[{2, n}], wire_err[{3, n}],
                wire_err[{4, n}], ring_err[n]);
  }
  // The wire's error stays put as N grows; the ring's grows past it.
  for (int w = 1; w <= 4; ++w) {
    const double at16 = wire_err[std::make_pair(w, 16)], at2 = wire_err[std::make_pair(w, 2)];
    EXPECT_LT(at16, 2.0 * at2) << kernels::WireName(static_cast<Wire>(w));
  }
  EXPECT_GT(ring_err[16], 1.5 * ring_err[2]);
  const double bf16_at16 = wire_err[std::make_pair(1, 16)];
  EXPECT_LT(bf16_at16, ring_err[16]);
}

// Avg, reduce-scatter, bf16 and fp16 buffers, in place, several rounds of
// the engine's pieces: the bits the algorithm gives, on every rank.
TEST_F(WireTest, ShapesDatatypesAndInPlace) {
  constexpr int kRanks = 3;
  constexpr int64_t kCount = 3 * 2500009;  // 4 rounds of the engine's pieces per shard
  std::vector<std::vector<float>> x;
  for (int r = 0; r < kRanks; ++r) x.push_back(Input(r, kCount, 2));
  auto results = RunRanks(kRanks, RankMode::kThreads, kDeadline, [&](int rank, int nranks, const ringoUniqueId& id) -> std::string {
    ringoComm_t comm = nullptr;
    ringoResult_t rc = Init(&comm, rank, nranks, id, ringoWireFp8e4m3);
    if (rc != ringoSuccess) return Err("init", rc, nullptr);
    const auto none = [](int, int) { return false; };
    // All-reduce avg in place.
    {
      std::vector<float> buf = x[rank];
      rc = ringoAllReduce(buf.data(), buf.data(), kCount, ringoFloat32, ringoAvg, comm, nullptr);
      if (rc != ringoSuccess) return Err("avg in place", rc, comm);
      const std::vector<float> want = Expected(Wire::kE4m3, x, 1.0f / kRanks, none);
      if (std::memcmp(buf.data(), want.data(), kCount * 4) != 0) return "avg in place: not the algorithm's bits";
    }
    // Premul-sum, a host scalar and one in memory read when the call runs:
    // the scalar applied in fp32 before compression, as avg's 1/N.
    for (ringoScalarResidence_t where : {ringoScalarHostImmediate, ringoScalarDevice}) {
      float scalar = 0.375f;
      ringoRedOp_t premul;
      rc = ringoRedOpCreatePreMulSum(&premul, &scalar, ringoFloat32, where, comm);
      if (rc != ringoSuccess) return Err("premul op", rc, comm);
      constexpr int64_t kSmall = 5003;
      std::vector<std::vector<float>> xs;
      for (int r = 0; r < kRanks; ++r) xs.emplace_back(x[r].begin(), x[r].begin() + kSmall);
      std::vector<float> out(kSmall);
      rc = ringoAllReduce(xs[rank].data(), out.data(), kSmall, ringoFloat32, premul, comm, nullptr);
      if (rc != ringoSuccess) return Err("premul all-reduce", rc, comm);
      ringoRedOpDestroy(premul, comm);
      const std::vector<float> want = Expected(Wire::kE4m3, xs, 0.375f, none);
      if (std::memcmp(out.data(), want.data(), kSmall * 4) != 0) return "premul-sum: not the algorithm's bits";
    }
    // Reduce-scatter: each rank's block, summed without the final rounding.
    {
      const int64_t per = kCount / kRanks;
      std::vector<float> out(static_cast<size_t>(per));
      rc = ringoReduceScatter(x[rank].data(), out.data(), per, ringoFloat32, ringoSum, comm, nullptr);
      if (rc != ringoSuccess) return Err("reduce-scatter", rc, comm);
      // Blocks start at this rank's block of the input.
      std::vector<std::vector<float>> part;
      for (int r = 0; r < kRanks; ++r) {
        std::vector<float> v(x[r].begin() + rank * per, x[r].begin() + (rank + 1) * per);
        part.push_back(r == rank ? v : Rounded(Wire::kE4m3, v));
      }
      for (int64_t i = 0; i < per; ++i) {
        float acc = part[0][i];
        for (int r = 1; r < kRanks; ++r) acc += part[r][i];
        if (std::memcmp(&acc, &out[i], 4) != 0) return "reduce-scatter: element " + std::to_string(i) + " differs";
      }
    }
    // bf16 buffers, wire fp16: inputs read as float, the result rounded to bf16.
    {
      rc = ringoCommSetWire(comm, ringoWireFp16);
      if (rc != ringoSuccess) return Err("set wire", rc, comm);
      constexpr int64_t kSmall = 1000;
      std::vector<std::vector<float>> xb;
      for (int r = 0; r < kRanks; ++r) {
        std::vector<float> v(x[r].begin(), x[r].begin() + kSmall);
        for (float& f : v) f = FromBf16(Bf16(f));
        xb.push_back(v);
      }
      std::vector<uint16_t> in(kSmall), out(kSmall);
      for (int64_t i = 0; i < kSmall; ++i) in[i] = Bf16(xb[rank][i]);
      rc = ringoAllReduce(in.data(), out.data(), kSmall, ringoBfloat16, ringoSum, comm, nullptr);
      if (rc != ringoSuccess) return Err("bf16 all-reduce", rc, comm);
      const std::vector<float> want = Expected(Wire::kFp16, xb, 1.0f, none);
      for (int64_t i = 0; i < kSmall; ++i) {
        if (out[i] != Bf16(want[i])) return "bf16 buffers: element " + std::to_string(i) + " differs";
      }
    }
    // fp16 buffers, avg, wire bf16: inputs times 1/N before they are sent.
    {
      rc = ringoCommSetWire(comm, ringoWireBf16);
      if (rc != ringoSuccess) return Err("set wire", rc, comm);
      constexpr int64_t kSmall = 777;
      std::vector<std::vector<float>> xh;
      for (int r = 0; r < kRanks; ++r) {
        std::vector<float> v(x[r].begin(), x[r].begin() + kSmall);
        for (float& f : v) f = base::HalfBitsToFloat(base::FloatToHalfBits(f));
        xh.push_back(v);
      }
      std::vector<uint16_t> in(kSmall), out(kSmall);
      for (int64_t i = 0; i < kSmall; ++i) in[i] = base::FloatToHalfBits(xh[rank][i]);
      rc = ringoAllReduce(in.data(), out.data(), kSmall, ringoFloat16, ringoAvg, comm, nullptr);
      if (rc != ringoSuccess) return Err("fp16 avg all-reduce", rc, comm);
      const std::vector<float> want = Expected(Wire::kBf16, xh, 1.0f / kRanks, none);
      for (int64_t i = 0; i < kSmall; ++i) {
        if (out[i] != base::FloatToHalfBits(want[i])) return "fp16 avg: element " + std::to_string(i) + " differs";
      }
    }
    rc = ringoCommDestroy(comm);
    return rc == ringoSuccess ? "" : Err("destroy", rc, nullptr);
  });
  EXPECT_ALL_RANKS_OK(results);
}

// Where recursive doubling runs (RINGO_ALGO unset), the small fp32
// all-reduces it is predicted to finish sooner go to it, exact: the bits of
// the wire off; larger ones, and small bf16 ones (which doubling would round
// at every step), keep the wire's bits.
TEST_F(WireTest, SmallFp32AllReducesGoToRecursiveDoubling) {
  SetEnvAndReload("RINGO_ALGO", "");
  constexpr int kRanks = 4;
  constexpr int64_t kSmall = 1000;   // 4 KB: below the crossover at 4 ranks (20 KB in bf16)
  constexpr int64_t kLarge = 70000;  // 280 KB: past recursive doubling's limit
  std::vector<std::vector<float>> x;
  for (int r = 0; r < kRanks; ++r) x.push_back(Input(r, kLarge, 9));
  auto results = RunRanks(kRanks, RankMode::kThreads, kDeadline, [&](int rank, int nranks, const ringoUniqueId& id) -> std::string {
    ringoComm_t comm = nullptr;
    ringoResult_t rc = Init(&comm, rank, nranks, id, ringoWireBf16);
    if (rc != ringoSuccess) return Err("init", rc, nullptr);
    std::vector<float> with(kLarge), without(kLarge);
    rc = ringoAllReduce(x[rank].data(), with.data(), kSmall, ringoFloat32, ringoSum, comm, nullptr);
    if (rc != ringoSuccess) return Err("small, wire", rc, comm);
    if ((rc = ringoCommSetWire(comm, ringoWireNone)) != ringoSuccess) return Err("set wire", rc, comm);
    rc = ringoAllReduce(x[rank].data(), without.data(), kSmall, ringoFloat32, ringoSum, comm, nullptr);
    if (rc != ringoSuccess) return Err("small, no wire", rc, comm);
    if (std::memcmp(with.data(), without.data(), kSmall * 4) != 0) return "small fp32: not the bits of the wire off";
    std::vector<std::vector<float>> xs;
    for (int r = 0; r < kRanks; ++r) xs.emplace_back(x[r].begin(), x[r].begin() + kSmall);
    if (std::memcmp(with.data(), Expected(Wire::kBf16, xs, 1.0f, [](int, int) { return false; }).data(), kSmall * 4) == 0) {
      return "small fp32: the wire's bits";
    }
    if ((rc = ringoCommSetWire(comm, ringoWireBf16)) != ringoSuccess) return Err("set wire", rc, comm);
    // Error feedback: the small call loses nothing to the wire, the large one does.
    std::vector<float> sent(kLarge);
    rc = ringoCommWireRound(x[rank].data(), sent.data(), kSmall, ringoFloat32, ringoSum, comm);
    if (rc != ringoSuccess) return Err("wire round, small", rc, comm);
    if (std::memcmp(sent.data(), x[rank].data(), kSmall * 4) != 0) return "wire round, small: not a copy";
    rc = ringoCommWireRound(x[rank].data(), sent.data(), kLarge, ringoFloat32, ringoSum, comm);
    if (rc != ringoSuccess) return Err("wire round, large", rc, comm);
    if (std::memcmp(sent.data(), x[rank].data(), kLarge * 4) == 0) return "wire round, large: nothing rounded";
    rc = ringoAllReduce(x[rank].data(), with.data(), kLarge, ringoFloat32, ringoSum, comm, nullptr);
    if (rc != ringoSuccess) return Err("large, wire", rc, comm);
    if (std::memcmp(with.data(), Expected(Wire::kBf16, x, 1.0f, [](int, int) { return false; }).data(), kLarge * 4) != 0) {
      return "large fp32: not the wire's bits";
    }
    std::vector<std::vector<float>> xb;
    for (int r = 0; r < kRanks; ++r) {
      xb.emplace_back(x[r].begin(), x[r].begin() + kSmall);
      for (float& f : xb.back()) f = FromBf16(Bf16(f));
    }
    std::vector<uint16_t> in(kSmall), out(kSmall);
    for (int64_t i = 0; i < kSmall; ++i) in[i] = Bf16(xb[rank][i]);
    rc = ringoAllReduce(in.data(), out.data(), kSmall, ringoBfloat16, ringoSum, comm, nullptr);
    if (rc != ringoSuccess) return Err("small bf16, wire", rc, comm);
    const std::vector<float> want = Expected(Wire::kBf16, xb, 1.0f, [](int, int) { return false; });
    for (int64_t i = 0; i < kSmall; ++i) {
      if (out[i] != Bf16(want[i])) return "small bf16: element " + std::to_string(i) + " is not the wire's";
    }
    rc = ringoCommDestroy(comm);
    return rc == ringoSuccess ? "" : Err("destroy", rc, nullptr);
  });
  SetEnvAndReload("RINGO_ALGO", "ring");
  EXPECT_ALL_RANKS_OK(results);
}

// Integer types, max, fp64, all-gather and broadcast on a communicator with
// a wire: exact (the wire does not apply).
TEST_F(WireTest, WhatTheWireDoesNotTouchStaysExact) {
  auto results = RunRanks(3, RankMode::kThreads, kDeadline, [&](int rank, int nranks, const ringoUniqueId& id) -> std::string {
    ringoComm_t comm = nullptr;
    ringoResult_t rc = Init(&comm, rank, nranks, id, ringoWireFp8e5m2);
    if (rc != ringoSuccess) return Err("init", rc, nullptr);
    std::vector<int32_t> ia(100), ib(100);
    for (int i = 0; i < 100; ++i) ia[i] = 1000003 * (rank + 1) + i;
    rc = ringoAllReduce(ia.data(), ib.data(), 100, ringoInt32, ringoSum, comm, nullptr);
    if (rc != ringoSuccess) return Err("int32 sum", rc, comm);
    for (int i = 0; i < 100; ++i) {
      if (ib[i] != 1000003 * 6 + 3 * i) return "int32 sum: element " + std::to_string(i);
    }
    std::vector<float> fa(100), fb(100);
    for (int i = 0; i < 100; ++i) fa[i] = 1.0f + 1e-6f * static_cast<float>(i * nranks + rank);
    rc = ringoAllReduce(fa.data(), fb.data(), 100, ringoFloat32, ringoMax, comm, nullptr);
    if (rc != ringoSuccess) return Err("fp32 max", rc, comm);
    for (int i = 0; i < 100; ++i) {
      if (fb[i] != 1.0f + 1e-6f * static_cast<float>(i * nranks + nranks - 1)) return "fp32 max: element " + std::to_string(i);
    }
    std::vector<double> da(100, 0.1 * (rank + 1)), db(100);
    rc = ringoAllReduce(da.data(), db.data(), 100, ringoFloat64, ringoSum, comm, nullptr);
    if (rc != ringoSuccess) return Err("fp64 sum", rc, comm);
    if (db[0] != (0.1 + 0.2) + 0.3 && db[0] != 0.1 + (0.2 + 0.3) && db[0] != (0.1 + 0.3) + 0.2) return "fp64 sum not exact-ish";
    std::vector<float> g(3 * 10);
    std::vector<float> mine(10, 1.0f / 3.0f + static_cast<float>(rank));
    rc = ringoAllGather(mine.data(), g.data(), 10, ringoFloat32, comm, nullptr);
    if (rc != ringoSuccess) return Err("all-gather", rc, comm);
    for (int r = 0; r < 3; ++r) {
      if (g[r * 10 + 9] != 1.0f / 3.0f + static_cast<float>(r)) return "all-gather: rank " + std::to_string(r) + "'s block";
    }
    rc = ringoCommDestroy(comm);
    return rc == ringoSuccess ? "" : Err("destroy", rc, nullptr);
  });
  EXPECT_ALL_RANKS_OK(results);
}

// Processes on two host ids, two ranks each: within a host contributions
// travel exact, between hosts in the wire format.
// Both ways of running the wire on host memory: the pipelined host engine
// and the staged schedule GPU communicators run (RINGO_WIRE_ENGINE=staged).
TEST_F(WireTest, TwoHostsOfTwoRanks) {
  constexpr int64_t kCount = 50001;
  for (const char* engine : {"pipelined", "staged"}) {
  SCOPED_TRACE(engine);
  const std::string dir = LogDir();
  auto results = RunRanks(4, RankMode::kProcesses, kDeadline, [&](int rank, int nranks, const ringoUniqueId& id) -> std::string {
    SetEnvAndReload("RINGO_SHM_DISABLE", "0");
    SetEnvAndReload("RINGO_HOSTID", "wire-host-" + std::to_string(rank / 2));
    SetEnvAndReload("RINGO_WIRE_ENGINE", engine);
    SetEnvAndReload("RINGO_DEBUG_FILE", dir + "/" + std::to_string(rank) + ".log");
    SetEnvAndReload("RINGO_DEBUG", "INFO");
    std::vector<std::vector<float>> x;
    for (int r = 0; r < nranks; ++r) x.push_back(Input(r, kCount, 3));
    ringoComm_t comm = nullptr;
    ringoResult_t rc = Init(&comm, rank, nranks, id, ringoWireBf16);
    if (rc != ringoSuccess) return Err("init", rc, nullptr);
    std::vector<float> out(kCount);
    rc = ringoAllReduce(x[rank].data(), out.data(), kCount, ringoFloat32, ringoSum, comm, nullptr);
    if (rc != ringoSuccess) return Err("all-reduce", rc, comm);
    const std::vector<float> want = Expected(Wire::kBf16, x, 1.0f, [](int r, int q) { return r / 2 == q / 2; });
    if (std::memcmp(out.data(), want.data(), kCount * 4) != 0) return "not the algorithm's bits";
    // ringoCommWireRound: this rank's contribution as the all-reduce sent
    // it, the shards of the other host's ranks rounded, its own host's exact.
    std::vector<float> contribution(kCount);
    rc = ringoCommWireRound(x[rank].data(), contribution.data(), kCount, ringoFloat32, ringoSum, comm);
    if (rc != ringoSuccess) return Err("wire round", rc, comm);
    const std::vector<float> rounded = Rounded(Wire::kBf16, x[rank]);
    for (int64_t i = 0; i < kCount; ++i) {
      const bool across = Owner(i, kCount, nranks) / 2 != rank / 2;
      if (contribution[i] != (across ? rounded[i] : x[rank][i])) {
        return "ringoCommWireRound: element " + std::to_string(i) + (across ? " (across hosts)" : " (this host)");
      }
    }
    rc = ringoCommDestroy(comm);
    return rc == ringoSuccess ? "" : Err("destroy", rc, nullptr);
  });
  EXPECT_ALL_RANKS_OK(results);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(LogSays(dir + "/" + std::to_string(r) + ".log", "by the staged schedule"), std::string(engine) == "staged")
        << "rank " << r;
  }
  }
  SetEnvAndReload("RINGO_WIRE_ENGINE", "pipelined");
}

// The staged schedule (what GPU communicators run, here on host memory
// with the same stage functions as their kernels) gives the pipelined host
// engine's bits, for every wire, fp32, bf16 and fp16, sum, avg and
// premul-sum, all-reduce and reduce-scatter, in place and not, over counts
// of one round and of several.
TEST_F(WireTest, StagedScheduleGivesThePipelinedBits) {
  constexpr int kRanks = 3;
  struct Case {
    int wire;
    ringoDataType_t dtype;
    int op;  // ringoSum, ringoAvg, or -1: premul-sum by 0.375
    bool all_reduce;
    bool in_place;
    int64_t count;
  };
  std::vector<Case> cases;
  for (int w : {ringoWireBf16, ringoWireFp16, ringoWireFp8e4m3, ringoWireFp8e5m2}) {
    cases.push_back({w, ringoFloat32, ringoSum, true, false, 600001});  // 2 rounds of 3 shards
  }
  cases.push_back({ringoWireFp8e4m3, ringoFloat32, ringoSum, false, false, 200003});  // 2 rounds
  for (int w : {ringoWireBf16, ringoWireFp8e4m3}) {
    for (ringoDataType_t dt : {ringoFloat32, ringoBfloat16, ringoFloat16}) {
      for (int op : {static_cast<int>(ringoSum), static_cast<int>(ringoAvg), -1}) {
        for (bool ar : {true, false}) {
          for (bool ip : {false, true}) cases.push_back({w, dt, op, ar, ip, 4099});
        }
      }
    }
  }
  auto esize = [](ringoDataType_t dt) -> size_t { return dt == ringoFloat32 ? 4 : 2; };
  std::map<std::string, std::vector<std::vector<uint8_t>>> outputs;  // engine -> by case and rank
  std::mutex mu;
  for (const char* engine : {"pipelined", "staged"}) {
    SetEnvAndReload("RINGO_WIRE_ENGINE", engine);
    SetEnvAndReload("RINGO_DEBUG", "INFO");
    // Which engine ran, from the INFO log (this process's stderr).
    ::testing::internal::CaptureStderr();
    std::vector<std::vector<uint8_t>>& out = outputs[engine];
    out.assign(cases.size() * kRanks, {});
    auto results = RunRanks(kRanks, RankMode::kThreads, kDeadline, [&](int rank, int nranks, const ringoUniqueId& id) -> std::string {
      ringoComm_t comm = nullptr;
      ringoResult_t rc = Init(&comm, rank, nranks, id, ringoWireBf16);
      if (rc != ringoSuccess) return Err("init", rc, nullptr);
      for (size_t c = 0; c < cases.size(); ++c) {
        const Case& k = cases[c];
        rc = ringoCommSetWire(comm, k.wire);
        if (rc != ringoSuccess) return Err("set wire", rc, comm);
        const size_t es = esize(k.dtype);
        const size_t in_count = static_cast<size_t>(k.all_reduce ? k.count : k.count * nranks);
        // The same inputs in and out of place (a case and its in-place twin).
        const auto seed = static_cast<uint32_t>(k.wire * 1000 + k.dtype * 100 + (k.op + 1) * 10 + (k.all_reduce ? 1 : 0));
        std::vector<float> x = Input(rank, static_cast<int64_t>(in_count), seed);
        std::vector<uint8_t> in(in_count * es), result(static_cast<size_t>(k.count) * es);
        for (size_t i = 0; i < in_count; ++i) {
          if (k.dtype == ringoFloat32) {
            std::memcpy(&in[4 * i], &x[i], 4);
          } else {
            const uint16_t h = k.dtype == ringoBfloat16 ? Bf16(x[i]) : base::FloatToHalfBits(x[i]);
            std::memcpy(&in[2 * i], &h, 2);
          }
        }
        ringoRedOp_t op = static_cast<ringoRedOp_t>(k.op);
        uint64_t scalar = 0;
        if (k.op < 0) {
          const float s = 0.375f;  // exact in every datatype here
          if (k.dtype == ringoFloat32) {
            std::memcpy(&scalar, &s, 4);
          } else {
            const uint16_t h = k.dtype == ringoBfloat16 ? Bf16(s) : base::FloatToHalfBits(s);
            std::memcpy(&scalar, &h, 2);
          }
          rc = ringoRedOpCreatePreMulSum(&op, &scalar, k.dtype, ringoScalarHostImmediate, comm);
          if (rc != ringoSuccess) return Err("premul op", rc, comm);
        }
        uint8_t* recv = k.in_place ? (k.all_reduce ? in.data() : in.data() + rank * k.count * es) : result.data();
        rc = k.all_reduce ? ringoAllReduce(in.data(), recv, k.count, k.dtype, op, comm, nullptr)
                          : ringoReduceScatter(in.data(), recv, k.count, k.dtype, op, comm, nullptr);
        if (rc != ringoSuccess) return Err(("case " + std::to_string(c)).c_str(), rc, comm);
        if (k.op < 0) ringoRedOpDestroy(op, comm);
        std::lock_guard<std::mutex> lock(mu);
        out[c * kRanks + rank].assign(recv, recv + k.count * es);
      }
      rc = ringoCommDestroy(comm);
      return rc == ringoSuccess ? "" : Err("destroy", rc, nullptr);
    });
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_ALL_RANKS_OK(results);
    EXPECT_EQ(log.find("by the staged schedule") != std::string::npos, std::string(engine) == "staged") << engine;
    EXPECT_NE(log.find(": wire bf16"), std::string::npos) << engine << ": no INFO line of the wire";
  }
  SetEnvAndReload("RINGO_WIRE_ENGINE", "pipelined");
  SetEnvAndReload("RINGO_DEBUG", "WARN");
  for (size_t c = 0; c < cases.size(); ++c) {
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_TRUE(outputs["pipelined"][c * kRanks + r] == outputs["staged"][c * kRanks + r])
          << "case " << c << " (wire " << cases[c].wire << ", dtype " << cases[c].dtype << ", op " << cases[c].op
          << (cases[c].all_reduce ? ", all-reduce" : ", reduce-scatter") << (cases[c].in_place ? ", in place" : "")
          << ", count " << cases[c].count << "), rank " << r;
      // Every rank of an all-reduce holds the same bits.
      if (cases[c].all_reduce) {
        EXPECT_TRUE(outputs["staged"][c * kRanks + r] == outputs["staged"][c * kRanks]);
      }
      // In place gives the out-of-place bits (the twin is the case before).
      if (cases[c].in_place) {
        for (const char* engine : {"pipelined", "staged"}) {
          EXPECT_TRUE(outputs[engine][c * kRanks + r] == outputs[engine][(c - 1) * kRanks + r])
              << engine << ": case " << c << " in place differs from out of place, rank " << r;
        }
      }
    }
  }
}

// A rank killed in the middle of wire all-reduces across hosts: the others'
// call fails within the timeout (ringoRemoteError or ringoTimeout) and says
// which rank is gone, as for any collective.
TEST_F(WireTest, AKilledRankIsNamed) {
  auto results = RunRanks(3, RankMode::kProcesses, kDeadline, [&](int rank, int nranks, const ringoUniqueId& id) -> std::string {
    SetEnvAndReload("RINGO_SHM_DISABLE", "0");
    SetEnvAndReload("RINGO_HOSTID", "wire-fault-host-" + std::to_string(rank));
    SetEnvAndReload("RINGO_TIMEOUT_MS", "10000");
    ringoComm_t comm = nullptr;
    ringoResult_t rc = Init(&comm, rank, nranks, id, ringoWireBf16);
    if (rc != ringoSuccess) return Err("init", rc, nullptr);
    std::vector<float> in(1 << 20, 0.5f), out(1 << 20);
    for (int i = 0; i < 2; ++i) {
      rc = ringoAllReduce(in.data(), out.data(), in.size(), ringoFloat32, ringoSum, comm, nullptr);
      if (rc != ringoSuccess || out[7] != 1.5f) return Err("warm-up", rc, comm);
    }
    if (rank == 2) {
      SignalSelfAfter(std::chrono::milliseconds(50), SIGKILL);
      for (;;) ringoAllReduce(in.data(), out.data(), in.size(), ringoFloat32, ringoSum, comm, nullptr);
    }
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < std::chrono::seconds(40)) {
      const auto call = std::chrono::steady_clock::now();
      rc = ringoAllReduce(in.data(), out.data(), in.size(), ringoFloat32, ringoSum, comm, nullptr);
      if (rc == ringoSuccess) continue;
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - call).count();
      const std::string why = ringoGetLastError(comm);
      ringoCommAbort(comm);
      if (rc != ringoRemoteError && rc != ringoTimeout) return "failed with " + std::string(ringoGetErrorString(rc));
      if (seconds > 15) return "the failing call took " + std::to_string(seconds) + " s";
      if (why.find("rank 2") == std::string::npos) return "the error does not name rank 2: " + why;
      return "";
    }
    return "no error within 40 s although rank 2 is gone";
  });
  EXPECT_TRUE(RanksMatch(results, {{2, RankExpectation::KilledBy(SIGKILL)}}));
}

// Ranks that set different wires (ringoCommSetWire is each rank's own):
// the one with a wire compresses over point-to-point pairs, the other runs
// the ring, and their exchanges never meet. Both fail within the timeout,
// and the hang diagnosis, which the timeout's error carries, says which
// rank runs which wire.
TEST_F(WireTest, RanksWithDifferentWiresAreNamed) {
  const std::string dir = [] {
    char tmpl[] = "/tmp/ringo-wire-mismatch-XXXXXX";
    const char* d = mkdtemp(tmpl);
    return std::string(d != nullptr ? d : "/tmp");
  }();
  auto results = RunRanks(2, RankMode::kProcesses, kDeadline, [&](int rank, int nranks, const ringoUniqueId& id) -> std::string {
    SetEnvAndReload("RINGO_HOSTID", "wire-mismatch-host-" + std::to_string(rank));
    SetEnvAndReload("RINGO_TIMEOUT_MS", "4000");
    SetEnvAndReload("RINGO_STALL_MS", "500");
    ringoComm_t comm = nullptr;
    ringoResult_t rc = Init(&comm, rank, nranks, id, rank == 0 ? ringoWireBf16 : ringoWireNone);
    if (rc != ringoSuccess) return Err("init", rc, nullptr);
    std::vector<float> in(1 << 18, 0.5f), out(1 << 18);
    const auto start = std::chrono::steady_clock::now();
    rc = ringoAllReduce(in.data(), out.data(), in.size(), ringoFloat32, ringoSum, comm, nullptr);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string why = rc == ringoSuccess ? "" : ringoGetLastError(comm);
    std::ofstream(dir + "/" + std::to_string(rank)) << why;
    ringoCommAbort(comm);
    if (rc == ringoSuccess) return "the all-reduce succeeded although the ranks set different wires";
    if (seconds > 15) return "the failing call took " + std::to_string(seconds) + " s";
    return "";
  });
  EXPECT_ALL_RANKS_OK(results);
  bool named = false;
  std::string errors;
  for (int r = 0; r < 2; ++r) {
    std::ifstream in(dir + "/" + std::to_string(r));
    const std::string why((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    errors += "\n  rank " + std::to_string(r) + ": " + why;
    named = named || (why.find("different wire formats") != std::string::npos &&
                      why.find("rank 0 bf16") != std::string::npos && why.find("rank 1 none") != std::string::npos);
  }
  EXPECT_TRUE(named) << "no rank's error names the two wires:" << errors;
}

TEST_F(WireTest, ApiRefusalsAndInheritance) {
  auto results = RunRanks(2, RankMode::kThreads, kDeadline, [&](int rank, int nranks, const ringoUniqueId& id) -> std::string {
    ringoComm_t comm = nullptr;
    ringoResult_t rc = Init(&comm, rank, nranks, id, -1);
    if (rc != ringoSuccess) return Err("init", rc, nullptr);
    int wire = -5;
    rc = ringoCommGetWire(comm, &wire);
    if (rc != ringoSuccess || wire != ringoWireNone) return "RINGO_WIRE unset: wire " + std::to_string(wire);
    std::string f = CheckFails("wire 5", ringoCommSetWire(comm, 5), ringoInvalidArgument, {"not a ringowire_t"});
    if (!f.empty()) return f;
    f = CheckFails("wire -1", ringoCommSetWire(comm, -1), ringoInvalidArgument, {"not a ringowire_t"});
    if (!f.empty()) return f;
    f = CheckFails("null out", ringoCommGetWire(comm, nullptr), ringoInvalidArgument, {"null"});
    if (!f.empty()) return f;
    // Where the wire does not apply, ringoCommWireRound copies.
    rc = ringoCommSetWire(comm, ringoWireFp8e4m3);
    if (rc != ringoSuccess) return Err("set", rc, comm);
    int32_t in[3] = {11, -23, 7}, out[3] = {};
    rc = ringoCommWireRound(in, out, 3, ringoInt32, ringoMax, comm);
    if (rc != ringoSuccess || std::memcmp(in, out, sizeof(in)) != 0) return Err("wire round of int32 max", rc, comm);
    f = CheckFails("wire round, bad datatype", ringoCommWireRound(in, out, 3, static_cast<ringoDataType_t>(99), ringoSum, comm),
                   ringoInvalidArgument, {"datatype"});
    if (!f.empty()) return f;
    rc = ringoCommSetWire(comm, ringoWireFp8e5m2);
    if (rc != ringoSuccess) return Err("set", rc, comm);
    ringoComm_t child = nullptr;
    rc = ringoCommSplit(comm, 0, rank, &child, nullptr);
    if (rc != ringoSuccess) return Err("split", rc, comm);
    rc = ringoCommGetWire(child, &wire);
    if (rc != ringoSuccess || wire != ringoWireFp8e5m2) return "the split child's wire: " + std::to_string(wire);
    ringoCommDestroy(child);
    ringoCommDestroy(comm);
    return "";
  });
  EXPECT_ALL_RANKS_OK(results);
  // A config's wire out of range fails init, before any rendezvous.
  ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
  config.wire = 9;
  ringoUniqueId id{};  // never decoded: the config is read first
  ringoComm_t comm = nullptr;
  EXPECT_TRUE(FailsWith(ringoCommInitRankConfig(&comm, 2, id, 0, &config), ringoInvalidArgument, nullptr, {"wire"}));
}

}  // namespace
}  // namespace ringo::tests
