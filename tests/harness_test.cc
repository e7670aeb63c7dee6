// Tests of the multi-rank harness: every rank's failure is reported, deaths
// and hangs of forked ranks are seen, and the deadline holds.
#include "tests/harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "gtest/gtest.h"

namespace ringo::tests {
namespace {

using std::chrono::milliseconds;

HarnessOptions NoId() {
  HarnessOptions o;
  o.make_unique_id = false;
  return o;
}

TEST(Harness, ThreadsRunEveryRankConcurrently) {
  std::atomic<int> arrived{0};
  auto results = RunRanks(
      4, RankMode::kThreads, milliseconds(10000),
      [&](int, int nranks, const ringoUniqueId&) -> std::string {
        // A barrier: passes only if all ranks run at the same time.
        arrived++;
        while (arrived.load() < nranks) std::this_thread::yield();
        return "";
      },
      NoId());
  ASSERT_EQ(results.size(), 4u);
  EXPECT_ALL_RANKS_OK(results);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(results[r].rank, r);
}

TEST(Harness, ReportsEveryFailingRank) {
  for (RankMode mode : {RankMode::kThreads, RankMode::kProcesses}) {
    auto results = RunRanks(
        4, mode, milliseconds(10000),
        [](int rank, int, const ringoUniqueId&) -> std::string {
          if (rank == 1) throw std::runtime_error("boom");
          return rank % 2 == 0 ? "bad rank " + std::to_string(rank) : "";
        },
        NoId());
    ::testing::AssertionResult all = AllRanksOk(results);
    ASSERT_FALSE(all);
    const std::string text = all.message();
    EXPECT_NE(text.find("rank 0"), std::string::npos) << text;
    EXPECT_NE(text.find("bad rank 0"), std::string::npos) << text;
    EXPECT_NE(text.find("boom"), std::string::npos) << text;
    EXPECT_NE(text.find("bad rank 2"), std::string::npos) << text;
    EXPECT_EQ(text.find("rank 3 "), std::string::npos) << text;
    EXPECT_TRUE(results[3].ok);
  }
}

TEST(Harness, ProcessesReportSignalsAndExitCodes) {
  auto results = RunRanks(
      4, RankMode::kProcesses, milliseconds(10000),
      [](int rank, int, const ringoUniqueId&) -> std::string {
        if (rank == 1) KillSelf(SIGKILL);
        if (rank == 2) ::_exit(3);
        if (rank == 3) std::abort();
        return "";
      },
      NoId());
  EXPECT_TRUE(results[0].ok);
  EXPECT_EQ(results[1].term_signal, SIGKILL);
  EXPECT_EQ(results[2].exit_code, 3);
  EXPECT_NE(results[2].message.find("status 3"), std::string::npos) << results[2].message;
  EXPECT_EQ(results[3].term_signal, SIGABRT);
  // Rank 1's death was expected; ranks 2 and 3 are still reported.
  ::testing::AssertionResult match = RanksMatch(results, {{1, RankExpectation::KilledBy(SIGKILL)}});
  ASSERT_FALSE(match);
  const std::string text = match.message();
  EXPECT_EQ(text.find("rank 1 "), std::string::npos) << text;
  EXPECT_NE(text.find("rank 2 "), std::string::npos) << text;
  EXPECT_NE(text.find("rank 3 "), std::string::npos) << text;
}

TEST(Harness, ProcessDeadlineKillsStragglers) {
  const auto start = std::chrono::steady_clock::now();
  auto results = RunRanks(
      3, RankMode::kProcesses, milliseconds(1500),
      [](int rank, int, const ringoUniqueId&) -> std::string {
        if (rank == 2) ::pause();  // hangs until killed
        return "";
      },
      NoId());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 6.0);
  EXPECT_TRUE(results[0].ok);
  EXPECT_TRUE(results[1].ok);
  EXPECT_TRUE(results[2].timed_out);
  EXPECT_NE(results[2].message.find("deadline"), std::string::npos) << results[2].message;
}

TEST(Harness, ExpendableRankIsKilledWhenOthersFinish) {
  const auto start = std::chrono::steady_clock::now();
  HarnessOptions options = NoId();
  options.expendable_ranks = {1};
  auto results = RunRanks(
      2, RankMode::kProcesses, milliseconds(30000),
      [](int rank, int, const ringoUniqueId&) -> std::string {
        if (rank == 1) {
          SignalSelfAfter(milliseconds(10), SIGSTOP);
          ::pause();
        }
        std::this_thread::sleep_for(milliseconds(200));
        return "";
      },
      options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 10.0);
  EXPECT_TRUE(RanksMatch(results, {{1, RankExpectation::Expendable()}}));
}

TEST(Harness, ProcessMessagesLargerThanAPipeBuffer) {
  auto results = RunRanks(
      2, RankMode::kProcesses, milliseconds(10000),
      [](int rank, int, const ringoUniqueId&) -> std::string {
        return rank == 0 ? std::string(1 << 20, 'x') : "";
      },
      NoId());
  EXPECT_EQ(results[0].message.size(), size_t{1} << 20);
  EXPECT_TRUE(results[1].ok);
}

TEST(Harness, UniqueIdIsSharedByEveryRank) {
  std::vector<ringoUniqueId> ids(3);
  auto results = RunRanks(3, RankMode::kThreads, milliseconds(10000),
                          [&](int rank, int, const ringoUniqueId& id) -> std::string {
                            ids[rank] = id;
                            return "";
                          });
  ASSERT_ALL_RANKS_OK(results);
  EXPECT_EQ(std::memcmp(&ids[0], &ids[1], sizeof(ringoUniqueId)), 0);
  EXPECT_EQ(std::memcmp(&ids[0], &ids[2], sizeof(ringoUniqueId)), 0);
}

TEST(Harness, ScopedEnvRestores) {
  ::unsetenv("RINGO_SLOT_BYTES");
  {
    ScopedEnv env({{"RINGO_SLOT_BYTES", "128"}});
    ASSERT_NE(std::getenv("RINGO_SLOT_BYTES"), nullptr);
    EXPECT_STREQ(std::getenv("RINGO_SLOT_BYTES"), "128");
  }
  EXPECT_EQ(std::getenv("RINGO_SLOT_BYTES"), nullptr);
  EXPECT_GT(PickFreePort(), 0);
}

// A reserved port is below the ephemeral range; while held, a connect is
// refused and a bind fails; once released, a listener can take it.
TEST(Harness, ReservedPortRefusesUntilReleased) {
  ReservedPort reserved;
  const int port = reserved.port();
  ASSERT_GT(port, 0);
  int low = 32768;
  if (std::FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    int hi = 0;
    if (std::fscanf(f, "%d %d", &low, &hi) != 2) low = 32768;
    std::fclose(f);
  }
  EXPECT_LT(port, low);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const int client = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(client, 0);
  EXPECT_NE(::connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(errno, ECONNREFUSED);
  ::close(client);
  const int other = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(other, 0);
  EXPECT_NE(::bind(other, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  reserved.Release();
  EXPECT_EQ(::bind(other, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
  EXPECT_EQ(::listen(other, 1), 0);
  ::close(other);
}

}  // namespace
}  // namespace ringo::tests
