// The rest of the API contract: communicator creation arguments and config,
// queries, async errors, version and error strings, per-thread last error,
// groups (nesting, ordering, misuse) and non-blocking init.
#include <chrono>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "gtest/gtest.h"
#include "ringo/ringo.h"
#include "tests/api_test_util.h"
#include "tests/harness.h"

namespace ringo::tests {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// ---- Version, error strings, last error ----

TEST(Version, ReportsTheHeaderVersion) {
  int version = -1;
  ASSERT_EQ(ringoGetVersion(&version), ringoSuccess);
  EXPECT_EQ(version, RINGO_VERSION_CODE);
  EXPECT_TRUE(FailsWith(ringoGetVersion(nullptr), ringoInvalidArgument, nullptr, {"version"}));
}

TEST(ErrorString, EveryCodeHasADistinctString) {
  std::set<std::string> seen;
  for (int r = 0; r < ringoNumResults; ++r) {
    const char* s = ringoGetErrorString(static_cast<ringoResult_t>(r));
    ASSERT_NE(s, nullptr) << r;
    EXPECT_GT(std::strlen(s), 0u) << r;
    EXPECT_TRUE(seen.insert(s).second) << "duplicate string '" << s << "' for " << r;
  }
  for (int r : {static_cast<int>(ringoNumResults), 99, -1}) {
    const char* s = ringoGetErrorString(static_cast<ringoResult_t>(r));
    ASSERT_NE(s, nullptr) << r;
    EXPECT_GT(std::strlen(s), 0u) << r;
  }
}

TEST(LastError, IsPerThread) {
  std::string before, after_other;
  std::thread fresh([&] { before = ringoGetLastError(nullptr); });
  fresh.join();
  EXPECT_EQ(before, "") << "a thread that made no call has no last error";
  std::thread failing([&] {
    EXPECT_EQ(ringoGetVersion(nullptr), ringoInvalidArgument);
    EXPECT_STRNE(ringoGetLastError(nullptr), "");
    std::thread other([&] { after_other = ringoGetLastError(nullptr); });
    other.join();
  });
  failing.join();
  EXPECT_EQ(after_other, "") << "another thread's failure leaked into this thread";
}

TEST(UniqueId, NullPointer) {
  EXPECT_TRUE(FailsWith(ringoGetUniqueId(nullptr), ringoInvalidArgument, nullptr,
                        {"unique", "id", "null"}));
}

// An id for a launcher's address: bad addresses are refused at once; the
// same address gives the same id, and two ranks join through it (rank 0
// listens there) without any id passing between them.
TEST(UniqueId, ForAddress) {
  ringoUniqueId id;
  EXPECT_TRUE(FailsWith(ringoGetUniqueIdForAddress(nullptr, &id), ringoInvalidArgument, nullptr, {"address"}));
  EXPECT_TRUE(FailsWith(ringoGetUniqueIdForAddress("127.0.0.1:1234", nullptr), ringoInvalidArgument, nullptr,
                        {"unique_id"}));
  EXPECT_TRUE(FailsWith(ringoGetUniqueIdForAddress("", &id), ringoInvalidArgument, nullptr, {"address"}));
  EXPECT_NE(ringoGetUniqueIdForAddress("127.0.0.1", &id), ringoSuccess) << "no port";
  EXPECT_NE(ringoGetUniqueIdForAddress("not an address:12", &id), ringoSuccess);
  const int port = 20000 + static_cast<int>(getpid() % 20000);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  ringoUniqueId a, b;
  ASSERT_EQ(ringoGetUniqueIdForAddress(address.c_str(), &a), ringoSuccess) << ringoGetLastError(nullptr);
  ASSERT_EQ(ringoGetUniqueIdForAddress(address.c_str(), &b), ringoSuccess);
  EXPECT_EQ(std::memcmp(&a, &b, sizeof(a)), 0);
  std::vector<ringoComm_t> comms(2, nullptr);
  std::vector<ringoResult_t> rc(2, ringoInternalError);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      ringoUniqueId mine;
      if (ringoGetUniqueIdForAddress(address.c_str(), &mine) != ringoSuccess) return;
      rc[r] = ringoCommInitRank(&comms[r], 2, mine, r);
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(rc[r], ringoSuccess) << "rank " << r;
    if (comms[r] != nullptr) EXPECT_EQ(ringoCommDestroy(comms[r]), ringoSuccess);
  }
}

