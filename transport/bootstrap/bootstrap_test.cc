// The bootstrap: unique ids that encode, decode and reject garbage; a root
// that serves all-gathers and barriers to N ranks (threads here); and every
// way a rendezvous can go wrong ending in an error on every rank, within the
// deadline, instead of a hang: disagreeing rank counts, duplicate ranks,
// strangers and garbage on the root's port, a rank that leaves, a root that
// is not there.
#include "transport/bootstrap/bootstrap.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/config.h"
#include "gtest/gtest.h"
#include "transport/socket.h"

namespace ringo::transport {
namespace {

using base::Code;
using base::Status;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

int64_t MsSince(steady_clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(steady_clock::now() - t).count();
}

std::string IfName() {
  const std::string& spec = base::GetConfig().socket_ifname;
  return spec.empty() ? "lo" : spec;
}

UniqueId MakeId(int64_t timeout_ms) {
  auto id = CreateUniqueId("", IfName(), timeout_ms);
  EXPECT_TRUE(id.ok()) << id.status().ToString();
  return id.ok() ? *id : UniqueId{};
}

// Runs `body(rank)` on one thread per rank and returns their statuses.
std::vector<Status> RunRanks(int n, const std::function<Status(int)>& body) {
  std::vector<Status> out(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { out[r] = body(r); });
  for (auto& t : threads) t.join();
  return out;
}

// ------------------------------------------------------------ unique id ----

TEST(UniqueIdTest, EncodeDecodeRoundTripIpv4) {
  auto addr = ParseAddress("127.0.0.1:41234");
  ASSERT_TRUE(addr.ok()) << addr.status().ToString();
  for (bool by_rank0 : {false, true}) {
    UniqueId id;
    id.nonce = 0x0123456789abcdefull;
    id.root = *addr;
    id.root_started_by_rank0 = by_rank0;
    char bytes[kUniqueIdBytes];
    std::memset(bytes, 0x5a, sizeof(bytes));
    id.Encode(bytes);
    auto back = UniqueId::Decode(bytes);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->nonce, id.nonce);
    EXPECT_EQ(back->root_started_by_rank0, by_rank0);
    EXPECT_EQ(back->root.ToString(), "127.0.0.1:41234");
    EXPECT_EQ(back->root.port(), 41234);
    EXPECT_EQ(back->root.length, sizeof(sockaddr_in));
    // Encoding is deterministic and fills every byte (no stack garbage leaks into ids).
    char again[kUniqueIdBytes];
    std::memset(again, 0xa5, sizeof(again));
    back->Encode(again);
    EXPECT_EQ(std::memcmp(bytes, again, kUniqueIdBytes), 0);
  }
}

TEST(UniqueIdTest, EncodeDecodeRoundTripIpv6) {
  auto addr = ParseAddress("[::1]:5555");
  ASSERT_TRUE(addr.ok()) << addr.status().ToString();
  UniqueId id;
  id.nonce = 42;
  id.root = *addr;
  char bytes[kUniqueIdBytes];
  id.Encode(bytes);
  auto back = UniqueId::Decode(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->nonce, 42u);
  EXPECT_EQ(back->root.ToString(), "[::1]:5555");
  EXPECT_EQ(back->root.length, sizeof(sockaddr_in6));
}

TEST(UniqueIdTest, ZeroedIdIsRejected) {
  char bytes[kUniqueIdBytes] = {};
  auto id = UniqueId::Decode(bytes);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), Code::kInvalidArgument);
  EXPECT_NE(id.status().message().find("unique id"), std::string::npos) << id.status().message();
}

TEST(UniqueIdTest, GarbageIsRejected) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 10000; ++trial) {
    char bytes[kUniqueIdBytes];
    for (char& b : bytes) b = static_cast<char>(rng());
    auto id = UniqueId::Decode(bytes);
    ASSERT_FALSE(id.ok()) << "trial " << trial;
    ASSERT_EQ(id.status().code(), Code::kInvalidArgument);
  }
  char ff[kUniqueIdBytes];
  std::memset(ff, 0xff, sizeof(ff));
  EXPECT_FALSE(UniqueId::Decode(ff).ok());
}

