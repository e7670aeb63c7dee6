// ringoSendTagged / ringoRecvTagged: tag matching, receives from any source
// (the sender reported), messages taken out of order and held meanwhile,
// sizes that disagree (refused, the message kept), ranks sending each other
// more than a FIFO holds at once, the tagged stream beside ringoSend's, and a
// random traffic check; 2 to 4 ranks as threads, as processes, and as
// processes on distinct host ids (every pair over TCP through the proxy).
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "ringo/ringo.h"
#include "tests/api_test_util.h"
#include "tests/harness.h"

namespace ringo::tests {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kDeadline{120000};

// The byte at `i` of message `index` of `sender` with `tag`.
uint8_t Byte(int sender, int tag, int index, size_t i) {
  return static_cast<uint8_t>(sender * 31 + tag * 7 + index * 13 + i * 3 + (i >> 9));
}

std::vector<uint8_t> Payload(int sender, int tag, int index, size_t bytes) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = Byte(sender, tag, index, i);
  return v;
}

std::string Err(const char* what, ringoResult_t rc, ringoComm_t comm) {
  return std::string(what) + ": " + ResultName(rc) + " " + ringoGetLastError(comm);
}

// Makes this rank's tagged communicator (`tagged` 0: without the pairs).
ringoResult_t Init(ringoComm_t* comm, int rank, int nranks, const ringoUniqueId& id, int tagged = 1) {
  ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
  config.device_kind = RINGO_DEVICE_HOST;
  config.tagged_p2p = tagged;
  return ringoCommInitRankConfig(comm, nranks, id, rank, &config);
}

// Receives `bytes` with `tag` from `peer` and checks the bytes came from
// the sender reported, as its message `index` (a callback gives the index
// once the sender is known).
template <typename IndexOf>
std::string RecvCheck(ringoComm_t comm, int peer, int tag, size_t bytes, IndexOf index_of, int* from = nullptr) {
  std::vector<uint8_t> buf(bytes + 1, 0xee);
  int source = -2;
  ringoResult_t rc = ringoRecvTagged(buf.data(), bytes, ringoUint8, peer, tag, &source, comm, nullptr);
  if (rc != ringoSuccess) return Err("ringoRecvTagged", rc, comm);
  if (peer != RINGO_ANY_SOURCE && source != peer) return "source " + std::to_string(source) + ", asked " + std::to_string(peer);
  if (buf[bytes] != 0xee) return "wrote past the buffer";
  const int index = index_of(source);
  if (index < 0) return "an unexpected message from rank " + std::to_string(source) + " tag " + std::to_string(tag);
  for (size_t i = 0; i < bytes; ++i) {
    if (buf[i] != Byte(source, tag, index, i)) {
      return "tag " + std::to_string(tag) + " from rank " + std::to_string(source) + " message " +
             std::to_string(index) + ": byte " + std::to_string(i) + " wrong";
    }
  }
  if (from != nullptr) *from = source;
  return "";
}

std::string Send(ringoComm_t comm, int self, int peer, int tag, int index, size_t bytes) {
  std::vector<uint8_t> v = Payload(self, tag, index, bytes);
  ringoResult_t rc = ringoSendTagged(v.data(), bytes, ringoUint8, peer, tag, comm, nullptr);
  return rc == ringoSuccess ? "" : Err("ringoSendTagged", rc, comm);
}

#define CHECK_OK(expr)                    \
  do {                                    \
    std::string problem_ = (expr);        \
    if (!problem_.empty()) return problem_; \
  } while (0)

// The cases, each run by every rank on one communicator.

// Rank 0 takes one message from each other rank, from any source.
std::string AnySource(ringoComm_t comm, int rank, int n) {
  const size_t bytes = 1000;
  if (rank != 0) return Send(comm, rank, 0, 9, 0, bytes);
  std::vector<int> seen(n, 0);
  for (int k = 1; k < n; ++k) {
    int from = -1;
    CHECK_OK(RecvCheck(comm, RINGO_ANY_SOURCE, 9, bytes, [](int) { return 0; }, &from));
    if (from <= 0 || from >= n || seen[from]++ != 0) return "any-source receive from rank " + std::to_string(from);
  }
  return "";
}

// Rank 1 sends tags 1, 2, 3 (3 larger than a FIFO); rank 0 takes 3, 2, 1:
// the first two are held while it looks for tag 3.
std::string OutOfOrder(ringoComm_t comm, int rank, int) {
  const size_t sizes[4] = {0, 17, 0, 3 << 20};
  if (rank == 1) {
    for (int tag = 1; tag <= 3; ++tag) CHECK_OK(Send(comm, 1, 0, tag, 0, sizes[tag]));
  } else if (rank == 0) {
    for (int tag = 3; tag >= 1; --tag) {
      CHECK_OK(RecvCheck(comm, 1, tag, sizes[tag], [](int s) { return s == 1 ? 0 : -1; }));
    }
  }
  return "";
}

