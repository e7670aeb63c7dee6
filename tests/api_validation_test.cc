// The argument-validation matrix of the collectives: every public collective
// rejects bad arguments with ringoInvalidArgument (calls in the wrong state
// with ringoInvalidUsage) and a ringoGetLastError message naming the
// argument, without touching memory or waiting for peers. Checks whose
// failure could be a crash (a huge count, a freed handle) run in a forked
// child so they fail one test, not the binary. Communicator, group and
// error-string checks are in api_lifecycle_test.cc.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ringo/ringo.h"
#include "tests/api_test_util.h"
#include "tests/collective_case.h"
#include "tests/harness.h"

namespace ringo::tests {
namespace {

// Calls collective `c` with the arguments it takes (op and root ignored
// where they do not apply).
ringoResult_t CallColl(Collective c, const void* send, void* recv, size_t count, ringoDataType_t dt,
                       ringoRedOp_t op, int root, ringoComm_t comm,
                       ringoStream_t stream = nullptr) {
  switch (c) {
    case Collective::kAllReduce:
      return ringoAllReduce(send, recv, count, dt, op, comm, stream);
    case Collective::kReduceScatter:
      return ringoReduceScatter(send, recv, count, dt, op, comm, stream);
    case Collective::kAllGather:
      return ringoAllGather(send, recv, count, dt, comm, stream);
    case Collective::kBroadcast:
      return ringoBroadcast(send, recv, count, dt, root, comm, stream);
    case Collective::kReduce:
      return ringoReduce(send, recv, count, dt, op, root, comm, stream);
  }
  return ringoInternalError;
}

std::string CollName(const ::testing::TestParamInfo<Collective>& info) {
  return CollectiveName(info.param);
}

// A 1-rank host communicator per test: every call is local, so a validation
// failure cannot be confused with waiting for a peer.
class CollectiveArgs : public ::testing::TestWithParam<Collective> {
 protected:
  void SetUp() override {
    comms_ = MakeHostComms(1);
    ASSERT_EQ(comms_.size(), 1u);
    comm_ = comms_[0];
    std::memset(send_, 0, sizeof(send_));
    std::memset(recv_, 0, sizeof(recv_));
  }
  void TearDown() override {
    if (!comms_.empty()) DestroyComms(comms_);
  }
  ringoResult_t Call(const void* send, void* recv, size_t count, ringoDataType_t dt = ringoFloat32,
                     ringoRedOp_t op = ringoSum, int root = 0, ringoStream_t stream = nullptr) {
    return CallColl(GetParam(), send, recv, count, dt, op, root, comm_, stream);
  }