TEST(UniqueIdTest, AnyCorruptedByteOrBitIsRejected) {
  auto addr = ParseAddress("10.1.2.3:29500");
  ASSERT_TRUE(addr.ok());
  UniqueId id;
  id.nonce = 0xfeedfacecafebeefull;
  id.root = *addr;
  char good[kUniqueIdBytes];
  id.Encode(good);
  // The encoded fields and checksum are in the first 40 bytes.
  for (int byte = 0; byte < 40; ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      char bad[kUniqueIdBytes];
      std::memcpy(bad, good, sizeof(bad));
      bad[byte] = static_cast<char>(bad[byte] ^ (1 << bit));
      EXPECT_FALSE(UniqueId::Decode(bad).ok()) << "byte " << byte << " bit " << bit;
    }
  }
}

// Writes a well-formed id by hand (the layout documented in bootstrap.cc:
// magic, version, flags, nonce, family, port, 16 address bytes, FNV-1a
// checksum of all of that) so the checks after the checksum can be reached.
void HandMadeId(char out[kUniqueIdBytes], uint16_t version, uint16_t family) {
  std::memset(out, 0, kUniqueIdBytes);
  const uint32_t magic = 0x55474e52;
  const uint64_t nonce = 77;
  const uint16_t flags = 0, port = htons(1234);
  std::memcpy(out + 0, &magic, 4);
  std::memcpy(out + 4, &version, 2);
  std::memcpy(out + 6, &flags, 2);
  std::memcpy(out + 8, &nonce, 8);
  std::memcpy(out + 16, &family, 2);
  std::memcpy(out + 18, &port, 2);
  out[20] = 127;
  out[23] = 1;
  uint32_t h = 2166136261u;
  for (int i = 0; i < 36; ++i) h = (h ^ static_cast<uint8_t>(out[i])) * 16777619u;
  std::memcpy(out + 36, &h, 4);
}

TEST(UniqueIdTest, HandMadeIdsCheckVersionAndFamily) {
  char bytes[kUniqueIdBytes];
  HandMadeId(bytes, 1, AF_INET);
  auto ok = UniqueId::Decode(bytes);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString() << " (has the id layout changed?)";
  EXPECT_EQ(ok->root.ToString(), "127.0.0.1:1234");
  EXPECT_EQ(ok->nonce, 77u);

  HandMadeId(bytes, 2, AF_INET);
  auto v2 = UniqueId::Decode(bytes);
  ASSERT_FALSE(v2.ok());
  EXPECT_EQ(v2.status().code(), Code::kInvalidArgument);
  EXPECT_NE(v2.status().message().find("version 2"), std::string::npos) << v2.status().message();

  HandMadeId(bytes, 1, AF_UNIX);
  auto unix_family = UniqueId::Decode(bytes);
  ASSERT_FALSE(unix_family.ok());
  EXPECT_EQ(unix_family.status().code(), Code::kInvalidArgument);
}

TEST(UniqueIdTest, CommIdNamesTheAddressAndStartsNothing) {
  auto a = CreateUniqueId("127.0.0.1:29511", "", 1000);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->root_started_by_rank0);
  EXPECT_EQ(a->root.ToString(), "127.0.0.1:29511");
  EXPECT_NE(a->nonce & (uint64_t{1} << 63), 0u);
  auto b = CreateUniqueId("127.0.0.1:29511", "", 1000);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->nonce, b->nonce) << "every process derives the same id from RINGO_COMM_ID";
  auto c = CreateUniqueId("127.0.0.1:29512", "", 1000);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->nonce, c->nonce);
  // Nothing listens there.
  auto s = Socket::Connect(a->root, DeadlineAfterMs(100));
  EXPECT_FALSE(s.ok());

  EXPECT_EQ(CreateUniqueId("127.0.0.1:0", "", 1000).status().code(), Code::kInvalidArgument);
  EXPECT_FALSE(CreateUniqueId("no-port", "", 1000).ok());
  EXPECT_FALSE(CreateUniqueId("127.0.0.1:99999", "", 1000).ok());
}

