// Mismatched calls: ranks that call different collectives (count, datatype,
// op, collective, root) must get ringoInvalidUsage naming both calls, on every
// rank, on every algorithm (one-shot, direct over ringoMemAlloc buffers,
// ring), with the guard bytes around every buffer unchanged and no crash.
// With RINGO_CHECK=0 nothing is compared, but nothing may crash or write
// outside a buffer either. Ranks are forked processes.
#include <signal.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ringo/ringo.h"
#include "tests/api_test_util.h"
#include "tests/harness.h"

namespace ringo::tests {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kDeadline{60000};
constexpr size_t kGuard = 256;
constexpr unsigned char kGuardByte = 0xa5;

enum class Coll { kAllReduce, kBroadcast, kReduce };

struct Call {
  Coll coll = Coll::kAllReduce;
  size_t count = 0;
  ringoDataType_t dtype = ringoFloat32;
  ringoRedOp_t op = ringoSum;
  int root = 0;
};

size_t ElemBytes(ringoDataType_t t) { return t == ringoFloat64 ? 8 : 4; }

std::string Describe(const Call& c) {
  const char* names[] = {"AllReduce", "Broadcast", "Reduce"};
  return std::string(names[static_cast<int>(c.coll)]) + "(" + std::to_string(c.count) + ", " +
         (c.dtype == ringoFloat64 ? "f64" : "f32") + ", op " + std::to_string(c.op) + ", root " +
         std::to_string(c.root) + ")";
}

// A buffer of `bytes` with guard bytes on both sides, from ringoMemAlloc
// (shared, for the direct path) or the heap.
class Guarded {
 public:
  Guarded(size_t bytes, bool shared) : bytes_(bytes), shared_(shared) {
    const size_t total = bytes + 2 * kGuard;
    if (shared) {
      if (ringoMemAlloc(&base_, total) != ringoSuccess) base_ = nullptr;
    } else {
      heap_.resize(total);
      base_ = heap_.data();
    }
    if (base_ != nullptr) {
      std::memset(base_, kGuardByte, total);
      std::memset(data(), 0, bytes);
    }
  }
  ~Guarded() {
    if (shared_ && base_ != nullptr) ringoMemFree(base_);
  }
  bool ok() const { return base_ != nullptr; }
  char* data() { return static_cast<char*>(base_) + kGuard; }
  bool GuardsIntact() const {
    const auto* b = static_cast<const unsigned char*>(base_);
    for (size_t i = 0; i < kGuard; ++i) {
      if (b[i] != kGuardByte || b[kGuard + bytes_ + i] != kGuardByte) return false;
    }
    return true;
  }

