// Conformance of the host collectives against the reference in
// tests/reference.h: ranks x collective x datatype x op x count x in-place,
// every root for Broadcast and Reduce.
//
// Suites (one gtest case per rank count x collective x datatype [x op]; the
// counts, in-place/out-of-place and roots loop inside a case):
// - Threads: the full sweep, ranks 1..8 made with ringoCommInitAll, one
//   thread per rank, RINGO_SLOT_BYTES=64 so the sweep counts (0, 1, 7,
//   chunk-1, chunk, chunk+1, ~11 slots per rank) reach the multi-slot and
//   multi-loop paths.
// - Channels: a subset with RINGO_NCHANNELS=2.
// - Group: one thread drives every rank inside ringoGroupStart/End.
// - Processes: a subset with forked ranks (ringoCommInitRank over a unique
//   id), the shared-memory path across processes.
// - Large: several-MiB messages with the planner's own slot size.
// - Huge: outputs past the planner's streaming (non-temporal store) threshold.
// - OneShot, OneShotProcesses: RINGO_ALGO=oneshot, the board exchange for
//   small messages, up to and just past the board's capacity (which falls
//   back to the ring). The other suites pin RINGO_ALGO=ring so that small
//   counts take the ring's multi-chunk paths.
// - Direct, DirectOthers, DirectProcesses, DirectMixedProcesses:
//   RINGO_ALGO=direct, every collective run straight on every rank's
//   buffers: ranks as threads (any buffers), as processes with ringoMemAlloc
//   buffers, and as processes where rank 0's buffers are plain heap memory
//   (the ring takes over where another rank needs them). Large and Huge
//   (planner's choice) reach the direct path for threads too.
#include <algorithm>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "base/config.h"
#include "gtest/gtest.h"
#include "ringo/ringo.h"
#include "tests/collective_case.h"
#include "tests/harness.h"
#include "tests/reference.h"