// Every rank sends every other rank 3 MiB (six times its FIFO) before it
// receives anything: the sends take in each other's messages meanwhile.
std::string Crossing(ringoComm_t comm, int rank, int n) {
  const size_t bytes = 3 << 20;
  for (int p = 0; p < n; ++p) {
    if (p != rank) CHECK_OK(Send(comm, rank, p, 4, 0, bytes));
  }
  for (int p = 0; p < n; ++p) {
    if (p != rank) CHECK_OK(RecvCheck(comm, p, 4, bytes, [p](int s) { return s == p ? 0 : -1; }));
  }
  return "";
}

// Messages of one sender and tag in order; receives by sender and from any
// source on one tag; a send to oneself.
std::string Ordering(ringoComm_t comm, int rank, int n) {
  const int sends = 6;
  const size_t bytes = 200;
  for (int p = 0; p < n; ++p) {
    if (p == rank) continue;
    for (int k = 0; k < sends; ++k) CHECK_OK(Send(comm, rank, p, 11, k, bytes));
  }
  CHECK_OK(Send(comm, rank, rank, 12, 0, 64));
  std::vector<int> next(n, 0);  // each sender's next message: any other is out of order
  auto in_order = [&](int s) { return s >= 0 && s < n && s != rank && next[s] < sends ? next[s]++ : -1; };
  // Half of one sender's by name (the others' are held meanwhile), then all
  // the rest from any source.
  const int first = (rank + 1) % n;
  for (int k = 0; k < sends / 2; ++k) CHECK_OK(RecvCheck(comm, first, 11, bytes, in_order));
  for (int k = sends / 2; k < sends * (n - 1); ++k) CHECK_OK(RecvCheck(comm, RINGO_ANY_SOURCE, 11, bytes, in_order));
  int from = -1;
  CHECK_OK(RecvCheck(comm, RINGO_ANY_SOURCE, 12, 64, [rank](int s) { return s == rank ? 0 : -1; }, &from));
  return "";
}

// A receive of another size is refused, the message kept for the next.
std::string SizeMismatch(ringoComm_t comm, int rank, int) {
  if (rank == 1) return Send(comm, 1, 0, 21, 0, 4096);
  if (rank != 0) return "";
  std::vector<uint8_t> small(100);
  ringoResult_t rc = ringoRecvTagged(small.data(), small.size(), ringoUint8, RINGO_ANY_SOURCE, 21, nullptr, comm, nullptr);
  std::string problem = CheckFails("a receive of another size", rc, ringoInvalidUsage, {"size", "4096"});
  if (!problem.empty()) return problem;
  return RecvCheck(comm, 1, 21, 4096, [](int s) { return s == 1 ? 0 : -1; });
}

// The tagged stream and ringoSend's do not meet.
std::string BesideOrdered(ringoComm_t comm, int rank, int) {
  if (rank > 1) return "";
  const int peer = 1 - rank;
  std::vector<uint8_t> out(256, static_cast<uint8_t>(rank + 1)), in(256, 0);
  if (rank == 0) CHECK_OK(Send(comm, 0, 1, 3, 0, 512));
  if (ringoGroupStart() != ringoSuccess) return "ringoGroupStart";
  ringoSend(out.data(), out.size(), ringoUint8, peer, comm, nullptr);
  ringoRecv(in.data(), in.size(), ringoUint8, peer, comm, nullptr);
  ringoResult_t rc = ringoGroupEnd();
  if (rc != ringoSuccess) return Err("ordered exchange", rc, comm);
  if (in[0] != static_cast<uint8_t>(peer + 1) || in[255] != static_cast<uint8_t>(peer + 1)) return "ordered bytes wrong";
  if (rank == 1) CHECK_OK(RecvCheck(comm, 0, 3, 512, [](int s) { return s == 0 ? 0 : -1; }));
  return "";
}