TEST(UniqueIdTest, CreatedIdsAreDistinctAndListen) {
  UniqueId a = MakeId(2000);
  UniqueId b = MakeId(2000);
  EXPECT_NE(a.nonce, b.nonce);
  EXPECT_NE(a.nonce, 0u);
  EXPECT_FALSE(a.root_started_by_rank0);
  EXPECT_NE(a.root.port(), 0);
  EXPECT_NE(a.root.port(), b.root.port());
  auto s = Socket::Connect(a.root, DeadlineAfterMs(2000));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
}

TEST(UniqueIdTest, NoMatchingInterfaceIsAnError) {
  auto id = CreateUniqueId("", "=no-such-interface0", 1000);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), Code::kInvalidArgument);
  EXPECT_NE(id.status().message().find("no-such-interface0"), std::string::npos);
}

// ------------------------------------------------------------ rendezvous ----

// Round k: each rank contributes (k * 37 + 1) % 200 bytes (round 3 is empty)
// derived from (rank, k); every rank checks the whole gathered buffer.
Status GatherRounds(Bootstrap& b, int rounds) {
  const int n = b.nranks();
  for (int k = 0; k < rounds; ++k) {
    const size_t bytes = k == 3 ? 0 : static_cast<size_t>((k * 37 + 1) % 200);
    std::vector<uint8_t> mine(bytes), all(bytes * n + 1, 0xee);
    for (size_t i = 0; i < bytes; ++i) mine[i] = static_cast<uint8_t>(b.rank() * 31 + k * 7 + i);
    Status st = b.AllGather(mine.data(), bytes, all.data());
    if (!st.ok()) return st;
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < bytes; ++i) {
        if (all[r * bytes + i] != static_cast<uint8_t>(r * 31 + k * 7 + i)) {
          return base::Internal("round " + std::to_string(k) + ": wrong byte from rank " + std::to_string(r));
        }
      }
    }
    if (all[bytes * n] != 0xee) return base::Internal("round " + std::to_string(k) + " wrote past the end");
    if (k % 4 == 1) {
      st = b.Barrier();
      if (!st.ok()) return st;
    }
  }
  return base::OkStatus();
}

class BootstrapRanks : public ::testing::TestWithParam<int> {};

TEST_P(BootstrapRanks, AllGatherRoundsAndBarriers) {
  const int n = GetParam();
  const UniqueId id = MakeId(20000);
  auto statuses = RunRanks(n, [&](int rank) -> Status {
    auto b = Bootstrap::Connect(id, rank, n, 20000);
    if (!b.ok()) return b.status();
    if ((*b)->rank() != rank || (*b)->nranks() != n) return base::Internal("rank/nranks not kept");
    return GatherRounds(**b, 12);
  });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].ToString();
}

TEST_P(BootstrapRanks, LargeGather) {
  const int n = GetParam();
  const UniqueId id = MakeId(20000);
  constexpr size_t kBytes = 256 * 1024;
  auto statuses = RunRanks(n, [&](int rank) -> Status {
    auto b = Bootstrap::Connect(id, rank, n, 20000);
    if (!b.ok()) return b.status();
    std::vector<uint32_t> mine(kBytes / 4), all(kBytes / 4 * n);
    for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<uint32_t>(rank * 1000003 + i);
    Status st = (*b)->AllGather(mine.data(), kBytes, all.data());
    if (!st.ok()) return st;
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < mine.size(); i += 97) {
        if (all[r * mine.size() + i] != static_cast<uint32_t>(r * 1000003 + i)) return base::Internal("bad data");
      }
    }
    return (*b)->Barrier();
  });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].ToString();
}

