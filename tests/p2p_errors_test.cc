// Point-to-point failures: a peer that never posts its match (on a pair not
// yet connected, and on one already connected) gives ringoTimeout naming
// it; mismatched sizes give ringoInvalidUsage naming both sides; a peer
// that dies is ringoRemoteError; bad arguments are rejected before any data
// moves.
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ringo/ringo.h"
#include "tests/api_test_util.h"
#include "tests/harness.h"

namespace ringo::tests {
namespace {

using std::chrono::milliseconds;

constexpr int kTimeoutMs = 1000;
// Larger than a pair's FIFO (8 slots of 128 KiB): such a send waits for its receiver.
constexpr size_t kBigFloats = size_t{1} << 19;
constexpr milliseconds kDeadline{60000};

ringoComm_t InitHost(int rank, int nranks, const ringoUniqueId& id, std::string* error, int timeout_ms = kTimeoutMs) {
  ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
  config.device_kind = RINGO_DEVICE_HOST;
  config.timeout_ms = timeout_ms;
  ringoComm_t comm = nullptr;
  if (ringoCommInitRankConfig(&comm, nranks, id, rank, &config) != ringoSuccess) {
    *error = std::string("init: ") + ringoGetLastError(nullptr);
    return nullptr;
  }
  return comm;
}

// "" when rc is `want` and the message names `peer` as a rank.
std::string Expect(const char* what, ringoResult_t rc, ringoResult_t want, ringoComm_t comm, int peer) {
  const std::string msg = ringoGetLastError(comm);
  if (rc != want) return std::string(what) + " returned " + ResultName(rc) + ", want " + ResultName(want) + ": " + msg;
  if (msg.find("rank " + std::to_string(peer)) == std::string::npos) {
    return std::string(what) + ": the message does not name rank " + std::to_string(peer) + ": " + msg;
  }
  return "";
}

struct Scenario {
  const char* name;
  bool connect_first;  // one message goes through first, so the pair is connected
  bool receiver_waits;  // the stuck side is the receiver (rank 1), else the sender (rank 0)
};

class MissingMatch : public ::testing::TestWithParam<Scenario> {};

TEST_P(MissingMatch, TimesOutNamingThePeer) {
  const Scenario s = GetParam();
  for (RankMode mode : {RankMode::kThreads, RankMode::kProcesses}) {
    Flag gave_up;  // the stuck side's call returned
    auto results = RunRanks(2, mode, kDeadline, [&](int rank, int nranks, const ringoUniqueId& id) -> std::string {
      std::string error;
      ringoComm_t comm = InitHost(rank, nranks, id, &error);
      if (comm == nullptr) return error;
      std::vector<float> buf(kBigFloats, 1.0f);
      if (s.connect_first) {
        const ringoResult_t rc = rank == 0 ? ringoSend(buf.data(), 4, ringoFloat32, 1, comm, nullptr)
                                           : ringoRecv(buf.data(), 4, ringoFloat32, 0, comm, nullptr);
        if (rc != ringoSuccess) return std::string("first message: ") + ringoGetLastError(comm);
      }
      std::string problem;
      const int stuck = s.receiver_waits ? 1 : 0;
      if (rank == stuck) {
        // A send larger than the FIFO waits for its receiver; a receive for its sender.
        const ringoResult_t rc = stuck == 0 ? ringoSend(buf.data(), buf.size(), ringoFloat32, 1, comm, nullptr)
                                            : ringoRecv(buf.data(), buf.size(), ringoFloat32, 0, comm, nullptr);
        problem = Expect(stuck == 0 ? "ringoSend" : "ringoRecv", rc, ringoTimeout, comm, 1 - stuck);
        gave_up.Raise();
      } else if (!gave_up.Wait(kDeadline / 2)) {
        // Never posts the match; stays (alive, not aborted) until the other side has given up.
        problem = "the stuck rank's call did not return";
      }
      ringoCommAbort(comm);
      return problem;
    });
    EXPECT_ALL_RANKS_OK(results) << s.name << (mode == RankMode::kThreads ? " (threads)" : " (processes)");
  }
}

INSTANTIATE_TEST_SUITE_P(P2p, MissingMatch,
                         ::testing::Values(Scenario{"send_new_pair", false, false},
                                           Scenario{"recv_new_pair", false, true},
                                           Scenario{"send_connected_pair", true, false},
                                           Scenario{"recv_connected_pair", true, true}),
                         [](const ::testing::TestParamInfo<Scenario>& info) { return std::string(info.param.name); });

TEST(P2pErrors, MismatchedSizesAreInvalidUsage) {
  Flag received;  // the receiver's call returned
  auto results = RunRanks(2, RankMode::kThreads, kDeadline, [&](int rank, int nranks, const ringoUniqueId& id) {
    std::string error;
    ringoComm_t comm = InitHost(rank, nranks, id, &error);
    if (comm == nullptr) return error;
    std::vector<float> buf(64, 2.0f);
    std::string problem;
    if (rank == 0) {
      (void)ringoSend(buf.data(), 10, ringoFloat32, 1, comm, nullptr);  // eager: may return success
      // The receiver reads the slot before this rank aborts.
      if (!received.Wait(kDeadline / 2)) problem = "the receive did not return";
    } else {
      const ringoResult_t rc = ringoRecv(buf.data(), 20, ringoFloat32, 0, comm, nullptr);
      received.Raise();
      problem = Expect("ringoRecv of the wrong size", rc, ringoInvalidUsage, comm, 0);
      if (problem.empty() && std::string(ringoGetLastError(comm)).find("40") == std::string::npos) {
        problem = std::string("the message does not give the sizes: ") + ringoGetLastError(comm);
      }
    }
    ringoCommAbort(comm);
    return problem;
  });
  EXPECT_ALL_RANKS_OK(results);
}

TEST(P2pErrors, APeerThatDiesIsARemoteError) {
  HarnessOptions options;
  auto results = RunRanks(
      2, RankMode::kProcesses, kDeadline,
      [&](int rank, int nranks, const ringoUniqueId& id) -> std::string {
        std::string error;
        // A timeout far beyond the peer's death: the error must come from
        // noticing it, however long the kill takes to land.
        ringoComm_t comm = InitHost(rank, nranks, id, &error, 30000);
        if (comm == nullptr) return error;
        std::vector<float> buf(kBigFloats, 3.0f);
        const ringoResult_t first = rank == 0 ? ringoSend(buf.data(), 4, ringoFloat32, 1, comm, nullptr)
                                              : ringoRecv(buf.data(), 4, ringoFloat32, 0, comm, nullptr);
        if (first != ringoSuccess) return std::string("first message: ") + ringoGetLastError(comm);
        if (rank == 1) KillSelf(SIGKILL);
        const ringoResult_t rc = ringoSend(buf.data(), buf.size(), ringoFloat32, 1, comm, nullptr);
        std::string problem = Expect("ringoSend to a dead peer", rc, ringoRemoteError, comm, 1);
        ringoCommAbort(comm);
        return problem;
      },
      options);
  EXPECT_TRUE(RanksMatch(results, {{1, RankExpectation::KilledBy(SIGKILL)}}));
}

TEST(P2pErrors, BadArgumentsAreRejected) {
  std::vector<ringoComm_t> comms = MakeHostComms(2);
  ASSERT_EQ(comms.size(), 2u);
  float x[4] = {0, 0, 0, 0};
  int stream_token = 0;
  EXPECT_TRUE(FailsWith(ringoSend(x, 4, ringoFloat32, 2, comms[0], nullptr), ringoInvalidArgument, comms[0], {"peer"}));
  EXPECT_TRUE(FailsWith(ringoRecv(x, 4, ringoFloat32, -1, comms[0], nullptr), ringoInvalidArgument, comms[0], {"peer"}));
  EXPECT_TRUE(FailsWith(ringoSend(nullptr, 4, ringoFloat32, 1, comms[0], nullptr), ringoInvalidArgument, comms[0],
                        {"sendbuff"}));
  EXPECT_TRUE(FailsWith(ringoRecv(x, 4, static_cast<ringoDataType_t>(99), 1, comms[0], nullptr),
                        ringoInvalidArgument, comms[0], {"datatype"}));
  EXPECT_TRUE(FailsWith(ringoSend(x, 4, ringoFloat32, 1, comms[0], &stream_token), ringoInvalidArgument, comms[0],
                        {"stream"}));
  EXPECT_TRUE(FailsWith(ringoSend(x, ~size_t{0}, ringoFloat32, 1, comms[0], nullptr), ringoInvalidArgument,
                        comms[0], {"overflow"}));
  EXPECT_TRUE(FailsWith(ringoGather(x, nullptr, 1, ringoFloat32, 5, comms[0], nullptr), ringoInvalidArgument,
                        comms[0], {"root"}));
  // An unmatched send to oneself (outside a group) cannot complete.
  EXPECT_TRUE(FailsWith(ringoSend(x, 4, ringoFloat32, 0, comms[0], nullptr), ringoInvalidUsage, comms[0],
                        {"itself"}));
  for (ringoComm_t c : comms) ringoCommAbort(c);
}

}  // namespace
}  // namespace ringo::tests