// Random traffic: every rank sends every other rank messages of random tags
// (a tag's size is fixed), in random order; receivers take even tags from
// any source and odd tags by sender, in an order of their own.
std::string Random(ringoComm_t comm, int rank, int n) {
  const size_t kSizes[] = {0, 1, 100, 7000, 70000, 300000};
  auto size_of = [&](int tag) { return kSizes[tag % 6]; };
  // Every rank draws the whole plan from one seed: plan[s][r] are the tags
  // s sends r, in order.
  std::mt19937 rng(4242);
  std::vector<std::vector<std::vector<int>>> plan(n, std::vector<std::vector<int>>(n));
  for (int s = 0; s < n; ++s) {
    for (int r = 0; r < n; ++r) {
      if (s == r) continue;
      const int count = static_cast<int>(rng() % 12);
      for (int k = 0; k < count; ++k) plan[s][r].push_back(static_cast<int>(rng() % 10));
    }
  }
  // Sends, interleaved over the receivers in a rank-specific order.
  std::mt19937 mine(100 + rank);
  std::vector<std::pair<int, int>> sends;  // (receiver, k)
  for (int r = 0; r < n; ++r) {
    for (size_t k = 0; k < plan[rank][r].size(); ++k) sends.push_back({r, static_cast<int>(k)});
  }
  std::shuffle(sends.begin(), sends.end(), mine);
  // Keep each receiver's order: stable by (receiver, k).
  std::vector<size_t> next_k(n, 0);
  std::vector<std::vector<int>> index(n, std::vector<int>(10, 0));  // per receiver, tag: messages so far
  for (auto& [r, k] : sends) {
    k = static_cast<int>(next_k[r]++);
    const int tag = plan[rank][r][k];
    CHECK_OK(Send(comm, rank, r, tag, index[r][tag]++, size_of(tag)));
  }
  // What this rank receives: per tag, the count from each sender.
  std::vector<std::vector<int>> expect(10, std::vector<int>(n, 0));
  for (int s = 0; s < n; ++s) {
    for (int tag : plan[s][rank]) ++expect[tag][s];
  }
  std::vector<std::vector<int>> got(10, std::vector<int>(n, 0));
  std::vector<std::pair<int, int>> recvs;  // (tag, sender or -1)
  for (int tag = 0; tag < 10; ++tag) {
    for (int s = 0; s < n; ++s) {
      for (int k = 0; k < expect[tag][s]; ++k) recvs.push_back({tag, tag % 2 == 0 ? RINGO_ANY_SOURCE : s});
    }
  }
  std::shuffle(recvs.begin(), recvs.end(), mine);
  for (const auto& [tag, peer] : recvs) {
    CHECK_OK(RecvCheck(comm, peer, tag, size_of(tag), [&](int s) {
      if (s < 0 || s >= n || got[tag][s] >= expect[tag][s]) return -1;
      return got[tag][s]++;
    }));
  }
  return "";
}

using Case = std::string (*)(ringoComm_t, int, int);

// Runs every case on one tagged communicator per rank, then checks nothing
// is left unread: a barrier, then a 1-byte all-reduce.
std::string RunCases(int rank, int nranks, const ringoUniqueId& id) {
  ringoComm_t comm = nullptr;
  ringoResult_t rc = Init(&comm, rank, nranks, id);
  if (rc != ringoSuccess) return Err("init", rc, nullptr);
  const std::pair<const char*, Case> cases[] = {
      {"any source", AnySource}, {"out of order", OutOfOrder}, {"crossing", Crossing}, {"ordering", Ordering},
      {"size mismatch", SizeMismatch}, {"beside ringoSend", BesideOrdered}, {"random", Random}};
  for (const auto& [name, fn] : cases) {
    std::string problem = fn(comm, rank, nranks);
    if (!problem.empty()) {
      ringoCommAbort(comm);
      return std::string(name) + ": " + problem;
    }
    int8_t x = 1, y = 0;
    rc = ringoAllReduce(&x, &y, 1, ringoInt8, ringoSum, comm, nullptr);  // the next case starts together
    if (rc != ringoSuccess) return std::string(name) + ": " + Err("all-reduce after it", rc, comm);
  }
  rc = ringoCommDestroy(comm);
  return rc == ringoSuccess ? "" : Err("destroy", rc, nullptr);
}

struct Param {
  int nranks;
  RankMode mode;
  bool hosts;  // processes on distinct host ids
};

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  return std::to_string(info.param.nranks) + "ranks_" +
         (info.param.mode == RankMode::kThreads ? "threads" : info.param.hosts ? "hosts" : "processes");
}

class Tagged : public ::testing::TestWithParam<Param> {};

TEST_P(Tagged, EveryCase) {
  const Param p = GetParam();
  auto results = RunRanks(p.nranks, p.mode, kDeadline, [&](int rank, int nranks, const ringoUniqueId& id) {
    if (p.hosts) SetEnvAndReload("RINGO_HOSTID", "tagged-host-" + std::to_string(rank));
    return RunCases(rank, nranks, id);
  });
  EXPECT_ALL_RANKS_OK(results);
}