INSTANTIATE_TEST_SUITE_P(Ranks, BootstrapRanks, ::testing::Values(1, 2, 3, 5, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "N" + std::to_string(info.param);
                         });

TEST(BootstrapTest, RanksConnectingLateStillJoin) {
  const UniqueId id = MakeId(20000);
  auto statuses = RunRanks(4, [&](int rank) -> Status {
    std::this_thread::sleep_for(milliseconds(100 * (3 - rank)));  // rank 3 first, rank 0 last
    auto b = Bootstrap::Connect(id, rank, 4, 20000);
    if (!b.ok()) return b.status();
    return GatherRounds(**b, 3);
  });
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].ToString();
}

TEST(BootstrapTest, TooLargeGatherIsRefusedLocally) {
  const UniqueId id = MakeId(5000);
  auto b = Bootstrap::Connect(id, 0, 1, 5000);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  std::vector<char> big((1 << 20) + 1), all(big.size());
  Status st = (*b)->AllGather(big.data(), big.size(), all.data());
  EXPECT_FALSE(st.ok());
  // The connection is still usable.
  EXPECT_TRUE((*b)->Barrier().ok());
}

// Every rank sees an error, and nobody waits much past the timeout.
void ExpectErrorOnEveryRank(const std::vector<Status>& statuses, int64_t elapsed_ms, int64_t timeout_ms) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_FALSE(statuses[r].ok()) << "rank " << r << " succeeded";
  }
  EXPECT_LT(elapsed_ms, 2 * timeout_ms + 2000) << "an error took too long";
}

TEST(BootstrapTest, RanksDisagreeingOnTheRankCountAllFail) {
  constexpr int64_t kTimeoutMs = 3000;
  for (int odd_one : {0, 2}) {
    const UniqueId id = MakeId(kTimeoutMs);
    const auto start = steady_clock::now();
    auto statuses = RunRanks(3, [&](int rank) -> Status {
      // The odd rank joins first in one run and last in the other.
      const bool odd = rank == odd_one;
      const bool odd_goes_first = odd_one == 0;
      if (odd != odd_goes_first) std::this_thread::sleep_for(milliseconds(100));
      auto b = Bootstrap::Connect(id, rank, rank == odd_one ? 4 : 3, kTimeoutMs);
      if (!b.ok()) return b.status();
      return GatherRounds(**b, 2);
    });
    ExpectErrorOnEveryRank(statuses, MsSince(start), kTimeoutMs);
    bool named = false;
    for (const Status& st : statuses) named = named || st.message().find("rank count") != std::string::npos;
    EXPECT_TRUE(named) << "no rank was told why: " << statuses[0].ToString() << " | " << statuses[1].ToString()
                       << " | " << statuses[2].ToString();
  }
}

TEST(BootstrapTest, TwoRanksWithTheSameRankAllFail) {
  constexpr int64_t kTimeoutMs = 3000;
  const UniqueId id = MakeId(kTimeoutMs);
  const auto start = steady_clock::now();
  auto statuses = RunRanks(3, [&](int rank) -> Status {
    if (rank == 2) std::this_thread::sleep_for(milliseconds(100));
    auto b = Bootstrap::Connect(id, rank == 2 ? 1 : rank, 3, kTimeoutMs);
    if (!b.ok()) return b.status();
    return GatherRounds(**b, 2);
  });
  ExpectErrorOnEveryRank(statuses, MsSince(start), kTimeoutMs);
  bool named = false;
  for (const Status& st : statuses) named = named || st.message().find("rank 1") != std::string::npos;
  EXPECT_TRUE(named) << statuses[0].ToString();
}

// The rank that announced an impossible (rank, nranks) is told why, with the
// root's InvalidArgument, not just a closed connection.
TEST(BootstrapTest, RankOutOfRangeIsToldWhy) {
  constexpr int64_t kTimeoutMs = 3000;
  const UniqueId id = MakeId(kTimeoutMs);
  auto b = Bootstrap::Connect(id, 5, 2, kTimeoutMs);
  Status st = b.ok() ? (*b)->Barrier() : b.status();
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("rank 5 of 2"), std::string::npos) << st.ToString();
}

