// Recursive doubling (collectives/engines/doubling.h): small all-reduces of
// ranks on different hosts (each process a host id of its own, so every
// pair talks over TCP) in ceil(log2 N) exchanges.
//
// - Every datatype family and op at 2-8 ranks (powers of two and not):
//   integer-valued data gives the exact sum, product, max and min whatever
//   the order; random floats give the same bits on every rank and a sum
//   within (N - 1) u sum |x| of the fp64 one; avg and premul-sum as the op's
//   definition says.
// - Hosts of several ranks (2 x 2, 3 x 3): the hierarchical variant, exact
//   sums and the same bits on every rank.
// - RINGO_DETERMINISTIC keeps the ring's rank-order sum (the engine stands
//   aside); RINGO_ALGO=ring too.
// - Ranks that call different all-reduces fail naming both calls; a killed
//   rank is named within the timeout.
// - Small all-gathers by Bruck's algorithm from 4 ranks up (2-8 ranks, in
//   place and not, several sizes; RINGO_ALGO=doubling at 3 ranks), every
//   block where it belongs.
// - Small reduce-scatters by recursive halving where it takes fewer steps
//   than the ring (2-8 ranks; RINGO_ALGO=doubling at 3 and 5): exact
//   integer sums and maxima, float avg, in place and not.
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ringo/ringo.h"
#include "tests/api_test_util.h"
#include "tests/harness.h"