  std::vector<ringoComm_t> comms_;
  ringoComm_t comm_ = nullptr;
  float send_[64];
  float recv_[64];
};

TEST_P(CollectiveArgs, ValidCallSucceeds) {
  for (int i = 0; i < 8; ++i) send_[i] = static_cast<float>(i + 1);
  ASSERT_EQ(Call(send_, recv_, 8), ringoSuccess) << ringoGetLastError(nullptr);
  // One rank: every collective copies its input.
  for (int i = 0; i < 8; ++i) EXPECT_EQ(recv_[i], static_cast<float>(i + 1)) << i;
}

TEST_P(CollectiveArgs, NullComm) {
  EXPECT_TRUE(FailsWith(CallColl(GetParam(), send_, recv_, 4, ringoFloat32, ringoSum, 0, nullptr),
                        ringoInvalidArgument, nullptr, {"comm"}));
}

TEST_P(CollectiveArgs, NullSendbuffWithCount) {
  EXPECT_TRUE(
      FailsWith(Call(nullptr, recv_, 4), ringoInvalidArgument, comm_, {"sendbuff", "send"}));
}

TEST_P(CollectiveArgs, NullRecvbuffWithCount) {
  EXPECT_TRUE(
      FailsWith(Call(send_, nullptr, 4), ringoInvalidArgument, comm_, {"recvbuff", "recv"}));
}

// Count 0 moves nothing, so null buffers are fine (as in NCCL).
TEST_P(CollectiveArgs, NullBuffersWithCountZeroAreAccepted) {
  EXPECT_EQ(Call(nullptr, nullptr, 0), ringoSuccess) << ringoGetLastError(nullptr);
}

TEST_P(CollectiveArgs, UnknownDatatype) {
  for (int dt : {99, -1, static_cast<int>(ringoNumTypes)}) {
    EXPECT_TRUE(FailsWith(Call(send_, recv_, 4, static_cast<ringoDataType_t>(dt)),
                          ringoInvalidArgument, comm_, {"datatype", "type"}))
        << "datatype " << dt;
  }
}

TEST_P(CollectiveArgs, NonNullStreamOnHostComm) {
  int fake_stream = 0;
  EXPECT_TRUE(FailsWith(Call(send_, recv_, 4, ringoFloat32, ringoSum, 0, &fake_stream),
                        ringoInvalidArgument, comm_, {"stream"}));
}

// count * sizeof(float) overflows size_t: must be rejected before any byte
// count is computed from it (or memory touched).
TEST_P(CollectiveArgs, CountOverflow) {
  const Collective coll = GetParam();
  EXPECT_EQ(InChild([coll]() -> std::string {
              ringoComm_t comm = MakeSoloHostComm();
              if (comm == nullptr) return "could not create a 1-rank communicator";
              float send[4] = {}, recv[4] = {};
              std::string problems;
              for (size_t count : {SIZE_MAX, SIZE_MAX / 4 + 1, SIZE_MAX / 2}) {
                problems +=
                    CheckFails(("count " + std::to_string(count)).c_str(),
                               CallColl(coll, send, recv, count, ringoFloat32, ringoSum, 0, comm),
                               ringoInvalidArgument, {"count", "overflow", "size"});
              }
              ringoCommDestroy(comm);
              return problems;
            }),
            "");
}

TEST_P(CollectiveArgs, DestroyedCommunicator) {
  const Collective coll = GetParam();
  EXPECT_EQ(InChild([coll]() -> std::string {
              ringoComm_t comm = MakeSoloHostComm();
              if (comm == nullptr) return "could not create a 1-rank communicator";
              if (ringoCommDestroy(comm) != ringoSuccess) return "ringoCommDestroy failed";
              float send[4] = {}, recv[4] = {};
              return CheckFails("after ringoCommDestroy",
                                CallColl(coll, send, recv, 4, ringoFloat32, ringoSum, 0, comm),
                                ringoInvalidArgument, {"comm", "destroy", "invalid", "handle"});
            }),
            "");
}

TEST_P(CollectiveArgs, AbortedCommunicator) {
  const Collective coll = GetParam();
  EXPECT_EQ(InChild([coll]() -> std::string {
              ringoComm_t comm = MakeSoloHostComm();
              if (comm == nullptr) return "could not create a 1-rank communicator";
              if (ringoCommAbort(comm) != ringoSuccess) return "ringoCommAbort failed";
              float send[4] = {}, recv[4] = {};
              return CheckFails("after ringoCommAbort",
                                CallColl(coll, send, recv, 4, ringoFloat32, ringoSum, 0, comm),
                                ringoInvalidArgument, {"comm", "abort", "invalid", "handle"});
            }),
            "");
}

TEST_P(CollectiveArgs, FinalizedCommunicator) {
  ringoComm_t comm = MakeSoloHostComm();
  ASSERT_NE(comm, nullptr);
  ASSERT_EQ(ringoCommFinalize(comm), ringoSuccess) << ringoGetLastError(nullptr);
  EXPECT_TRUE(FailsWith(CallColl(GetParam(), send_, recv_, 4, ringoFloat32, ringoSum, 0, comm),
                        ringoInvalidUsage, comm, {"final"}));
  // Queries stay allowed after finalize.
  int count = 0;
  EXPECT_EQ(ringoCommCount(comm, &count), ringoSuccess);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(ringoCommDestroy(comm), ringoSuccess);
}

INSTANTIATE_TEST_SUITE_P(All, CollectiveArgs, ::testing::ValuesIn(kAllCollectives), CollName);

class ReducingArgs : public CollectiveArgs {};

TEST_P(ReducingArgs, UnknownOp) {
  for (int op : {99, -1, static_cast<int>(ringoNumOps)}) {
    EXPECT_TRUE(FailsWith(Call(send_, recv_, 4, ringoFloat32, static_cast<ringoRedOp_t>(op)),
                          ringoInvalidArgument, comm_, {"op"}))
        << "op " << op;
  }
}

INSTANTIATE_TEST_SUITE_P(All, ReducingArgs,
                         ::testing::Values(Collective::kAllReduce, Collective::kReduceScatter,
                                           Collective::kReduce),
                         CollName);

class RootedArgs : public CollectiveArgs {};

TEST_P(RootedArgs, RootOutOfRange) {
  for (int root : {-1, 1, 1000}) {  // nranks is 1
    EXPECT_TRUE(FailsWith(Call(send_, recv_, 4, ringoFloat32, ringoSum, root), ringoInvalidArgument,
                          comm_, {"root"}))
        << "root " << root;
  }
}

INSTANTIATE_TEST_SUITE_P(All, RootedArgs,
                         ::testing::Values(Collective::kBroadcast, Collective::kReduce), CollName);

// ---- Two ranks: what depends on the rank count ----

class TwoRankArgs : public ::testing::Test {
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

TEST_F(TwoRankArgs, RootOutOfRange) {
  float buf[4] = {};
  for (int root : {-1, 2}) {
    EXPECT_TRUE(FailsWith(ringoBroadcast(buf, buf, 4, ringoFloat32, root, comms_[0], nullptr),
                          ringoInvalidArgument, comms_[0], {"root"}));
    EXPECT_TRUE(
        FailsWith(ringoReduce(buf, buf, 4, ringoFloat32, ringoSum, root, comms_[1], nullptr),
                  ringoInvalidArgument, comms_[1], {"root"}));
  }
}

// ringo.h: Broadcast reads sendbuff on the root only and Reduce writes
// recvbuff on the root only, so the other ranks may pass NULL there.
TEST_F(TwoRankArgs, NonRootMayPassNullForUnusedBuffers) {
  float send0[4] = {1, 2, 3, 4}, recv0[4] = {}, recv1[4] = {};
  ASSERT_EQ(ringoGroupStart(), ringoSuccess);
  EXPECT_EQ(ringoBroadcast(send0, recv0, 4, ringoFloat32, 0, comms_[0], nullptr), ringoSuccess)
      << ringoGetLastError(nullptr);
  EXPECT_EQ(ringoBroadcast(nullptr, recv1, 4, ringoFloat32, 0, comms_[1], nullptr), ringoSuccess)
      << ringoGetLastError(nullptr);
  ASSERT_EQ(ringoGroupEnd(), ringoSuccess) << ringoGetLastError(nullptr);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(recv1[i], send0[i]);

  float send1[4] = {10, 20, 30, 40}, out[4] = {};
  ASSERT_EQ(ringoGroupStart(), ringoSuccess);
  EXPECT_EQ(ringoReduce(send0, out, 4, ringoFloat32, ringoSum, 0, comms_[0], nullptr), ringoSuccess)
      << ringoGetLastError(nullptr);
  EXPECT_EQ(ringoReduce(send1, nullptr, 4, ringoFloat32, ringoSum, 0, comms_[1], nullptr),
            ringoSuccess)
      << ringoGetLastError(nullptr);
  ASSERT_EQ(ringoGroupEnd(), ringoSuccess) << ringoGetLastError(nullptr);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], send0[i] + send1[i]);
}

// ReduceScatter's send buffer and AllGather's receive buffer are
// nranks * count elements: the overflow check must include the rank count.
TEST(TwoRankOverflow, CountTimesRanksOverflows) {
  EXPECT_EQ(InChild([]() -> std::string {
              std::vector<ringoComm_t> comms = MakeHostComms(2);
              if (comms.size() != 2) return "could not create 2 communicators";
              // count * 4 fits in size_t; count * 4 * 2 does not.
              const size_t count = SIZE_MAX / 8 + 1;
              float buf[4] = {};
              std::string problems;
              problems += CheckFails("ReduceScatter",
                                     ringoReduceScatter(buf, buf + 1, count, ringoFloat32, ringoSum,
                                                        comms[0], nullptr),
                                     ringoInvalidArgument, {"count", "overflow", "size"});
              problems += CheckFails(
                  "AllGather", ringoAllGather(buf, buf + 1, count, ringoFloat32, comms[0], nullptr),
                  ringoInvalidArgument, {"count", "overflow", "size"});
              for (ringoComm_t c : comms) ringoCommDestroy(c);
              return problems;
            }),
            "");
}

}  // namespace
}  // namespace ringo::tests