TEST(BootstrapTest, DifferentSizesInOneRoundAllFail) {
  constexpr int64_t kTimeoutMs = 5000;
  const UniqueId id = MakeId(kTimeoutMs);
  auto statuses = RunRanks(3, [&](int rank) -> Status {
    auto b = Bootstrap::Connect(id, rank, 3, kTimeoutMs);
    if (!b.ok()) return b.status();
    std::vector<char> mine(rank == 1 ? 9 : 8), all(9 * 3);
    return (*b)->AllGather(mine.data(), mine.size(), all.data());
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(statuses[r].code(), Code::kInvalidUsage) << "rank " << r << ": " << statuses[r].ToString();
  }
}

// A rank that goes away after joining: the others fail (at once or at the
// root's deadline), naming it.
TEST(BootstrapTest, ARankThatLeavesFailsTheOthers) {
  constexpr int64_t kTimeoutMs = 2000;
  const UniqueId id = MakeId(kTimeoutMs);
  std::atomic<int> joined{0};
  const auto start = steady_clock::now();
  auto statuses = RunRanks(3, [&](int rank) -> Status {
    auto b = Bootstrap::Connect(id, rank, 3, kTimeoutMs);
    if (!b.ok()) return b.status();
    Status first = (*b)->Barrier();  // everyone joined
    if (!first.ok()) return first;
    ++joined;
    if (rank == 2) {
      b->reset();  // leaves
      return base::Internal("rank 2 left on purpose");
    }
    while (joined.load() < 3) std::this_thread::sleep_for(milliseconds(1));
    std::this_thread::sleep_for(milliseconds(50));
    return (*b)->Barrier();
  });
  ExpectErrorOnEveryRank(statuses, MsSince(start), kTimeoutMs);
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(statuses[r].code() == Code::kRemoteError || statuses[r].code() == Code::kTimeout)
        << statuses[r].ToString();
    const std::string& m = statuses[r].message();
    EXPECT_TRUE(m.find("rank 2") != std::string::npos || m.find("rank(s) 2") != std::string::npos)
        << "rank " << r << " was not told which peer is missing: " << statuses[r].ToString();
  }
}

// As above, but the survivors start the next round one after the other: the
// root has already failed the round (telling every registered rank why) and
// closed its sockets when the second one arrives. The reason is waiting in
// that rank's socket; a failed send must not hide it.
TEST(BootstrapTest, ALateRankStillHearsWhichRankLeft) {
  constexpr int64_t kTimeoutMs = 2000;
  const UniqueId id = MakeId(kTimeoutMs);
  std::vector<std::unique_ptr<Bootstrap>> ranks(3);
  for (int r = 0; r < 3; ++r) {
    auto b = Bootstrap::Connect(id, r, 3, kTimeoutMs);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    ranks[r] = std::move(b).value();
  }
  auto statuses = RunRanks(3, [&](int rank) { return ranks[rank]->Barrier(); });
  for (const Status& st : statuses) ASSERT_TRUE(st.ok()) << st.ToString();
  ranks[2].reset();  // rank 2 leaves
  std::this_thread::sleep_for(milliseconds(50));
  const auto start = steady_clock::now();
  for (int r = 0; r < 2; ++r) {
    Status st = ranks[r]->Barrier();
    EXPECT_FALSE(st.ok()) << "rank " << r;
    EXPECT_NE(st.message().find("rank 2"), std::string::npos)
        << "rank " << r << " was not told which peer is missing: " << st.ToString();
  }
  EXPECT_LT(MsSince(start), kTimeoutMs) << "the round should fail at once, not at the deadline";
}