namespace ringo::tests {
namespace {

constexpr auto kDeadline = std::chrono::seconds(120);

std::string Err(const char* what, ringoResult_t rc, ringoComm_t comm) {
  const char* last = ringoGetLastError(comm);
  return std::string(what) + ": " + ringoGetErrorString(rc) + " (" + (last != nullptr ? last : "") + ")";
}

// Each rank a host of its own (or `per_host` ranks to a host), then a host
// communicator; with `log_dir`, its INFO log in log_dir/<rank>.log.
ringoResult_t InitAsHost(ringoComm_t* comm, int rank, int nranks, const ringoUniqueId& id, int per_host = 1,
                         const std::string& log_dir = "") {
  SetEnvAndReload("RINGO_HOSTID", "doubling-host-" + std::to_string(rank / per_host));
  if (!log_dir.empty()) {
    SetEnvAndReload("RINGO_DEBUG_FILE", log_dir + "/" + std::to_string(rank) + ".log");
    SetEnvAndReload("RINGO_DEBUG", "INFO");
  }
  ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
  config.device_kind = RINGO_DEVICE_HOST;
  return ringoCommInitRankConfig(comm, nranks, id, rank, &config);
}

std::vector<float> Floats(int rank, int64_t count, uint32_t seed) {
  std::mt19937 gen(seed * 7919u + static_cast<uint32_t>(rank));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(count));
  for (auto& v : x) v = normal(gen);
  return x;
}

// Whether rank `rank`'s log (InitAsHost's log_dir) says `phrase`: which
// engine ran.
bool LogSays(const std::string& dir, int rank, const std::string& phrase) {
  std::ifstream in(dir + "/" + std::to_string(rank) + ".log");
  const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return log.find(phrase) != std::string::npos;
}

bool RanDoubling(const std::string& dir, int rank) { return LogSays(dir, rank, "by recursive doubling"); }

// A folder the ranks write their results into, compared afterwards.
std::string ResultsDir() {
  char tmpl[] = "/tmp/ringo-doubling-XXXXXX";
  const char* dir = mkdtemp(tmpl);
  return dir != nullptr ? dir : "/tmp";
}

void Save(const std::string& dir, int rank, const void* data, size_t bytes) {
  std::ofstream(dir + "/" + std::to_string(rank), std::ios::binary).write(static_cast<const char*>(data), bytes);
}

std::string Load(const std::string& dir, int rank) {
  std::ifstream in(dir + "/" + std::to_string(rank), std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class DoublingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { SetEnvAndReload("RINGO_SHM_DISABLE", "1"); }
};

// Exact results (integer-valued data) for every op and datatype family, and
// float sums with the same bits on every rank.
TEST_F(DoublingTest, EveryRankCountOpAndDatatype) {
  for (int nranks : {2, 3, 4, 5, 7, 8}) {
    SCOPED_TRACE(std::to_string(nranks) + " ranks");
    const std::string dir = ResultsDir();
    constexpr int64_t kCount = 1001;  // 4 KiB of fp32: the model picks doubling
    auto results = RunRanks(nranks, RankMode::kProcesses, kDeadline, [&](int rank, int n, const ringoUniqueId& id) -> std::string {
      ringoComm_t comm = nullptr;
      ringoResult_t rc = InitAsHost(&comm, rank, n, id, 1, dir);
      if (rc != ringoSuccess) return Err("init", rc, nullptr);
      // int32: sum, prod (of +-1 and 2s), max, min: exact.
      std::vector<int32_t> in(kCount), out(kCount);
      for (int64_t i = 0; i < kCount; ++i) in[i] = static_cast<int32_t>((i * 7 + rank * 13) % 101 - 50);
      for (ringoRedOp_t op : {ringoSum, ringoMax, ringoMin}) {
        rc = ringoAllReduce(in.data(), out.data(), kCount, ringoInt32, op, comm, nullptr);
        if (rc != ringoSuccess) return Err("int32 all-reduce", rc, comm);
        for (int64_t i = 0; i < kCount; ++i) {
          int64_t want = op == ringoSum ? 0 : (i * 7) % 101 - 50;
          for (int r = 0; r < n; ++r) {
            const int64_t v = (i * 7 + r * 13) % 101 - 50;
            want = op == ringoSum ? want + v : op == ringoMax ? std::max(want, v) : std::min(want, v);
          }
          if (out[i] != want) return "int32 op " + std::to_string(op) + " element " + std::to_string(i);
        }
      }
      for (int64_t i = 0; i < kCount; ++i) in[i] = (i + rank) % 3 == 0 ? 2 : ((i + rank) % 2 ? -1 : 1);
      rc = ringoAllReduce(in.data(), out.data(), kCount, ringoInt32, ringoProd, comm, nullptr);
      if (rc != ringoSuccess) return Err("int32 prod", rc, comm);
      for (int64_t i = 0; i < kCount; ++i) {
        int64_t want = 1;
        for (int r = 0; r < n; ++r) want *= (i + r) % 3 == 0 ? 2 : ((i + r) % 2 ? -1 : 1);
        if (out[i] != want) return "int32 prod element " + std::to_string(i);
      }
      // bf16 of small integers: every partial sum exact.
      std::vector<uint16_t> h(kCount), hout(kCount);
      for (int64_t i = 0; i < kCount; ++i) {
        const float v = static_cast<float>((i + rank) % 9);
        uint32_t b;
        std::memcpy(&b, &v, 4);
        h[i] = static_cast<uint16_t>(b >> 16);
      }
      rc = ringoAllReduce(h.data(), hout.data(), kCount, ringoBfloat16, ringoSum, comm, nullptr);
      if (rc != ringoSuccess) return Err("bf16 sum", rc, comm);
      for (int64_t i = 0; i < kCount; ++i) {
        int want = 0;
        for (int r = 0; r < n; ++r) want += static_cast<int>((i + r) % 9);
        const uint32_t b = static_cast<uint32_t>(hout[i]) << 16;
        float got;
        std::memcpy(&got, &b, 4);
        if (got != static_cast<float>(want)) return "bf16 element " + std::to_string(i);
      }
      // Random floats, in place: the same bits everywhere (saved), within the bound.
      std::vector<float> x = Floats(rank, kCount, 5);
      rc = ringoAllReduce(x.data(), x.data(), kCount, ringoFloat32, ringoSum, comm, nullptr);
      if (rc != ringoSuccess) return Err("float sum", rc, comm);
      for (int64_t i = 0; i < kCount; ++i) {
        double exact = 0, mag = 0;
        for (int r = 0; r < n; ++r) {
          const double v = Floats(r, kCount, 5)[i];
          exact += v;
          mag += std::fabs(v);
        }
        if (std::fabs(x[i] - exact) > n * std::ldexp(1.0, -24) * mag) return "float sum element " + std::to_string(i);
      }
      Save(dir, rank, x.data(), x.size() * 4);
      // avg: each input times 1/N, summed.
      std::vector<float> ones(kCount, static_cast<float>(rank + 1)), avg(kCount);
      rc = ringoAllReduce(ones.data(), avg.data(), kCount, ringoFloat32, ringoAvg, comm, nullptr);
      if (rc != ringoSuccess) return Err("float avg", rc, comm);
      const double want_avg = (n + 1) / 2.0;
      if (std::fabs(avg[17] - want_avg) > 4 * n * std::ldexp(1.0, -24) * want_avg) {
        return "float avg " + std::to_string(avg[17]) + ", want " + std::to_string(want_avg);
      }
      rc = ringoCommDestroy(comm);
      return rc == ringoSuccess ? "" : Err("destroy", rc, nullptr);
    });
    EXPECT_ALL_RANKS_OK(results);
    const std::string first = Load(dir, 0);
    ASSERT_EQ(first.size(), kCount * 4u);
    for (int r = 1; r < nranks; ++r) EXPECT_TRUE(Load(dir, r) == first) << "rank " << r << "'s float sum differs from rank 0's";
    for (int r = 0; r < nranks; ++r) EXPECT_TRUE(RanDoubling(dir, r)) << "rank " << r << " did not run recursive doubling";
  }
}

TEST_F(DoublingTest, BruckAllGather) {
  for (int nranks : {2, 3, 4, 5, 7, 8, -3}) {  // -3: 3 ranks with RINGO_ALGO=doubling
    const bool forced = nranks < 0;
    const int n_ranks = forced ? -nranks : nranks;
    SCOPED_TRACE(std::to_string(n_ranks) + " ranks" + (forced ? ", RINGO_ALGO=doubling" : ""));
    const std::string dir = ResultsDir();
    auto results = RunRanks(n_ranks, RankMode::kProcesses, kDeadline, [&](int rank, int n, const ringoUniqueId& id) -> std::string {
      if (forced) SetEnvAndReload("RINGO_ALGO", "doubling");
      ringoComm_t comm = nullptr;
      ringoResult_t rc = InitAsHost(&comm, rank, n, id, 1, dir);
      if (rc != ringoSuccess) return Err("init", rc, nullptr);
      for (int64_t count : {1, 13, 1000, 8000}) {
        // Out of place, int32: element i of rank r's block is r * 100000 + i.
        std::vector<int32_t> in(count), out(count * n, -1);
        for (int64_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>(rank * 100000 + i);
        rc = ringoAllGather(in.data(), out.data(), count, ringoInt32, comm, nullptr);
        if (rc != ringoSuccess) return Err("all-gather", rc, comm);
        for (int r = 0; r < n; ++r) {
          for (int64_t i = 0; i < count; ++i) {
            if (out[r * count + i] != r * 100000 + i) {
              return "count " + std::to_string(count) + ": block " + std::to_string(r) + " element " + std::to_string(i);
            }
          }
        }
        // In place, bytes: each rank's block already in its place in the output.
        std::vector<uint8_t> buf(count * n, 0);
        for (int64_t i = 0; i < count; ++i) buf[rank * count + i] = static_cast<uint8_t>(rank * 31 + i);
        rc = ringoAllGather(buf.data() + rank * count, buf.data(), count, ringoUint8, comm, nullptr);
        if (rc != ringoSuccess) return Err("in-place all-gather", rc, comm);
        for (int r = 0; r < n; ++r) {
          for (int64_t i = 0; i < count; ++i) {
            if (buf[r * count + i] != static_cast<uint8_t>(r * 31 + i)) {
              return "in place, count " + std::to_string(count) + ": block " + std::to_string(r);
            }
          }
        }
      }
      rc = ringoCommDestroy(comm);
      return rc == ringoSuccess ? "" : Err("destroy", rc, nullptr);
    });
    EXPECT_ALL_RANKS_OK(results);
    const bool want = forced || n_ranks >= 4;
    for (int r = 0; r < n_ranks; ++r) {
      EXPECT_EQ(LogSays(dir, r, "by Bruck's algorithm"), want) << "rank " << r << (want ? " did not run" : " ran") << " Bruck's all-gather";
    }
  }
}

TEST_F(DoublingTest, RecursiveHalvingReduceScatter) {
  for (int nranks : {2, 3, 4, 5, 6, 7, 8, -3, -5}) {  // negative: RINGO_ALGO=doubling
    const bool forced = nranks < 0;
    const int n_ranks = forced ? -nranks : nranks;
    SCOPED_TRACE(std::to_string(n_ranks) + " ranks" + (forced ? ", RINGO_ALGO=doubling" : ""));
    const std::string dir = ResultsDir();
    auto results = RunRanks(n_ranks, RankMode::kProcesses, kDeadline, [&](int rank, int n, const ringoUniqueId& id) -> std::string {
      if (forced) SetEnvAndReload("RINGO_ALGO", "doubling");
      ringoComm_t comm = nullptr;
      ringoResult_t rc = InitAsHost(&comm, rank, n, id, 1, dir);
      if (rc != ringoSuccess) return Err("init", rc, nullptr);
      auto value = [](int r, int64_t e) { return static_cast<int32_t>((e * 7 + r * 13) % 101 - 50); };
      for (int64_t count : {1, 17, 1000}) {
        std::vector<int32_t> in(count * n), out(count, -7);
        for (int64_t e = 0; e < count * n; ++e) in[e] = value(rank, e);
        for (ringoRedOp_t op : {ringoSum, ringoMax}) {
          rc = ringoReduceScatter(in.data(), out.data(), count, ringoInt32, op, comm, nullptr);
          if (rc != ringoSuccess) return Err("reduce-scatter", rc, comm);
          for (int64_t i = 0; i < count; ++i) {
            const int64_t e = rank * count + i;
            int64_t want = op == ringoSum ? 0 : value(0, e);
            for (int r = 0; r < n; ++r) want = op == ringoSum ? want + value(r, e) : std::max<int64_t>(want, value(r, e));
            if (out[i] != want) {
              return "count " + std::to_string(count) + " op " + std::to_string(op) + " element " + std::to_string(i) +
                     ": " + std::to_string(out[i]) + ", want " + std::to_string(want);
            }
          }
        }
        // Float avg in place: rank r gives r + 1 everywhere; each block's
        // result is (N + 1) / 2.
        std::vector<float> buf(count * n, static_cast<float>(rank + 1));
        rc = ringoReduceScatter(buf.data(), buf.data() + rank * count, count, ringoFloat32, ringoAvg, comm, nullptr);
        if (rc != ringoSuccess) return Err("in-place avg", rc, comm);
        for (int64_t i = 0; i < count; ++i) {
          const double want = (n + 1) / 2.0;
          if (std::fabs(buf[rank * count + i] - want) > 4 * n * std::ldexp(1.0, -24) * want) {
            return "avg element " + std::to_string(i) + ": " + std::to_string(buf[rank * count + i]);
          }
        }
      }
      rc = ringoCommDestroy(comm);
      return rc == ringoSuccess ? "" : Err("destroy", rc, nullptr);
    });
    EXPECT_ALL_RANKS_OK(results);
    const bool want = forced || n_ranks == 4 || n_ranks >= 6;
    for (int r = 0; r < n_ranks; ++r) {
      EXPECT_EQ(LogSays(dir, r, "by recursive halving"), want) << "rank " << r << (want ? " did not run" : " ran") << " recursive halving";
    }
  }
}

// Hosts of several ranks: the hierarchical variant (each host's leader
// combines, the leaders double, the leaders send back), exact int64 sums and
// the same float bits on every rank, 2 hosts of 2 and 3 hosts of 3.
TEST_F(DoublingTest, HostsOfSeveralRanksGoHierarchical) {
  for (const auto& [nranks_total, per_host] : std::vector<std::pair<int, int>>{{4, 2}, {9, 3}}) {
  SCOPED_TRACE(std::to_string(nranks_total / per_host) + " hosts of " + std::to_string(per_host));
  const std::string dir = ResultsDir();
  auto results = RunRanks(nranks_total, RankMode::kProcesses, kDeadline, [&, per_host = per_host](int rank, int nranks, const ringoUniqueId& id) -> std::string {
    SetEnvAndReload("RINGO_SHM_DISABLE", "0");
    ringoComm_t comm = nullptr;
    ringoResult_t rc = InitAsHost(&comm, rank, nranks, id, per_host, dir);
    if (rc != ringoSuccess) return Err("init", rc, nullptr);
    for (int64_t count : {1, 2, 255, 4096, 30000}) {
      std::vector<int64_t> in(count), out(count);
      for (int64_t i = 0; i < count; ++i) in[i] = i * (rank + 1);
      rc = ringoAllReduce(in.data(), out.data(), count, ringoInt64, ringoSum, comm, nullptr);
      if (rc != ringoSuccess) return Err("int64 sum", rc, comm);
      const int64_t ranks_sum = static_cast<int64_t>(nranks) * (nranks + 1) / 2;
      for (int64_t i = 0; i < count; ++i) {
        if (out[i] != i * ranks_sum) return "count " + std::to_string(count) + " element " + std::to_string(i);
      }
    }
    std::vector<float> x = Floats(rank, 1000, 9);
    rc = ringoAllReduce(x.data(), x.data(), x.size(), ringoFloat32, ringoSum, comm, nullptr);
    if (rc != ringoSuccess) return Err("float sum", rc, comm);
    Save(dir, rank, x.data(), x.size() * 4);
    rc = ringoCommDestroy(comm);
    return rc == ringoSuccess ? "" : Err("destroy", rc, nullptr);
  });
  EXPECT_ALL_RANKS_OK(results);
  const std::string first = Load(dir, 0);
  for (int r = 1; r < nranks_total; ++r) EXPECT_TRUE(Load(dir, r) == first) << "rank " << r << "'s float sum differs";
  for (int r = 0; r < nranks_total; ++r) {
    EXPECT_TRUE(LogSays(dir, r, "by recursive doubling, hierarchical")) << "rank " << r;
  }
  }
}

// RINGO_DETERMINISTIC: the ring's rank-order sum, bit for bit.
TEST_F(DoublingTest, DeterministicModeKeepsTheRankOrder) {
  constexpr int64_t kCount = 777;
  const std::string dir = ResultsDir();
  auto results = RunRanks(5, RankMode::kProcesses, kDeadline, [&](int rank, int nranks, const ringoUniqueId& id) -> std::string {
    SetEnvAndReload("RINGO_DETERMINISTIC", "1");
    ringoComm_t comm = nullptr;
    ringoResult_t rc = InitAsHost(&comm, rank, nranks, id, 1, dir);
    if (rc != ringoSuccess) return Err("init", rc, nullptr);
    std::vector<float> x = Floats(rank, kCount, 9), out(kCount);
    rc = ringoAllReduce(x.data(), out.data(), kCount, ringoFloat32, ringoSum, comm, nullptr);
    if (rc != ringoSuccess) return Err("sum", rc, comm);
    for (int64_t i = 0; i < kCount; ++i) {
      float want = 0;
      for (int r = 0; r < nranks; ++r) want = r == 0 ? Floats(r, kCount, 9)[i] : want + Floats(r, kCount, 9)[i];
      if (std::memcmp(&want, &out[i], 4) != 0) return "not the rank-order sum at element " + std::to_string(i);
    }
    rc = ringoCommDestroy(comm);
    return rc == ringoSuccess ? "" : Err("destroy", rc, nullptr);
  });
  EXPECT_ALL_RANKS_OK(results);
  for (int r = 0; r < 5; ++r) EXPECT_FALSE(RanDoubling(dir, r)) << "rank " << r << " ran recursive doubling";
}

TEST_F(DoublingTest, MismatchedCallsAreNamed) {
  auto results = RunRanks(4, RankMode::kProcesses, kDeadline, [&](int rank, int nranks, const ringoUniqueId& id) -> std::string {
    // Ranks whose partners failed and left learn it at the latest by the timeout.
    SetEnvAndReload("RINGO_TIMEOUT_MS", "3000");
    ringoComm_t comm = nullptr;
    ringoResult_t rc = InitAsHost(&comm, rank, nranks, id);
    if (rc != ringoSuccess) return Err("init", rc, nullptr);
    std::vector<float> x(64, 1.0f);
    rc = ringoAllReduce(x.data(), x.data(), 64, ringoFloat32, rank == 3 ? ringoMax : ringoSum, comm, nullptr);
    const std::string why = ringoGetLastError(comm);
    ringoCommAbort(comm);
    if (rc == ringoSuccess) return "a sum met a max and succeeded";
    // The rank that compared names both calls; the others may learn of it from it.
    if (why.find("mismatched collectives") == std::string::npos && why.find("rank") == std::string::npos) {
      return "the error names neither the calls nor a rank: " + why;
    }
    return "";
  });
  EXPECT_ALL_RANKS_OK(results);
}

TEST_F(DoublingTest, AKilledRankIsNamed) {
  auto results = RunRanks(4, RankMode::kProcesses, kDeadline, [&](int rank, int nranks, const ringoUniqueId& id) -> std::string {
    SetEnvAndReload("RINGO_TIMEOUT_MS", "10000");
    ringoComm_t comm = nullptr;
    ringoResult_t rc = InitAsHost(&comm, rank, nranks, id);
    if (rc != ringoSuccess) return Err("init", rc, nullptr);
    std::vector<float> x(16, 1.0f), out(16);
    rc = ringoAllReduce(x.data(), out.data(), 16, ringoFloat32, ringoSum, comm, nullptr);
    if (rc != ringoSuccess || out[3] != 4.0f) return Err("warm-up", rc, comm);
    if (rank == 2) {
      SignalSelfAfter(std::chrono::milliseconds(50), SIGKILL);
      for (;;) ringoAllReduce(x.data(), out.data(), 16, ringoFloat32, ringoSum, comm, nullptr);
    }
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < std::chrono::seconds(40)) {
      const auto call = std::chrono::steady_clock::now();
      rc = ringoAllReduce(x.data(), out.data(), 16, ringoFloat32, ringoSum, comm, nullptr);
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

}  // namespace
}  // namespace ringo::tests