// ---- Communicator creation ----

// Bad arguments fail at once: no rendezvous is attempted.
TEST(InitRank, RejectsBadArgumentsPromptly) {
  ringoUniqueId id;
  ASSERT_EQ(ringoGetUniqueId(&id), ringoSuccess);
  ringoComm_t comm = nullptr;
  const Clock::time_point start = Clock::now();
  EXPECT_TRUE(
      FailsWith(ringoCommInitRank(nullptr, 2, id, 0), ringoInvalidArgument, nullptr, {"comm"}));
  for (int nranks : {0, -1}) {
    EXPECT_TRUE(FailsWith(ringoCommInitRank(&comm, nranks, id, 0), ringoInvalidArgument, nullptr,
                          {"nranks", "rank"}))
        << "nranks " << nranks;
  }
  for (int rank : {-1, 2, 100}) {
    EXPECT_TRUE(
        FailsWith(ringoCommInitRank(&comm, 2, id, rank), ringoInvalidArgument, nullptr, {"rank"}))
        << "rank " << rank;
  }
  EXPECT_LT(SecondsSince(start), 2.0) << "argument errors should not wait for peers";
}

TEST(InitRankConfig, RejectsBadConfig) {
  ringoUniqueId id;
  ASSERT_EQ(ringoGetUniqueId(&id), ringoSuccess);
  ringoComm_t comm = nullptr;
  for (size_t size : {size_t{0}, size_t{4}}) {
    ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
    config.size = size;
    EXPECT_TRUE(FailsWith(ringoCommInitRankConfig(&comm, 1, id, 0, &config), ringoInvalidArgument,
                          nullptr, {"size", "config"}))
        << "config.size " << size;
  }
  {
    ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
    config.device_kind = 99;
    EXPECT_TRUE(FailsWith(ringoCommInitRankConfig(&comm, 1, id, 0, &config), ringoInvalidArgument,
                          nullptr, {"device"}));
  }
  {
    ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
    config.timeout_ms = -1;
    EXPECT_TRUE(FailsWith(ringoCommInitRankConfig(&comm, 1, id, 0, &config), ringoInvalidArgument,
                          nullptr, {"timeout"}));
  }
}

TEST(InitRankConfig, NullConfigMeansDefaults) {
  ringoUniqueId id;
  ASSERT_EQ(ringoGetUniqueId(&id), ringoSuccess);
  ringoComm_t comm = nullptr;
  ASSERT_EQ(ringoCommInitRankConfig(&comm, 1, id, 0, nullptr), ringoSuccess)
      << ringoGetLastError(nullptr);
  int n = 0;
  EXPECT_EQ(ringoCommCount(comm, &n), ringoSuccess);
  EXPECT_EQ(n, 1);
  EXPECT_EQ(ringoCommDestroy(comm), ringoSuccess);
}

// Where no GPU is visible a CUDA communicator cannot be made: a clean error.
TEST(InitRankConfig, CudaWithoutGpuFailsCleanly) {
  EXPECT_EQ(InChild([]() -> std::string {
              ringoComm_t probe = nullptr;
              if (ringoCommInitAll(&probe, 1, nullptr) != ringoSuccess) return "InitAll(1) failed";
              int device = 0;
              ringoCommCuDevice(probe, &device);
              ringoCommDestroy(probe);
              if (device != -1) return "";  // a GPU is visible: nothing to check here
              ringoUniqueId id;
              if (ringoGetUniqueId(&id) != ringoSuccess) return "ringoGetUniqueId failed";
              ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
              config.device_kind = RINGO_DEVICE_CUDA;
              ringoComm_t comm = nullptr;
              ringoResult_t rc = ringoCommInitRankConfig(&comm, 1, id, 0, &config);
              if (rc == ringoSuccess || rc == ringoInProgress) {
                return "RINGO_DEVICE_CUDA without a GPU returned " + ResultName(rc);
              }
              if (std::string(ringoGetLastError(nullptr)).empty()) return "no last error";
              return "";
            }),
            "");
}