// A rank of another communicator (same address, other nonce) is turned away
// without disturbing the real ranks.
TEST(BootstrapTest, StrangerWithAnotherNonceIsTurnedAway) {
  const UniqueId id = MakeId(20000);
  UniqueId other = id;
  other.nonce ^= 0x1234;
  auto stranger = Bootstrap::Connect(other, 0, 2, 5000);
  ASSERT_TRUE(stranger.ok());
  Status st = (*stranger)->Barrier();
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("another communicator"), std::string::npos) << st.ToString();
  auto statuses = RunRanks(2, [&](int rank) -> Status {
    auto b = Bootstrap::Connect(id, rank, 2, 20000);
    if (!b.ok()) return b.status();
    return GatherRounds(**b, 4);
  });
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(statuses[r].ok()) << statuses[r].ToString();
}

// Garbage on the root's port (before, and while, the ranks arrive) does not
// break the rendezvous that follows.
TEST(BootstrapTest, GarbageOnTheRootPortDoesNotBreakARealRendezvous) {
  const UniqueId id = MakeId(20000);
  std::vector<Socket> keep_open;
  auto send_garbage = [&](const std::string& bytes, bool close_after) {
    auto s = Socket::Connect(id.root, DeadlineAfterMs(5000));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    if (!bytes.empty()) {
      ASSERT_TRUE(s->SendAll(bytes.data(), bytes.size(), DeadlineAfterMs(5000)).ok());
    }
    if (!close_after) keep_open.push_back(std::move(s).value());
  };
  std::mt19937 rng(11);
  std::string random_bytes(4096, '\0');
  for (char& c : random_bytes) c = static_cast<char>(rng());
  send_garbage(random_bytes, true);
  send_garbage(random_bytes.substr(0, 1000), false);
  send_garbage("GET / HTTP/1.1\r\nHost: x\r\n\r\n", false);
  send_garbage("\x01\x02\x03", false);  // less than a header, kept open
  send_garbage("", false);              // connects and says nothing
  send_garbage(std::string(32, '\0'), true);
  // A header with the right magic but an absurd length, before any hello.
  {
    std::string h(32, '\0');
    const uint32_t magic = 0x42474e52;
    const uint16_t version = 1, type = 2;
    const uint64_t length = ~uint64_t{0};
    std::memcpy(&h[0], &magic, 4);
    std::memcpy(&h[4], &version, 2);
    std::memcpy(&h[6], &type, 2);
    std::memcpy(&h[24], &length, 8);
    send_garbage(h, false);
  }
  // More garbage while the ranks arrive and gather, until they are done
  // (after which the root has exited and nothing listens).
  std::atomic<int> garbage_sent{0};
  std::atomic<bool> ranks_done{false};
  std::thread more_garbage([&] {
    for (int i = 0; i < 200 && !ranks_done.load(); ++i) {
      auto s = Socket::Connect(id.root, DeadlineAfterMs(200));
      if (!s.ok()) break;
      (void)s->SendAll(random_bytes.data() + i, 40 + i % 64, DeadlineAfterMs(200));
      ++garbage_sent;
      std::this_thread::sleep_for(milliseconds(1));
    }
  });
  auto statuses = RunRanks(4, [&](int rank) -> Status {
    while (garbage_sent.load() < 3 * (rank + 1)) std::this_thread::sleep_for(milliseconds(1));
    auto b = Bootstrap::Connect(id, rank, 4, 20000);
    if (!b.ok()) return b.status();
    return GatherRounds(**b, 6);
  });
  ranks_done = true;
  more_garbage.join();
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].ToString();
}