INSTANTIATE_TEST_SUITE_P(All, Tagged,
                         ::testing::Values(Param{2, RankMode::kThreads, false}, Param{3, RankMode::kThreads, false},
                                           Param{4, RankMode::kThreads, false}, Param{2, RankMode::kProcesses, false},
                                           Param{4, RankMode::kProcesses, false}, Param{3, RankMode::kProcesses, true}),
                         Name);

// Refusals: a communicator made without tagged pairs, a negative tag, any
// source on a send, a tagged call in a group, a stream. The communicator
// stays usable after each.
TEST(TaggedErrors, Refusals) {
  auto results = RunRanks(2, RankMode::kThreads, kDeadline, [](int rank, int nranks, const ringoUniqueId& id) -> std::string {
    ringoComm_t plain = nullptr, tagged = nullptr;
    ringoResult_t rc = Init(&plain, rank, nranks, id, 0);
    if (rc != ringoSuccess) return Err("init", rc, nullptr);
    uint8_t b[8] = {};
    CHECK_OK(CheckFails("without tagged pairs", ringoSendTagged(b, 8, ringoUint8, 1 - rank, 0, plain, nullptr),
                        ringoInvalidUsage, {"tagged_p2p"}));
    int8_t x = 1, y = 0;
    rc = ringoAllReduce(&x, &y, 1, ringoInt8, ringoSum, plain, nullptr);
    if (rc != ringoSuccess || y != 2) return "the plain communicator after the refusal: " + Err("all-reduce", rc, plain);
    // A split of it that asks for tagged pairs has them.
    ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
    config.tagged_p2p = 1;
    rc = ringoCommSplit(plain, 0, rank, &tagged, &config);
    if (rc != ringoSuccess) return Err("split", rc, plain);
    CHECK_OK(CheckFails("a negative tag", ringoSendTagged(b, 8, ringoUint8, 1 - rank, -1, tagged, nullptr),
                        ringoInvalidArgument, {"tag"}));
    CHECK_OK(CheckFails("any source on a send", ringoSendTagged(b, 8, ringoUint8, RINGO_ANY_SOURCE, 0, tagged, nullptr),
                        ringoInvalidArgument, {"peer"}));
    CHECK_OK(CheckFails("a bad peer", ringoRecvTagged(b, 8, ringoUint8, 2, 0, nullptr, tagged, nullptr),
                        ringoInvalidArgument, {"peer"}));
    ringoGroupStart();
    rc = ringoSendTagged(b, 8, ringoUint8, 1 - rank, 0, tagged, nullptr);
    ringoGroupEnd();
    CHECK_OK(CheckFails("in a group", rc, ringoInvalidUsage, {"group"}));
    CHECK_OK(CheckFails("a stream", ringoSendTagged(b, 8, ringoUint8, 1 - rank, 0, tagged, reinterpret_cast<ringoStream_t>(1)),
                        ringoInvalidArgument, {"stream"}));
    // And it works after them.
    CHECK_OK(Send(tagged, rank, 1 - rank, 0, 0, 8));
    CHECK_OK(RecvCheck(tagged, 1 - rank, 0, 8, [rank](int s) { return s == 1 - rank ? 0 : -1; }));
    // A config from a header without tagged_p2p (a smaller size) is read as 0.
    ringoComm_t old = nullptr;
    ringoConfig_t small = RINGO_CONFIG_INITIALIZER;
    small.size = offsetof(ringoConfig_t, tagged_p2p);
    small.tagged_p2p = 1;  // beyond the size: not read
    rc = ringoCommSplit(plain, 0, rank, &old, &small);
    if (rc != ringoSuccess) return Err("split with an older config", rc, plain);
    CHECK_OK(CheckFails("an older config", ringoSendTagged(b, 8, ringoUint8, 1 - rank, 0, old, nullptr),
                        ringoInvalidUsage, {"tagged_p2p"}));
    ringoCommDestroy(old);
    ringoCommDestroy(tagged);
    ringoCommDestroy(plain);
    return "";
  });
  EXPECT_ALL_RANKS_OK(results);
}