 private:
  size_t bytes_;
  bool shared_;
  void* base_ = nullptr;
  std::vector<char> heap_;
};

ringoResult_t Issue(const Call& c, const void* send, void* recv, ringoComm_t comm) {
  switch (c.coll) {
    case Coll::kAllReduce: return ringoAllReduce(send, recv, c.count, c.dtype, c.op, comm, nullptr);
    case Coll::kBroadcast: return ringoBroadcast(send, recv, c.count, c.dtype, c.root, comm, nullptr);
    case Coll::kReduce: return ringoReduce(send, recv, c.count, c.dtype, c.op, c.root, comm, nullptr);
  }
  return ringoInternalError;
}

enum class Kind { kCount, kCountZero, kDatatype, kOp, kCollective, kRoot };

// The call rank `odd` makes instead of `base`.
Call Mismatched(Call base, Kind kind) {
  switch (kind) {
    case Kind::kCount: base.count *= 2; break;
    case Kind::kCountZero: base.count = 0; break;
    case Kind::kDatatype: base.dtype = ringoFloat64; break;
    case Kind::kOp: base.op = ringoMax; break;
    case Kind::kCollective: base.coll = Coll::kBroadcast; break;
    case Kind::kRoot: base.root = 1; break;
  }
  return base;
}

struct Case {
  std::string algo;  // RINGO_ALGO
  Kind kind;
  size_t count;
  int nranks;
  int odd;  // the rank that calls differently
};

std::string CaseName(const Case& c) {
  const char* kinds[] = {"Count", "CountZero", "Datatype", "Op", "Collective", "Root"};
  return c.algo + "_" + kinds[static_cast<int>(c.kind)] + "_" + std::to_string(c.count) + "_" +
         std::to_string(c.nranks) + "ranks_odd" + std::to_string(c.odd);
}

std::string InitHost(int nranks, const ringoUniqueId& id, int rank, ringoComm_t* comm) {
  ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
  config.device_kind = RINGO_DEVICE_HOST;
  ringoResult_t rc = ringoCommInitRankConfig(comm, nranks, id, rank, &config);
  if (rc == ringoSuccess) return "";
  return "init returned " + ResultName(rc) + ": " + ringoGetLastError(nullptr);
}

// One rank of a mismatch case. `checked`: RINGO_CHECK is on.
std::string MismatchRank(const Case& c, bool checked, int rank, int nranks, const ringoUniqueId& id) {
  ringoComm_t comm = nullptr;
  std::string problem = InitHost(nranks, id, rank, &comm);
  if (!problem.empty()) return problem;
  {
    float in[4] = {1, 2, 3, 4}, out[4] = {};
    const ringoResult_t rc = ringoAllReduce(in, out, 4, ringoFloat32, ringoSum, comm, nullptr);
    if (rc != ringoSuccess || out[3] != 4.0f * nranks) {
      return "the warm-up AllReduce returned " + ResultName(rc) + " (" + ringoGetLastError(comm) + ") and " +
             std::to_string(out[3]);
    }
  }
  Call base;
  base.coll = c.kind == Kind::kRoot ? Coll::kBroadcast : Coll::kAllReduce;
  base.count = c.count;
  const Call mine = rank == c.odd ? Mismatched(base, c.kind) : base;
  const bool shared = c.algo == "direct";
  const size_t bytes = mine.count * ElemBytes(mine.dtype);
  Guarded send(bytes, shared), recv(bytes, shared);
  if (!send.ok() || !recv.ok()) return "ringoMemAlloc failed";
  for (size_t i = 0; i < bytes; ++i) send.data()[i] = static_cast<char>(i * 7 + rank);
  const ringoResult_t rc = Issue(mine, send.data(), recv.data(), comm);
  const std::string msg = ringoGetLastError(comm);
  std::string problems;
  if (!send.GuardsIntact() || !recv.GuardsIntact()) {
    problems += "a guard byte around this rank's buffers changed (a stray write); ";
  }
  if (checked) {
    // Every rank of two learns it in the call itself; with more ranks, a
    // rank of a ring Broadcast or Reduce whose own part completed with
    // correct data may learn it at its next call (docs/api.md: mismatched calls).
    const bool may_learn_later =
        c.algo == "ring" && nranks > 2 && (mine.coll != Coll::kAllReduce || base.coll != Coll::kAllReduce ||
                                            Mismatched(base, c.kind).coll != Coll::kAllReduce);
    ringoResult_t got = rc;
    std::string got_msg = msg;
    if (rc == ringoSuccess && may_learn_later) {
      float in[4] = {}, out[4];
      got = ringoAllReduce(in, out, 4, ringoFloat32, ringoSum, comm, nullptr);
      got_msg = ringoGetLastError(comm);
    }
    if (got != ringoInvalidUsage) {
      problems += Describe(mine) + " returned " + ResultName(got) + ", want ringoInvalidUsage: " + got_msg + "; ";
    } else if (got_msg.find("mismatched collectives") == std::string::npos) {
      problems += "the message does not name both calls: " + got_msg + "; ";
    }
  } else if (rc != ringoSuccess && rc != ringoInvalidUsage && rc != ringoRemoteError && rc != ringoTimeout) {
    problems += Describe(mine) + " returned " + ResultName(rc) + ": " + msg + "; ";
  }
  ringoCommAbort(comm);
  return problems;
}

void RunCase(const Case& c, bool checked) {
  ScopedEnv env({{"RINGO_ALGO", c.algo},
                 {"RINGO_CHECK", checked ? "1" : "0"},
                 {"RINGO_TIMEOUT_MS", checked ? "10000" : "2000"},
                 {"RINGO_COMM_ID", std::nullopt}});
  auto results = RunRanks(c.nranks, RankMode::kProcesses, kDeadline,
                          [&](int rank, int nranks, const ringoUniqueId& id) {
                            return MismatchRank(c, checked, rank, nranks, id);
                          });
  EXPECT_ALL_RANKS_OK(results) << CaseName(c) << (checked ? "" : " (RINGO_CHECK=0)");
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  const Kind kinds[] = {Kind::kCount, Kind::kCountZero, Kind::kDatatype, Kind::kOp, Kind::kCollective, Kind::kRoot};
  struct Algo {
    const char* name;
    size_t count;
  };
  // One-shot: LL posts (16 floats) and plain ones (1024); direct: large
  // enough to be worth it; ring: a few slots and many.
  const Algo algos[] = {{"oneshot", 16}, {"oneshot", 1024}, {"direct", 64 << 10}, {"ring", 16}, {"ring", 64 << 10}};
  for (const Algo& a : algos) {
    for (Kind k : kinds) {
      for (int n = 2; n <= 4; ++n) {
        // A large count doubled does not fit the board: the one-shot runs the small ones.
        if (std::string(a.name) == "oneshot" && k == Kind::kCount && a.count > 4096) continue;
        cases.push_back(Case{a.name, k, a.count, n, n - 1});
        if (n == 4) cases.push_back(Case{a.name, k, a.count, n, 1});  // the odd rank inside the ring
      }
    }
  }
  return cases;
}

class Mismatch : public ::testing::TestWithParam<Case> {};

TEST_P(Mismatch, InvalidUsageOnEveryRank) { RunCase(GetParam(), /*checked=*/true); }

INSTANTIATE_TEST_SUITE_P(Checked, Mismatch, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return CaseName(info.param); });