TEST(InitAll, RejectsBadArguments) {
  ringoComm_t comms[2];
  EXPECT_TRUE(
      FailsWith(ringoCommInitAll(nullptr, 2, nullptr), ringoInvalidArgument, nullptr, {"comm"}));
  for (int ndev : {0, -1}) {
    EXPECT_TRUE(FailsWith(ringoCommInitAll(comms, ndev, nullptr), ringoInvalidArgument, nullptr,
                          {"ndev", "count", "rank"}))
        << "ndev " << ndev;
  }
}

// ---- Queries and lifecycle ----

TEST(Queries, CountRankDevice) {
  std::vector<ringoComm_t> comms = MakeHostComms(3);
  ASSERT_EQ(comms.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    int count = 0, rank = -5, device = -5;
    EXPECT_EQ(ringoCommCount(comms[r], &count), ringoSuccess);
    EXPECT_EQ(ringoCommUserRank(comms[r], &rank), ringoSuccess);
    EXPECT_EQ(ringoCommCuDevice(comms[r], &device), ringoSuccess);
    EXPECT_EQ(count, 3);
    EXPECT_EQ(rank, r);
    EXPECT_EQ(device, -1) << "host communicators report device -1";
    ringoResult_t async = ringoInternalError;
    EXPECT_EQ(ringoCommGetAsyncError(comms[r], &async), ringoSuccess);
    EXPECT_EQ(async, ringoSuccess);
  }
  int out = 0;
  ringoResult_t async;
  EXPECT_TRUE(FailsWith(ringoCommCount(nullptr, &out), ringoInvalidArgument, nullptr, {"comm"}));
  EXPECT_TRUE(FailsWith(ringoCommUserRank(nullptr, &out), ringoInvalidArgument, nullptr, {"comm"}));
  EXPECT_TRUE(FailsWith(ringoCommCuDevice(nullptr, &out), ringoInvalidArgument, nullptr, {"comm"}));
  EXPECT_TRUE(
      FailsWith(ringoCommGetAsyncError(nullptr, &async), ringoInvalidArgument, nullptr, {"comm"}));
  EXPECT_EQ(ringoCommCount(comms[0], nullptr), ringoInvalidArgument);
  EXPECT_EQ(ringoCommUserRank(comms[0], nullptr), ringoInvalidArgument);
  EXPECT_EQ(ringoCommCuDevice(comms[0], nullptr), ringoInvalidArgument);
  EXPECT_EQ(ringoCommGetAsyncError(comms[0], nullptr), ringoInvalidArgument);
  DestroyComms(comms);
}

TEST(Lifecycle, NullCommunicator) {
  EXPECT_TRUE(FailsWith(ringoCommFinalize(nullptr), ringoInvalidArgument, nullptr, {"comm"}));
  // NCCL treats destroying NULL as a no-op; either that or an argument error
  // is acceptable, a crash is not.
  ringoResult_t rc = ringoCommDestroy(nullptr);
  EXPECT_TRUE(rc == ringoSuccess || rc == ringoInvalidArgument) << ResultName(rc);
  rc = ringoCommAbort(nullptr);
  EXPECT_TRUE(rc == ringoSuccess || rc == ringoInvalidArgument) << ResultName(rc);
}

TEST(Lifecycle, DoubleDestroyIsAnArgumentError) {
  EXPECT_EQ(InChild([]() -> std::string {
              ringoComm_t comm = MakeSoloHostComm();
              if (comm == nullptr) return "could not create a communicator";
              if (ringoCommDestroy(comm) != ringoSuccess) return "first destroy failed";
              std::string problems = CheckFails("second ringoCommDestroy", ringoCommDestroy(comm),
                                                ringoInvalidArgument, {"comm", "destroy"});
              int n = 0;
              problems += CheckFails("ringoCommCount after destroy", ringoCommCount(comm, &n),
                                     ringoInvalidArgument, {"comm", "destroy"});
              return problems;
            }),
            "");
}