// A rank on another host that finished and left (destroyed its
// communicator, its connections closed) is no fault of the ranks that go on
// exchanging tagged messages, from any source too; a receive from oneself
// with nothing queued is refused at once and leaves the communicator usable.
TEST(TaggedErrors, ARankThatLeftIsNoFault) {
  auto results = RunRanks(3, RankMode::kProcesses, kDeadline, [](int rank, int nranks, const ringoUniqueId& id) -> std::string {
    SetEnvAndReload("RINGO_HOSTID", "tagged-left-" + std::to_string(rank));
    ringoComm_t comm = nullptr;
    ringoResult_t rc = Init(&comm, rank, nranks, id);
    if (rc != ringoSuccess) return Err("init", rc, nullptr);
    int8_t x = 1, y = 0;
    rc = ringoAllReduce(&x, &y, 1, ringoInt8, ringoSum, comm, nullptr);
    if (rc != ringoSuccess) return Err("all-reduce", rc, comm);
    if (rank == 2) {
      rc = ringoCommDestroy(comm);
      return rc == ringoSuccess ? "" : Err("destroy", rc, nullptr);
    }
    uint8_t b[4];
    CHECK_OK(CheckFails("a receive from oneself", ringoRecvTagged(b, 4, ringoUint8, rank, 1, nullptr, comm, nullptr),
                        ringoInvalidUsage, {"oneself"}));
    std::this_thread::sleep_for(milliseconds(500));  // rank 2's connections are closed by now
    const int peer = 1 - rank;
    for (int k = 0; k < 5; ++k) {
      CHECK_OK(Send(comm, rank, peer, 8, k, 3000));
      CHECK_OK(RecvCheck(comm, RINGO_ANY_SOURCE, 8, 3000, [peer, k](int s) { return s == peer ? k : -1; }));
    }
    rc = ringoCommDestroy(comm);
    return rc == ringoSuccess ? "" : Err("destroy", rc, nullptr);
  });
  EXPECT_ALL_RANKS_OK(results);
}

// A receive from a rank that never sends times out naming it; from any
// source it times out too (RINGO_TIMEOUT_MS is 3 s in this test); the
// communicator then fails.
TEST(TaggedErrors, Timeouts) {
  auto results = RunRanks(2, RankMode::kProcesses, kDeadline, [](int rank, int nranks, const ringoUniqueId& id) -> std::string {
    SetEnvAndReload("RINGO_TIMEOUT_MS", "3000");
    ringoComm_t comm = nullptr;
    ringoResult_t rc = Init(&comm, rank, nranks, id);
    if (rc != ringoSuccess) return Err("init", rc, nullptr);
    if (rank == 0) {
      uint8_t b[8];
      rc = ringoRecvTagged(b, 8, ringoUint8, RINGO_ANY_SOURCE, 5, nullptr, comm, nullptr);
      CHECK_OK(CheckFails("any source, nobody sends", rc, ringoTimeout, {"any rank"}));
    } else {
      uint8_t b[8];
      rc = ringoRecvTagged(b, 8, ringoUint8, 0, 5, nullptr, comm, nullptr);
      CHECK_OK(CheckFails("rank 0 never sends", rc, ringoTimeout, {"rank 0"}));
    }
    ringoCommDestroy(comm);
    return "";
  });
  EXPECT_ALL_RANKS_OK(results);
}

// A sender killed mid-way: the receive of its message fails naming it,
// well before the timeout.
TEST(TaggedErrors, KilledSender) {
  HarnessOptions options;
  auto results = RunRanks(
      2, RankMode::kProcesses, kDeadline,
      [](int rank, int nranks, const ringoUniqueId& id) -> std::string {
        SetEnvAndReload("RINGO_TIMEOUT_MS", "60000");
        ringoComm_t comm = nullptr;
        ringoResult_t rc = Init(&comm, rank, nranks, id);
        if (rc != ringoSuccess) return Err("init", rc, nullptr);
        if (rank == 1) {
          SignalSelfAfter(milliseconds(300), SIGKILL);
          std::vector<uint8_t> big(64 << 20, 1);
          ringoSendTagged(big.data(), big.size(), ringoUint8, 0, 1, comm, nullptr);  // rank 0 never takes it all
          for (;;) pause();
        }
        const auto start = std::chrono::steady_clock::now();
        std::vector<uint8_t> b(8);
        rc = ringoRecvTagged(b.data(), b.size(), ringoUint8, 1, 2, nullptr, comm, nullptr);  // tag 2 never comes
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (rc == ringoSuccess || rc == ringoTimeout) return "the sender killed: " + Err("ringoRecvTagged", rc, comm);
        if (!MentionsAny(ringoGetLastError(comm), {"rank 1"})) return std::string("not named: ") + ringoGetLastError(comm);
        if (s > 30) return "noticed after " + std::to_string(s) + " s";
        ringoCommAbort(comm);
        return "";
      },
      options);
  EXPECT_TRUE(RanksMatch(results, {{1, RankExpectation::KilledBy(SIGKILL)}}));
}

}  // namespace
}  // namespace ringo::tests