// RINGO_CHECK=0: no comparison, so calls may fail late or succeed with
// meaningless data, but nothing may crash, hang past the timeout, or write
// outside a buffer: the direct path never reaches past the bytes a peer
// published, a one-shot reader never waits for words a peer never posts.
class MismatchUnchecked : public ::testing::TestWithParam<Case> {};

TEST_P(MismatchUnchecked, NoCrashNoStrayWrite) { RunCase(GetParam(), /*checked=*/false); }

INSTANTIATE_TEST_SUITE_P(
    Unchecked, MismatchUnchecked,
    ::testing::Values(
        // A one-shot reader expecting more LL words than were posted.
        Case{"oneshot", Kind::kCount, 16, 2, 1}, Case{"oneshot", Kind::kCountZero, 16, 2, 1},
        Case{"oneshot", Kind::kCollective, 16, 2, 1},
        // The direct path addressing a peer's region with its own count.
        Case{"direct", Kind::kDatatype, 64 << 10, 2, 1}, Case{"direct", Kind::kCount, 64 << 10, 2, 1},
        Case{"direct", Kind::kCount, 64 << 10, 3, 2}),
    [](const ::testing::TestParamInfo<Case>& info) { return CaseName(info.param); });

// The exact report: 4M float32 against 4M float64 over ringoMemAlloc
// buffers, with and without RINGO_CHECK: no write past the float32 rank's
// output, an error on both.
TEST(MismatchDirect, LargeDatatypeMismatchNeverWritesPastAPeersBuffer) {
  for (bool checked : {true, false}) {
    Case c{"direct", Kind::kDatatype, 4 << 20, 2, 1};
    ScopedEnv env({{"RINGO_ALGO", std::nullopt},
                   {"RINGO_CHECK", checked ? "1" : "0"},
                   {"RINGO_TIMEOUT_MS", "10000"},
                   {"RINGO_COMM_ID", std::nullopt}});
    auto results = RunRanks(2, RankMode::kProcesses, kDeadline, [&](int rank, int nranks, const ringoUniqueId& id) {
      ringoComm_t comm = nullptr;
      std::string problem = InitHost(nranks, id, rank, &comm);
      if (!problem.empty()) return problem;
      const ringoDataType_t t = rank == 1 ? ringoFloat64 : ringoFloat32;
      const size_t bytes = c.count * ElemBytes(t);
      Guarded send(bytes, true), recv(bytes, true);
      if (!send.ok() || !recv.ok()) return std::string("ringoMemAlloc failed");
      const ringoResult_t rc = ringoAllReduce(send.data(), recv.data(), c.count, t, ringoSum, comm, nullptr);
      std::string problems;
      if (!recv.GuardsIntact() || !send.GuardsIntact()) problems += "a guard byte changed; ";
      if (rc != ringoInvalidUsage) problems += "returned " + ResultName(rc) + ": " + ringoGetLastError(comm);
      ringoCommAbort(comm);
      return problems;
    });
    EXPECT_ALL_RANKS_OK(results) << (checked ? "RINGO_CHECK=1" : "RINGO_CHECK=0");
  }
}

}  // namespace
}  // namespace ringo::tests
