// Conformance of ringoSend/ringoRecv on host memory (tests/p2p_case.h's
// rounds): rings in both directions, a random permutation, random pairs in
// groups of up to 64 operations, every ordered pair, several messages on one
// pair, a chain of single calls; counts 0, 1, odd, around the slot and many
// slots; every datatype; 1 to 8 ranks as threads (ringoCommInitAll) and as
// forked processes (ringoCommInitRank), with 64-byte slots (most messages
// span several slots and the FIFO fills) and with the default slots.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "ringo/ringo.h"
#include "tests/harness.h"
#include "tests/p2p_case.h"

namespace ringo::tests {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kDeadline{120000};
const std::vector<size_t> kSmallCounts = {0, 1, 7, 15, 16, 17, 100, 513};
const std::vector<size_t> kLargeCounts = {0, 3, 40000, 300001};

std::string RunAllRounds(const std::vector<Round>& rounds, int rank, ringoComm_t comm) {
  for (const Round& r : rounds) {
    std::string problem = RunRound(r, rank, comm);
    if (!problem.empty()) return problem;
  }
  return "";
}

struct Param {
  int nranks;
  bool small_slots;
};

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  return std::to_string(info.param.nranks) + "ranks" + (info.param.small_slots ? "_small_slots" : "");
}

std::vector<Round> RoundsFor(const Param& p) {
  return MakeRounds(p.nranks, 1234u + static_cast<uint32_t>(p.nranks),
                    p.small_slots ? kSmallCounts : kLargeCounts, 64, true);
}

class Threads : public ::testing::TestWithParam<Param> {};

TEST_P(Threads, EveryPattern) {
  const Param p = GetParam();
  ScopedEnv env({{"RINGO_SLOT_BYTES", p.small_slots ? std::optional<std::string>("64") : std::nullopt}});
  std::vector<ringoComm_t> comms(p.nranks, nullptr);
  ASSERT_EQ(ringoCommInitAll(comms.data(), p.nranks, nullptr), ringoSuccess) << ringoGetLastError(nullptr);
  const std::vector<Round> rounds = RoundsFor(p);
  HarnessOptions options;
  options.make_unique_id = false;
  auto results = RunRanks(
      p.nranks, RankMode::kThreads, kDeadline,
      [&](int rank, int, const ringoUniqueId&) { return RunAllRounds(rounds, rank, comms[rank]); }, options);
  EXPECT_ALL_RANKS_OK(results);
  for (ringoComm_t c : comms) ringoCommDestroy(c);
}

INSTANTIATE_TEST_SUITE_P(P2p, Threads,
                         ::testing::Values(Param{1, true}, Param{2, true}, Param{3, true}, Param{4, true},
                                           Param{5, true}, Param{8, true}, Param{2, false}, Param{4, false},
                                           Param{8, false}),
                         Name);

class Processes : public ::testing::TestWithParam<Param> {};

TEST_P(Processes, EveryPattern) {
  const Param p = GetParam();
  ScopedEnv env({{"RINGO_SLOT_BYTES", p.small_slots ? std::optional<std::string>("64") : std::nullopt}});
  const std::vector<Round> rounds = RoundsFor(p);
  auto results = RunRanks(p.nranks, RankMode::kProcesses, kDeadline,
                          [&](int rank, int nranks, const ringoUniqueId& id) -> std::string {
                            ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
                            config.device_kind = RINGO_DEVICE_HOST;
                            ringoComm_t comm = nullptr;
                            ringoResult_t rc = ringoCommInitRankConfig(&comm, nranks, id, rank, &config);
                            if (rc != ringoSuccess) return std::string("init: ") + ringoGetLastError(nullptr);
                            std::string problem = RunAllRounds(rounds, rank, comm);
                            if (ringoCommDestroy(comm) != ringoSuccess && problem.empty()) problem = "destroy failed";
                            return problem;
                          });
  EXPECT_ALL_RANKS_OK(results);
}

INSTANTIATE_TEST_SUITE_P(P2p, Processes,
                         ::testing::Values(Param{1, true}, Param{2, true}, Param{3, true}, Param{8, true},
                                           Param{2, false}, Param{4, false}),
                         Name);