// A fake root answers a real rank's all-gather with random or truncated
// replies (bad headers, absurd lengths, error messages of junk, results of
// the wrong size): the rank returns an error naming the root, never crashes,
// never waits past its deadline.
TEST(BootstrapTest, RandomRepliesFromAFakeRootAreErrors) {
  std::mt19937_64 rng(5);
  for (int round = 0; round < 60; ++round) {
    auto any = ParseAddress("127.0.0.1:0");
    ASSERT_TRUE(any.ok());
    UniqueId id;
    id.nonce = rng() | 1;
    auto listener = Socket::Listen(*any, &id.root);
    ASSERT_TRUE(listener.ok()) << listener.status().ToString();
    const uint64_t seed = rng();
    std::thread fake([&, seed] {
      std::mt19937_64 r(seed);
      auto c = listener->Accept(DeadlineAfterMs(5000));
      if (!c.ok()) return;
      char in[32 + 64];
      (void)c->RecvAll(in, 32, DeadlineAfterMs(2000));       // hello
      (void)c->RecvAll(in, 32 + 16, DeadlineAfterMs(2000));  // gather header and 16 bytes
      std::string reply(32 + r() % 64, '\0');
      for (char& ch : reply) ch = static_cast<char>(r());
      if (r() % 2 == 0) {  // a header that passes the magic and version checks
        const uint32_t magic = 0x42474e52;
        const uint16_t version = 1;
        const uint16_t type = static_cast<uint16_t>(1 + r() % 5);
        const uint64_t length = r() % 3 == 0 ? r() : r() % 128;
        std::memcpy(&reply[0], &magic, 4);
        std::memcpy(&reply[4], &version, 2);
        std::memcpy(&reply[6], &type, 2);
        if (r() % 2 == 0) std::memcpy(&reply[16], &id.nonce, 8);
        std::memcpy(&reply[24], &length, 8);
      }
      (void)c->SendAll(reply.data(), reply.size(), DeadlineAfterMs(2000));
      // and hangs up: the rank must not wait for bytes that never come
    });
    const auto start = steady_clock::now();
    auto b = Bootstrap::Connect(id, 0, 2, 1000);
    Status st = b.status();
    if (b.ok()) {
      char mine[16] = {};
      char all[32];
      st = (*b)->AllGather(mine, sizeof(mine), all);
    }
    fake.join();
    EXPECT_FALSE(st.ok()) << "round " << round;
    EXPECT_NE(st.message().find("root"), std::string::npos) << "round " << round << ": " << st.ToString();
    EXPECT_LT(MsSince(start), 4000) << "round " << round;
  }
}

// --------------------------------------------------------- no root there ----

// A port nobody listens on: bind one, note it, close it.
SocketAddress ClosedPort() {
  auto any = ParseAddress("127.0.0.1:0");
  EXPECT_TRUE(any.ok());
  SocketAddress bound;
  auto l = Socket::Listen(*any, &bound);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return bound;  // closed when l goes
}

TEST(BootstrapTest, ConnectingToAClosedPortTimesOutWithinTheDeadline) {
  const SocketAddress addr = ClosedPort();
  for (int64_t ms : {100, 700}) {
    const auto start = steady_clock::now();
    auto s = Socket::Connect(addr, DeadlineAfterMs(ms));
    const int64_t elapsed = MsSince(start);
    ASSERT_FALSE(s.ok());
    EXPECT_TRUE(s.status().code() == Code::kTimeout || s.status().code() == Code::kSystemError)
        << s.status().ToString();
    EXPECT_NE(s.status().message().find(addr.ToString()), std::string::npos) << s.status().ToString();
    // The loop never sleeps past its deadline; the slack is a loaded machine's scheduling.
    EXPECT_LE(elapsed, ms + 1000) << "overran the deadline";
    EXPECT_GE(elapsed, ms / 2) << "gave up long before the deadline (the root may come up late)";
  }
}

TEST(BootstrapTest, BootstrapToAClosedPortFailsWithinTheTimeout) {
  UniqueId id;
  id.nonce = 5;
  id.root = ClosedPort();
  const auto start = steady_clock::now();
  auto b = Bootstrap::Connect(id, 3, 4, 500);
  const int64_t elapsed = MsSince(start);
  ASSERT_FALSE(b.ok());
  EXPECT_TRUE(b.status().code() == Code::kTimeout || b.status().code() == Code::kSystemError)
      << b.status().ToString();
  EXPECT_NE(b.status().message().find("rank 3"), std::string::npos) << b.status().ToString();
  EXPECT_LE(elapsed, 500 + 1000);
}