// A destroyed (or aborted) handle never becomes valid again, however many
// communicators are made after it: before, a new communicator could get the
// freed handle's address and calls on the stale handle ran on it.
TEST(Lifecycle, StaleHandleStaysInvalidAfterNewCommunicators) {
  EXPECT_EQ(InChild([]() -> std::string {
              std::vector<ringoComm_t> stale;
              std::string problems;
              for (int i = 0; i < 40; ++i) {
                ringoComm_t comm = MakeSoloHostComm();
                if (comm == nullptr) return "could not create a communicator";
                for (ringoComm_t s : stale) {
                  if (s == comm) problems += "a new communicator reuses a destroyed handle; ";
                }
                float in[4] = {1, 2, 3, 4}, out[4];
                for (ringoComm_t s : stale) {
                  problems += CheckFails("ringoAllReduce on a stale handle",
                                         ringoAllReduce(in, out, 4, ringoFloat32, ringoSum, s, nullptr),
                                         ringoInvalidArgument, {"comm", "destroy"});
                }
                if (ringoAllReduce(in, out, 4, ringoFloat32, ringoSum, comm, nullptr) != ringoSuccess) {
                  problems += "the live communicator failed; ";
                }
                // Alternate destroy and abort.
                if ((i % 2 == 0 ? ringoCommDestroy(comm) : ringoCommAbort(comm)) != ringoSuccess) {
                  return "releasing a communicator failed";
                }
                stale.push_back(comm);
                if (!problems.empty()) return problems;
              }
              return problems;
            }),
            "");
}

TEST(Lifecycle, FinalizeThenDestroy) {
  ringoComm_t comm = MakeSoloHostComm();
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(ringoCommFinalize(comm), ringoSuccess) << ringoGetLastError(nullptr);
  EXPECT_TRUE(FailsWith(ringoCommFinalize(comm), ringoInvalidUsage, comm, {"final"}))
      << "finalizing twice";
  EXPECT_EQ(ringoCommDestroy(comm), ringoSuccess);
}

// ---- Groups ----

TEST(Groups, EndWithoutStartIsInvalidUsage) {
  EXPECT_TRUE(FailsWith(ringoGroupEnd(), ringoInvalidUsage, nullptr, {"group"}));
}

TEST(Groups, EmptyGroupSucceeds) {
  ASSERT_EQ(ringoGroupStart(), ringoSuccess);
  EXPECT_EQ(ringoGroupEnd(), ringoSuccess);
}

class GroupsTwoRanks : public ::testing::Test {
 protected:
  void SetUp() override {
    comms_ = MakeHostComms(2);
    ASSERT_EQ(comms_.size(), 2u);
  }
  void TearDown() override {
    if (!comms_.empty()) DestroyComms(comms_);
  }
  std::vector<ringoComm_t> comms_;
};

// Operations run at GroupEnd in issue order per communicator: the second
// AllReduce reads what the first wrote.
TEST_F(GroupsTwoRanks, RunInIssueOrder) {
  float in[2][4] = {{1, 2, 3, 4}, {10, 20, 30, 40}};
  float mid[2][4] = {}, out[2][4] = {};
  ASSERT_EQ(ringoGroupStart(), ringoSuccess);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(ringoAllReduce(in[r], mid[r], 4, ringoFloat32, ringoSum, comms_[r], nullptr),
              ringoSuccess);
  }
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(ringoAllReduce(mid[r], out[r], 4, ringoFloat32, ringoSum, comms_[r], nullptr),
              ringoSuccess);
  }
  ASSERT_EQ(ringoGroupEnd(), ringoSuccess) << ringoGetLastError(nullptr);
  for (int r = 0; r < 2; ++r) {
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(mid[r][i], in[0][i] + in[1][i]);
      EXPECT_EQ(out[r][i], 2 * (in[0][i] + in[1][i])) << "rank " << r << " element " << i;
    }
  }
}