namespace ringo::tests {
namespace {

using std::chrono::milliseconds;

// Generous: a correct run of the largest case takes a few seconds on 2 cores;
// a hang turns into ringoTimeout long before (RINGO_TIMEOUT_MS in BUILD).
constexpr milliseconds kDeadline{120000};
// A rank stops listing failures after this many, so one broken path does not
// bury the report.
constexpr int kMaxFailuresPerRank = 8;
// "Several MiB": the total message (nccl-tests' size) of a large case.
constexpr size_t kLargeBytes = size_t{3} << 20;

// The configuration communicators are created with.
struct Variant {
  int slot_bytes = 0;          // RINGO_SLOT_BYTES; 0: unset (the planner chooses)
  int nchannels = 0;           // RINGO_NCHANNELS; 0: unset
  const char* algo = nullptr;  // RINGO_ALGO; nullptr: unset
  bool operator==(const Variant& o) const {
    return slot_bytes == o.slot_bytes && nchannels == o.nchannels &&
           std::string(algo ? algo : "") == std::string(o.algo ? o.algo : "");
  }
};
constexpr Variant kSmallSlots{64, 0, "ring"};
constexpr Variant kTwoChannels{64, 2, "ring"};
constexpr Variant kDefaults{0, 0, nullptr};
constexpr Variant kOneShot{0, 0, "oneshot"};
constexpr Variant kDirect{0, 0, "direct"};
// The one-shot board's buffer (collectives/plan/planner.cc): posts up to this many
// bytes per rank go one-shot under RINGO_ALGO=oneshot, larger ones the ring.
constexpr size_t kBoardBytes = 64 * 1024;

void ApplyVariant(const Variant& v) {
  auto set = [](const char* name, int value) {
    if (value > 0) {
      ::setenv(name, std::to_string(value).c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  };
  set("RINGO_SLOT_BYTES", v.slot_bytes);
  set("RINGO_NCHANNELS", v.nchannels);
  if (v.algo != nullptr) {
    ::setenv("RINGO_ALGO", v.algo, 1);
  } else {
    ::unsetenv("RINGO_ALGO");
  }
  ringo::base::ReloadConfigForTesting();
}

// ringoCommInitAll sets, kept while consecutive cases use the same rank
// count and variant (the parameters are ordered so they do), because
// creating eight communicators for each of ~1,400 cases would dominate the
// run. A set that saw a failure is aborted and not reused.
class CommCache {
 public:
  static CommCache& Get() {
    static CommCache* cache = new CommCache();
    return *cache;
  }
  // "" and *comms, or why the set could not be made.
  std::string Acquire(int nranks, const Variant& v, std::vector<ringoComm_t>** comms) {
    if (!comms_.empty() && nranks_ == nranks && variant_ == v) {
      *comms = &comms_;
      return "";
    }
    Release(/*abort=*/false);
    ApplyVariant(v);
    comms_.assign(nranks, nullptr);
    ringoResult_t rc = ringoCommInitAll(comms_.data(), nranks, nullptr);
    if (rc != ringoSuccess) {
      comms_.clear();
      return "ringoCommInitAll(" + std::to_string(nranks) + ") returned " + ResultName(rc) + ": " +
             ringoGetLastError(nullptr);
    }
    nranks_ = nranks;
    variant_ = v;
    *comms = &comms_;
    return "";
  }
  void Release(bool abort) {
    for (ringoComm_t c : comms_) {
      if (c != nullptr) abort ? ringoCommAbort(c) : ringoCommDestroy(c);
    }
    comms_.clear();
  }

 private:
  std::vector<ringoComm_t> comms_;
  int nranks_ = 0;
  Variant variant_;
};

class ReleaseCommsAtExit : public ::testing::Environment {
 public:
  void TearDown() override { CommCache::Get().Release(/*abort=*/false); }
};
[[maybe_unused]] const auto* const kReleaseEnv =
    ::testing::AddGlobalTestEnvironment(new ReleaseCommsAtExit());

// ---- Parameters ----

struct SweepParam {
  int nranks;
  Collective collective;
  ringoDataType_t dtype;
  ringoRedOp_t op;  // ringoSum for AllGather/Broadcast; kAllOps means "loop over all ops"
  bool all_ops = false;
};

// Readable parameters in gtest's failure lines.
void PrintTo(const SweepParam& p, std::ostream* os) {
  *os << CollectiveName(p.collective) << " " << DataTypeName(p.dtype) << " "
      << (p.all_ops ? "all ops" : OpName(p.op)) << " nranks=" << p.nranks;
}

std::string ParamName(const ::testing::TestParamInfo<SweepParam>& info) {
  const SweepParam& p = info.param;
  std::string name = std::string(CollectiveName(p.collective)) + "_" + DataTypeName(p.dtype);
  if (HasOp(p.collective) && !p.all_ops) name += std::string("_") + OpName(p.op);
  return name + "_" + std::to_string(p.nranks) + "ranks";
}

// Every (collective, op) pair, ops expanded for the reducing collectives
// unless `all_ops_in_one` folds them into one case.
std::vector<SweepParam> MakeParams(const std::vector<int>& nranks,
                                   const std::vector<Collective>& collectives,
                                   const std::vector<ringoDataType_t>& dtypes,
                                   const std::vector<ringoRedOp_t>& ops, bool all_ops_in_one) {
  std::vector<SweepParam> params;
  for (int n : nranks) {
    for (Collective c : collectives) {
      for (ringoDataType_t dt : dtypes) {
        if (!HasOp(c) || all_ops_in_one) {
          params.push_back({n, c, dt, ringoSum, HasOp(c) && all_ops_in_one});
          continue;
        }
        for (ringoRedOp_t op : ops) params.push_back({n, c, dt, op, false});
      }
    }
  }
  return params;
}

std::vector<int> Range(int lo, int hi) {
  std::vector<int> v;
  for (int i = lo; i <= hi; ++i) v.push_back(i);
  return v;
}

const std::vector<Collective> kColls(std::begin(kAllCollectives), std::end(kAllCollectives));
const std::vector<ringoDataType_t> kDtypes(std::begin(kAllDataTypes), std::end(kAllDataTypes));
const std::vector<ringoRedOp_t> kOps(std::begin(kAllOps), std::end(kAllOps));

uint32_t SeedOf(const SweepParam& p, size_t k) {
  return static_cast<uint32_t>(p.nranks * 1000003u + static_cast<int>(p.collective) * 10007u +
                               p.dtype * 101u + p.op * 7u + k * 7919u);
}

// The cases of one parameter: counts x {out-of-place, in-place} x roots (x
// ops when folded).
std::vector<Case> MakeCases(const SweepParam& p, const std::vector<size_t>& counts,
                            bool every_root) {
  std::vector<Case> cases;
  std::vector<ringoRedOp_t> ops = p.all_ops ? kOps : std::vector<ringoRedOp_t>{p.op};
  std::vector<int> roots = {p.nranks - 1};
  if (every_root) roots = Range(0, p.nranks - 1);
  if (!HasRoot(p.collective)) roots = {0};
  for (ringoRedOp_t op : ops) {
    for (size_t count : counts) {
      for (bool in_place : {false, true}) {
        for (int root : roots) {
          Case c;
          c.collective = p.collective;
          c.dtype = p.dtype;
          c.op = op;
          c.nranks = p.nranks;
          c.count = count;
          c.in_place = in_place;
          c.root = root;
          c.seed = SeedOf(p, cases.size());
          cases.push_back(c);
        }
      }
    }
  }
  return cases;
}

// Runs every case on one rank. Stops at the first failed call (the ranks are
// out of step after it); after kMaxFailuresPerRank wrong results it goes on
// running the cases, so the other ranks are not left waiting, but only
// counts further failures.
std::string RunCasesOnRank(const std::vector<Case>& cases, const std::vector<Expected>& expected,
                           int rank, ringoComm_t comm) {
  std::string report;
  int failures = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    bool call_failed = false;
    std::string problem = RunCaseOnRank(cases[k], expected[k], rank, comm, &call_failed);
    if (problem.empty()) continue;
    if (++failures <= kMaxFailuresPerRank || call_failed) report += "\n    " + problem;
    if (call_failed) return report + "\n    (stopped: the ranks are out of step)";
  }
  if (failures > kMaxFailuresPerRank) {
    report +=
        "\n    ... and " + std::to_string(failures - kMaxFailuresPerRank) + " more failing cases";
  }
  return report;
}

std::vector<Expected> BuildAll(const std::vector<Case>& cases) {
  std::vector<Expected> expected;
  expected.reserve(cases.size());
  for (const Case& c : cases) expected.push_back(BuildExpected(c));
  return expected;
}

// ringoCommInitAll has no config: it makes GPU communicators where a GPU is
// visible unless RINGO_DEVICE=host (which BUILD sets), and host buffers would
// then be the wrong kind.
bool AreHostComms(const std::vector<ringoComm_t>& comms) {
  int device = 0;
  return ringoCommCuDevice(comms[0], &device) == ringoSuccess && device == -1;
}

// Thread mode over a cached ringoCommInitAll set.
void RunWithInitAll(const SweepParam& p, const Variant& v, const std::vector<Case>& cases) {
  const std::vector<Expected> expected = BuildAll(cases);
  std::vector<ringoComm_t>* comms = nullptr;
  std::string error = CommCache::Get().Acquire(p.nranks, v, &comms);
  ASSERT_EQ(error, "");
  if (!AreHostComms(*comms)) {
    GTEST_SKIP() << "ringoCommInitAll chose a CUDA device; this suite tests host "
                    "communicators (run it where no GPU is visible)";
  }
  HarnessOptions options;
  options.make_unique_id = false;
  auto results = RunRanks(
      p.nranks, RankMode::kThreads, kDeadline,
      [&](int rank, int, const ringoUniqueId&) {
        return RunCasesOnRank(cases, expected, rank, (*comms)[rank]);
      },
      options);
  if (!AllRanksOk(results)) CommCache::Get().Release(/*abort=*/true);
  EXPECT_ALL_RANKS_OK(results) << cases.size() << " calls per rank";
}

// Where forked ranks take their buffers from.
enum class Buffers { kHeap, kRingoMemAlloc, kMixed /* rank 0 heap, the others ringoMemAlloc */ };

// Forked ranks, each creating its communicator from the parent's unique id.
void RunInProcesses(const SweepParam& p, const Variant& v, const std::vector<Case>& cases,
                    Buffers buffers = Buffers::kHeap) {
  const std::vector<Expected> expected = BuildAll(cases);  // inherited by the children
  // Fork from a quiet process: no communicator of the thread suites (and none
  // of their threads' locks) behind the children's backs.
  CommCache::Get().Release(/*abort=*/false);
  ApplyVariant(v);
  auto results = RunRanks(p.nranks, RankMode::kProcesses, kDeadline,
                          [&](int rank, int nranks, const ringoUniqueId& id) -> std::string {
                            SetUseRingoMemAlloc(buffers == Buffers::kRingoMemAlloc ||
                                                (buffers == Buffers::kMixed && rank != 0));
                            ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
                            config.device_kind = RINGO_DEVICE_HOST;
                            ringoComm_t comm = nullptr;
                            ringoResult_t rc =
                                ringoCommInitRankConfig(&comm, nranks, id, rank, &config);
                            if (rc != ringoSuccess) {
                              return "ringoCommInitRankConfig returned " + ResultName(rc) + ": " +
                                     ringoGetLastError(nullptr);
                            }
                            std::string report = RunCasesOnRank(cases, expected, rank, comm);
                            rc = ringoCommDestroy(comm);
                            if (rc != ringoSuccess) report += "\n    destroy: " + ResultName(rc);
                            return report;
                          });
  EXPECT_ALL_RANKS_OK(results) << cases.size() << " calls per rank";
}

// ---- The full thread sweep ----

class Threads : public ::testing::TestWithParam<SweepParam> {};

TEST_P(Threads, MatchesReference) {
  const SweepParam& p = GetParam();
  RunWithInitAll(p, kSmallSlots, MakeCases(p, SweepCounts(p.dtype, p.nranks), /*every_root=*/true));
}

INSTANTIATE_TEST_SUITE_P(Sweep, Threads,
                         ::testing::ValuesIn(MakeParams(Range(1, 8), kColls, kDtypes, kOps,
                                                        /*all_ops_in_one=*/false)),
                         ParamName);

// ---- Two channels: each rank's data split over two rings ----

class Channels : public ::testing::TestWithParam<SweepParam> {};

TEST_P(Channels, MatchesReference) {
  const SweepParam& p = GetParam();
  RunWithInitAll(p, kTwoChannels,
                 MakeCases(p, SweepCounts(p.dtype, p.nranks), /*every_root=*/true));
}

// Subset: one type per size class (1, 2, 4 and 8 bytes) is what the channel
// split depends on; sum and max cover the arithmetic and selection paths.
INSTANTIATE_TEST_SUITE_P(Sweep, Channels,
                         ::testing::ValuesIn(MakeParams({2, 3, 5, 8}, kColls,
                                                        {ringoInt8, ringoBfloat16, ringoFloat32,
                                                         ringoUint64},
                                                        {ringoSum, ringoMax},
                                                        /*all_ops_in_one=*/false)),
                         ParamName);

// ---- One thread drives every rank inside a group ----

class Group : public ::testing::TestWithParam<SweepParam> {};

TEST_P(Group, MatchesReference) {
  const SweepParam& p = GetParam();
  const std::vector<Case> cases =
      MakeCases(p, SweepCounts(p.dtype, p.nranks), /*every_root=*/false);
  const std::vector<Expected> expected = BuildAll(cases);
  std::vector<ringoComm_t>* comms = nullptr;
  ASSERT_EQ(CommCache::Get().Acquire(p.nranks, kSmallSlots, &comms), "");
  if (!AreHostComms(*comms)) GTEST_SKIP() << "ringoCommInitAll chose a CUDA device";
  bool failed = false;
  for (size_t k = 0; k < cases.size() && !failed; ++k) {
    std::vector<std::unique_ptr<CaseRun>> runs;
    ASSERT_EQ(ringoGroupStart(), ringoSuccess);
    for (int r = 0; r < p.nranks; ++r) {
      runs.push_back(std::make_unique<CaseRun>(cases[k], expected[k], r));
      ringoResult_t rc = runs.back()->Issue((*comms)[r]);
      EXPECT_EQ(rc, ringoSuccess) << cases[k].Describe() << " rank " << r
                                  << " (queued): " << ringoGetLastError(nullptr);
    }
    ringoResult_t rc = ringoGroupEnd();
    EXPECT_EQ(rc, ringoSuccess) << cases[k].Describe()
                                << ": ringoGroupEnd: " << ringoGetLastError(nullptr);
    if (rc != ringoSuccess) {
      failed = true;
      break;
    }
    for (int r = 0; r < p.nranks; ++r) {
      std::string problem = runs[r]->Check();
      EXPECT_EQ(problem, "");
      failed = failed || !problem.empty();
    }
  }
  if (failed) CommCache::Get().Release(/*abort=*/true);
}

INSTANTIATE_TEST_SUITE_P(Sweep, Group,
                         ::testing::ValuesIn(MakeParams({2, 4, 8}, kColls,
                                                        {ringoInt32, ringoFloat16},
                                                        {ringoSum, ringoMin},
                                                        /*all_ops_in_one=*/false)),
                         ParamName);

// ---- Forked ranks: shared memory across processes ----

class Processes : public ::testing::TestWithParam<SweepParam> {};

TEST_P(Processes, MatchesReference) {
  const SweepParam& p = GetParam();
  RunInProcesses(p, kSmallSlots, MakeCases(p, SweepCounts(p.dtype, p.nranks), /*every_root=*/true));
}

// Subset: every collective and (folded into each case) every op, with one
// type per family (unsigned 8-bit, signed 64-bit, half, float); 1, 2, 3, 5
// and 8 ranks (odd and even rings, the largest), because each case forks its
// ranks and rendezvouses over TCP.
INSTANTIATE_TEST_SUITE_P(Sweep, Processes,
                         ::testing::ValuesIn(MakeParams({1, 2, 3, 5, 8}, kColls,
                                                        {ringoUint8, ringoInt64, ringoFloat16,
                                                         ringoFloat32},
                                                        kOps, /*all_ops_in_one=*/true)),
                         ParamName);

// ---- Several-MiB messages ----

// The large count for a collective: the whole message (AllReduce, Broadcast,
// Reduce: the buffer; ReduceScatter: the send buffer; AllGather: the
// receive buffer) is about kLargeBytes, plus a few elements so it is not a
// multiple of any slot or rank count.
size_t LargeCount(const SweepParam& p) {
  size_t elems = kLargeBytes / DataTypeSize(p.dtype);
  if (p.collective == Collective::kReduceScatter || p.collective == Collective::kAllGather) {
    elems /= p.nranks;
  }
  return elems + 3;
}

class Large : public ::testing::TestWithParam<SweepParam> {};

TEST_P(Large, MatchesReference) {
  const SweepParam& p = GetParam();
  RunWithInitAll(p, kDefaults, MakeCases(p, {LargeCount(p)}, /*every_root=*/false));
}

// Subset, to keep the whole suite within minutes on 2 cores: the large-count
// paths (multi-loop pipelining, many slots) depend on the element size and
// the rank count, not on the op; so one type per element size, sum, 3 and 8
// ranks, root nranks-1, in-place and out-of-place. LargeOps adds every op for
// the reducing collectives at one rank count, for the arithmetic over many
// slots (fp16 accumulation, integer wrap-around).
INSTANTIATE_TEST_SUITE_P(Sweep, Large,
                         ::testing::ValuesIn(MakeParams(
                             {3, 8}, kColls, {ringoInt8, ringoBfloat16, ringoFloat32, ringoFloat64},
                             {ringoSum}, /*all_ops_in_one=*/false)),
                         ParamName);

class LargeOps : public Large {};

TEST_P(LargeOps, MatchesReference) {
  const SweepParam& p = GetParam();
  RunWithInitAll(p, kDefaults, MakeCases(p, {LargeCount(p)}, /*every_root=*/false));
}

INSTANTIATE_TEST_SUITE_P(Sweep, LargeOps,
                         ::testing::ValuesIn(MakeParams({4},
                                                        {Collective::kAllReduce,
                                                         Collective::kReduceScatter,
                                                         Collective::kReduce},
                                                        {ringoInt32, ringoFloat16}, kOps,
                                                        /*all_ops_in_one=*/false)),
                         ParamName);

class LargeProcesses : public ::testing::TestWithParam<SweepParam> {};

TEST_P(LargeProcesses, MatchesReference) {
  const SweepParam& p = GetParam();
  RunInProcesses(p, kDefaults, MakeCases(p, {LargeCount(p)}, /*every_root=*/false));
}

// Subset: every collective, float32 sum, 4 and 8 processes: the
// shared-memory path across processes with full-size slots.
INSTANTIATE_TEST_SUITE_P(Sweep, LargeProcesses,
                         ::testing::ValuesIn(MakeParams({4, 8}, kColls, {ringoFloat32}, {ringoSum},
                                                        /*all_ops_in_one=*/false)),
                         ParamName);

// ---- Messages past the planner's streaming threshold ----

// Outputs of 8 MiB and more are written with non-temporal stores
// (collectives/plan/planner.cc); 9 MiB plus a few elements, so the streamed
// blocks end in an unaligned tail.
class Huge : public ::testing::TestWithParam<SweepParam> {};

TEST_P(Huge, MatchesReference) {
  const SweepParam& p = GetParam();
  size_t elems = (size_t{9} << 20) / DataTypeSize(p.dtype);
  if (p.collective == Collective::kReduceScatter || p.collective == Collective::kAllGather) {
    elems /= p.nranks;
  }
  RunWithInitAll(p, kDefaults, MakeCases(p, {elems + 5}, /*every_root=*/false));
}

INSTANTIATE_TEST_SUITE_P(Sweep, Huge,
                         ::testing::ValuesIn(MakeParams({2, 3}, kColls, {ringoFloat32, ringoBfloat16},
                                                        {ringoSum}, /*all_ops_in_one=*/false)),
                         ParamName);

// ---- One-shot: the board exchange ----

// The sweep counts plus the largest count whose post fits the board and one
// element more (the ring takes over there).
std::vector<size_t> OneShotCounts(const SweepParam& p) {
  std::vector<size_t> counts = SweepCounts(p.dtype, p.nranks);
  size_t fit = kBoardBytes / DataTypeSize(p.dtype);
  if (p.collective == Collective::kReduceScatter) fit /= p.nranks;  // posts the whole input
  counts.push_back(fit);
  counts.push_back(fit + 1);
  return counts;
}

class OneShot : public ::testing::TestWithParam<SweepParam> {};

TEST_P(OneShot, MatchesReference) {
  const SweepParam& p = GetParam();
  RunWithInitAll(p, kOneShot, MakeCases(p, OneShotCounts(p), /*every_root=*/true));
}

// Every rank count, collective and datatype, with every op folded into each
// case (the reduction is the one-shot's own loop, in rank order).
INSTANTIATE_TEST_SUITE_P(Sweep, OneShot,
                         ::testing::ValuesIn(MakeParams(Range(1, 8), kColls, kDtypes, kOps,
                                                        /*all_ops_in_one=*/true)),
                         ParamName);

class OneShotProcesses : public ::testing::TestWithParam<SweepParam> {};

TEST_P(OneShotProcesses, MatchesReference) {
  const SweepParam& p = GetParam();
  RunInProcesses(p, kOneShot, MakeCases(p, OneShotCounts(p), /*every_root=*/true));
}

// The board across processes (POSIX shared memory, one segment per rank).
INSTANTIATE_TEST_SUITE_P(Sweep, OneShotProcesses,
                         ::testing::ValuesIn(MakeParams({2, 3, 8}, kColls,
                                                        {ringoInt32, ringoBfloat16, ringoFloat64},
                                                        kOps, /*all_ops_in_one=*/true)),
                         ParamName);

// ---- Direct: every rank reads every rank's buffers ----

// The sweep counts, and a count of several MiB that is not a multiple of the
// rank count or of any vector width.
std::vector<size_t> DirectCounts(const SweepParam& p) {
  std::vector<size_t> counts = SweepCounts(p.dtype, p.nranks);
  counts.push_back((size_t{1} << 20) / DataTypeSize(p.dtype) + 13);
  return counts;
}

class Direct : public ::testing::TestWithParam<SweepParam> {};

TEST_P(Direct, MatchesReference) {
  const SweepParam& p = GetParam();
  RunWithInitAll(p, kDirect, MakeCases(p, DirectCounts(p), /*every_root=*/false));
}

// AllReduce (the only direct collective) at odd and even rank counts up to
// 8 and every datatype, every op folded into each case.
INSTANTIATE_TEST_SUITE_P(Sweep, Direct,
                         ::testing::ValuesIn(MakeParams({1, 2, 3, 5, 8}, {Collective::kAllReduce}, kDtypes, kOps,
                                                        /*all_ops_in_one=*/true)),
                         ParamName);

class DirectOthers : public Direct {};

TEST_P(DirectOthers, MatchesReference) {
  const SweepParam& p = GetParam();
  RunWithInitAll(p, kDirect, MakeCases(p, DirectCounts(p), /*every_root=*/true));
}

// The other collectives: one type per element size, every op folded in, every root.
INSTANTIATE_TEST_SUITE_P(Sweep, DirectOthers,
                         ::testing::ValuesIn(MakeParams({2, 3},
                                                        {Collective::kReduceScatter, Collective::kAllGather,
                                                         Collective::kBroadcast, Collective::kReduce},
                                                        {ringoUint8, ringoFloat16, ringoFloat32, ringoInt64},
                                                        kOps, /*all_ops_in_one=*/true)),
                         ParamName);

class DirectProcesses : public ::testing::TestWithParam<SweepParam> {};

TEST_P(DirectProcesses, MatchesReference) {
  const SweepParam& p = GetParam();
  RunInProcesses(p, kDirect, MakeCases(p, DirectCounts(p), /*every_root=*/true), Buffers::kRingoMemAlloc);
}

// The regions mapped across processes: every collective, one type per element size.
INSTANTIATE_TEST_SUITE_P(Sweep, DirectProcesses,
                         ::testing::ValuesIn(MakeParams({2, 3}, kColls,
                                                        {ringoUint8, ringoBfloat16, ringoFloat32, ringoInt64},
                                                        kOps, /*all_ops_in_one=*/true)),
                         ParamName);

class DirectMixedProcesses : public ::testing::TestWithParam<SweepParam> {};

TEST_P(DirectMixedProcesses, MatchesReference) {
  const SweepParam& p = GetParam();
  RunInProcesses(p, kDirect, MakeCases(p, DirectCounts(p), /*every_root=*/true), Buffers::kMixed);
}

// Every root: a Broadcast from a rank with shared buffers runs direct even
// though rank 0's are heap memory; the others fall back to the ring.
INSTANTIATE_TEST_SUITE_P(Sweep, DirectMixedProcesses,
                         ::testing::ValuesIn(MakeParams({2, 3}, kColls, {ringoFloat32},
                                                        {ringoSum, ringoAvg}, /*all_ops_in_one=*/true)),
                         ParamName);

}  // namespace
}  // namespace ringo::tests