// The root comes up after the rank starts connecting (RINGO_COMM_ID flow).
TEST(BootstrapTest, RootStartedByRank0AfterOthersConnect) {
  const SocketAddress free_port = ClosedPort();
  auto id = CreateUniqueId(free_port.ToString(), "", 20000);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  auto statuses = RunRanks(3, [&](int rank) -> Status {
    if (rank == 0) {
      std::this_thread::sleep_for(milliseconds(200));  // the others are already retrying
      Status st = StartRootForRank0(*id, 20000);
      if (!st.ok()) return st;
    }
    auto b = Bootstrap::Connect(*id, rank, 3, 20000);
    if (!b.ok()) return b.status();
    return GatherRounds(**b, 3);
  });
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].ToString();
}

// ---------------------------------------------------------------- socket ----

TEST(SocketTest, ParseAddress) {
  auto v4 = ParseAddress("127.0.0.1:80");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->ToString(), "127.0.0.1:80");
  EXPECT_EQ(v4->port(), 80);
  auto v6 = ParseAddress("[::1]:65535");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->ToString(), "[::1]:65535");
  auto local = ParseAddress("localhost:1");
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  EXPECT_EQ(local->port(), 1);
  for (const char* bad : {"", "127.0.0.1", ":80", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1",
                          "127.0.0.1:8x", "[::1]80", "[::1"}) {
    auto a = ParseAddress(bad);
    EXPECT_FALSE(a.ok()) << "'" << bad << "' parsed as " << (a.ok() ? a->ToString() : "");
    if (!a.ok()) {
      EXPECT_EQ(a.status().code(), Code::kInvalidArgument) << bad;
    }
  }
}

TEST(SocketTest, ChooseListenAddress) {
  auto lo = ChooseListenAddress("lo");
  ASSERT_TRUE(lo.ok()) << lo.status().ToString();
  EXPECT_EQ(lo->port(), 0);
  auto exact = ChooseListenAddress("=lo");
  ASSERT_TRUE(exact.ok()) << exact.status().ToString();
  EXPECT_FALSE(ChooseListenAddress("=l").ok()) << "= means an exact name";
  EXPECT_TRUE(ChooseListenAddress("").ok()) << "some interface, or loopback";
}

TEST(SocketTest, SendRecvWithDeadlines) {
  auto any = ParseAddress("127.0.0.1:0");
  ASSERT_TRUE(any.ok());
  SocketAddress bound;
  auto listener = Socket::Listen(*any, &bound);
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  auto client = Socket::Connect(bound, DeadlineAfterMs(2000));
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto server = listener->Accept(DeadlineAfterMs(2000));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  // Nothing to receive: a Timeout at the deadline.
  char buf[16];
  auto start = steady_clock::now();
  Status st = server->RecvAll(buf, sizeof(buf), DeadlineAfterMs(200));
  EXPECT_EQ(st.code(), Code::kTimeout) << st.ToString();
  EXPECT_GE(MsSince(start), 190);
  EXPECT_LT(MsSince(start), 1200);
  auto some = server->RecvSome(buf, sizeof(buf));
  ASSERT_TRUE(some.ok());
  EXPECT_EQ(*some, 0u);
  // Data passes; a closed peer is a RemoteError.
  ASSERT_TRUE(client->SendAll("hello", 5, DeadlineAfterMs(1000)).ok());
  ASSERT_TRUE(server->RecvAll(buf, 5, DeadlineAfterMs(1000)).ok());
  EXPECT_EQ(std::string(buf, 5), "hello");
  client->Close();
  EXPECT_EQ(server->RecvAll(buf, 1, DeadlineAfterMs(1000)).code(), Code::kRemoteError);
  // Accept with nobody connecting times out.
  auto none = listener->Accept(DeadlineAfterMs(100));
  EXPECT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Code::kTimeout);
}

}  // namespace
}  // namespace ringo::transport