// Only the outermost GroupEnd runs the queue. Were the inner one to run rank
// 0's AllReduce, it would wait for rank 1, which is not queued yet.
TEST_F(GroupsTwoRanks, NestedGroupsRunAtOutermostEnd) {
  int in[2][3] = {{1, 2, 3}, {4, 5, 6}}, out[2][3] = {};
  ASSERT_EQ(ringoGroupStart(), ringoSuccess);
  ASSERT_EQ(ringoGroupStart(), ringoSuccess);
  ASSERT_EQ(ringoAllReduce(in[0], out[0], 3, ringoInt32, ringoMax, comms_[0], nullptr),
            ringoSuccess);
  const Clock::time_point start = Clock::now();
  ASSERT_EQ(ringoGroupEnd(), ringoSuccess) << ringoGetLastError(nullptr);
  EXPECT_LT(SecondsSince(start), 1.0) << "the inner GroupEnd should not run or wait";
  EXPECT_EQ(out[0][0], 0) << "the inner GroupEnd ran the queued AllReduce";
  ASSERT_EQ(ringoAllReduce(in[1], out[1], 3, ringoInt32, ringoMax, comms_[1], nullptr),
            ringoSuccess);
  ASSERT_EQ(ringoGroupEnd(), ringoSuccess) << ringoGetLastError(nullptr);
  for (int r = 0; r < 2; ++r) {
    for (int i = 0; i < 3; ++i) EXPECT_EQ(out[r][i], in[1][i]);
  }
}

// A call rejected inside a group must not wedge the group machinery.
TEST_F(GroupsTwoRanks, RejectedCallInsideGroupLeavesGroupsUsable) {
  float buf[4] = {1, 1, 1, 1}, out[2][4] = {};
  ASSERT_EQ(ringoGroupStart(), ringoSuccess);
  EXPECT_TRUE(FailsWith(ringoAllReduce(buf, out[0], 4, static_cast<ringoDataType_t>(99), ringoSum,
                                       comms_[0], nullptr),
                        ringoInvalidArgument, comms_[0], {"datatype", "type"}));
  ringoResult_t end = ringoGroupEnd();  // may report the rejected call; must return
  (void)end;
  ASSERT_EQ(ringoGroupStart(), ringoSuccess);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(ringoAllReduce(buf, out[r], 4, ringoFloat32, ringoSum, comms_[r], nullptr),
              ringoSuccess);
  }
  ASSERT_EQ(ringoGroupEnd(), ringoSuccess) << ringoGetLastError(nullptr);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(out[r][3], 2.0f);
}

// ---- Non-blocking init ----

// With blocking = 0 init returns at once, so one thread can create both
// ranks and then poll them.
TEST(NonBlockingInit, OneThreadCreatesTwoRanks) {
  ringoUniqueId id;
  ASSERT_EQ(ringoGetUniqueId(&id), ringoSuccess);
  ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.device_kind = RINGO_DEVICE_HOST;
  ringoComm_t comms[2] = {nullptr, nullptr};
  for (int r = 0; r < 2; ++r) {
    const Clock::time_point start = Clock::now();
    ringoResult_t rc = ringoCommInitRankConfig(&comms[r], 2, id, r, &config);
    ASSERT_TRUE(rc == ringoInProgress || rc == ringoSuccess)
        << "rank " << r << ": " << ResultName(rc) << ": " << ringoGetLastError(nullptr);
    EXPECT_LT(SecondsSince(start), 2.0) << "non-blocking init blocked";
  }
  const Clock::time_point start = Clock::now();
  ringoResult_t state[2] = {ringoInProgress, ringoInProgress};
  while ((state[0] == ringoInProgress || state[1] == ringoInProgress) && SecondsSince(start) < 20) {
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(ringoCommGetAsyncError(comms[r], &state[r]), ringoSuccess);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(state[0], ringoSuccess) << ResultName(state[0]);
  ASSERT_EQ(state[1], ringoSuccess) << ResultName(state[1]);
  double in[2][2] = {{1.5, -2}, {2.5, 4}}, out[2][2] = {};
  ASSERT_EQ(ringoGroupStart(), ringoSuccess);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(ringoAllReduce(in[r], out[r], 2, ringoFloat64, ringoSum, comms[r], nullptr),
              ringoSuccess);
  }
  ASSERT_EQ(ringoGroupEnd(), ringoSuccess) << ringoGetLastError(nullptr);
  EXPECT_EQ(out[0][0], 4.0);
  EXPECT_EQ(out[1][1], 2.0);
  for (ringoComm_t c : comms) EXPECT_EQ(ringoCommDestroy(c), ringoSuccess);
}

}  // namespace
}  // namespace ringo::tests