// Large messages from ringoMemAlloc buffers between processes: the receiver
// copies straight out of the sender's mapped region (at offsets inside it,
// one region serving several messages, and a heap buffer beside them), both
// ways at once, every byte checked.
TEST(P2pRegions, LargeMessagesFromRingoMemAllocBetweenProcesses) {
  auto results = RunRanks(2, RankMode::kProcesses, kDeadline,
                          [&](int rank, int nranks, const ringoUniqueId& id) -> std::string {
                            ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
                            config.device_kind = RINGO_DEVICE_HOST;
                            ringoComm_t comm = nullptr;
                            if (ringoCommInitRankConfig(&comm, nranks, id, rank, &config) != ringoSuccess) {
                              return std::string("init: ") + ringoGetLastError(nullptr);
                            }
                            const int peer = 1 - rank;
                            const size_t region_bytes = size_t{8} << 20;
                            void* region = nullptr;
                            if (ringoMemAlloc(&region, region_bytes) != ringoSuccess) return "ringoMemAlloc failed";
                            auto* mine = static_cast<uint8_t*>(region);
                            std::vector<uint8_t> got(region_bytes), heap(size_t{1} << 20);
                            std::string problem;
                            // (offset in the region, bytes); the last one ends at the region's end.
                            const std::pair<size_t, size_t> messages[] = {
                                {0, size_t{64} << 10}, {4096 + 3, size_t{1} << 20}, {12345, (size_t{3} << 20) + 17},
                                {region_bytes - (size_t{2} << 20), size_t{2} << 20}};
                            for (int m = 0; m < 5 && problem.empty(); ++m) {
                              const bool from_heap = m == 4;
                              const size_t off = from_heap ? 0 : messages[m].first;
                              const size_t bytes = from_heap ? heap.size() : messages[m].second;
                              uint8_t* src = from_heap ? heap.data() : mine + off;
                              for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<uint8_t>(i * 7 + m * 13 + rank);
                              std::fill(got.begin(), got.end(), uint8_t{0xEE});
                              ringoGroupStart();
                              ringoSend(src, bytes, ringoUint8, peer, comm, nullptr);
                              ringoRecv(got.data(), bytes, ringoUint8, peer, comm, nullptr);
                              if (ringoGroupEnd() != ringoSuccess) {
                                problem = "message " + std::to_string(m) + ": " + ringoGetLastError(comm);
                                break;
                              }
                              for (size_t i = 0; i < bytes; ++i) {
                                if (got[i] != static_cast<uint8_t>(i * 7 + m * 13 + peer)) {
                                  problem = "message " + std::to_string(m) + ": byte " + std::to_string(i) + " wrong";
                                  break;
                                }
                              }
                              if (problem.empty() && got[bytes] != 0xEE) {
                                problem = "message " + std::to_string(m) + ": written past its end";
                              }
                            }
                            ringoMemFree(region);
                            if (ringoCommDestroy(comm) != ringoSuccess && problem.empty()) problem = "destroy failed";
                            return problem;
                          });
  EXPECT_ALL_RANKS_OK(results);
}

// Messages of one pair are matched in issue order across calls and groups,
// and a connection made by one group serves the next.
TEST(P2pOrder, MatchesInIssueOrderAcrossCalls) {
  std::vector<ringoComm_t> comms(2, nullptr);
  ASSERT_EQ(ringoCommInitAll(comms.data(), 2, nullptr), ringoSuccess);
  HarnessOptions options;
  options.make_unique_id = false;
  auto results = RunRanks(
      2, RankMode::kThreads, kDeadline,
      [&](int rank, int, const ringoUniqueId&) -> std::string {
        std::vector<int> v(5);
        for (int k = 0; k < 10; ++k) {
          if (rank == 0) {
            for (int& x : v) x = k * 100 + static_cast<int>(&x - v.data());
            if (ringoSend(v.data(), 5, ringoInt32, 1, comms[0], nullptr) != ringoSuccess) return "send failed";
          } else {
            if (ringoRecv(v.data(), 5, ringoInt32, 0, comms[1], nullptr) != ringoSuccess) return "recv failed";
            for (int i = 0; i < 5; ++i) {
              if (v[i] != k * 100 + i) return "message " + std::to_string(k) + " arrived out of order";
            }
          }
        }
        return "";
      },
      options);
  EXPECT_ALL_RANKS_OK(results);
  for (ringoComm_t c : comms) ringoCommDestroy(c);
}

}  // namespace
}  // namespace ringo::tests
