// The board: every rank reads every other rank's post for each operation,
// buffers are reused only once every rank is done with them, and every wait
// ends. Run with plain waits and with crowded waits (board.h), with ranks as
// threads pinned to one core (where a crowded waiter must give the core
// away to let anyone move) and spread over the cores; across processes over
// shared memory; and with a peer that aborts while the others wait.
#include "transport/shm/board.h"

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "transport/shm/segment.h"

namespace ringo::transport {
namespace {

constexpr size_t kBufferBytes = 256;

WaitContext Ctx(int rank, bool crowded, const std::atomic<bool>* abort = nullptr) {
  WaitContext c;
  c.local_abort = abort;
  c.timeout_ms = 20000;
  c.spin_count = crowded ? 0 : 1000;
  c.yield_count = 50000;
  c.self_rank = rank;
  c.crowded = crowded;
  return c;
}

uint64_t Value(int rank, uint64_t seq, size_t k) { return seq * 1000003u + rank * 7919u + k; }

// Every rank's board over shared pages in this process.
struct Boards {
  explicit Boards(int nranks) : pages(HostPages::InProcess(nranks, BoardBytes(kBufferBytes))) {
    for (int r = 0; r < nranks; ++r) boards.push_back(std::make_unique<Board>(pages[r], kBufferBytes));
  }
  Board& operator[](int r) { return *boards[r]; }
  // Rank r stops: its pages say why, and the waits on its board wake.
  void Abort(int r, const base::Status& why, uint64_t seq) {
    pages[r]->Abort(why, seq);
    for (auto& b : boards) b->WakeAll();
  }
  std::vector<std::shared_ptr<HostPages>> pages;
  std::vector<std::unique_ptr<Board>> boards;
};

// Segments in POSIX shared memory, each formatted for its rank (`process`
// of rank r: the pid the board believes it has), for tests that fork.
std::vector<std::shared_ptr<FifoMemory>> SharedSegments(int nranks, const std::vector<ProcessId>& process) {
  const size_t board_bytes = BoardBytes(kBufferBytes);
  std::vector<std::shared_ptr<FifoMemory>> segments;
  for (int r = 0; r < nranks; ++r) {
    const std::string name = "/ringo-board-test-" + std::to_string(getpid()) + "-" + std::to_string(r);
    auto mem = CreateShm(name, HostPages::SegmentBytes(board_bytes));
    EXPECT_TRUE(mem.ok()) << mem.status().ToString();
    if (!mem.ok()) return {};
    UnlinkShm(name);  // the mappings stay, and forked ranks inherit them
    HostPages::FormatSegment((*mem)->base(), board_bytes, r, process[r]);
    segments.push_back(*mem);
  }
  return segments;
}

// One rank's part of `ops` exchanges: post, read everyone's, check, done.
// Returns the first mismatch as text (empty if none).
std::string RunRank(Board& board, int rank, uint64_t ops, bool crowded, int pin_cpu) {
  if (pin_cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(pin_cpu, &set);
    sched_setaffinity(0, sizeof(set), &set);  // this thread only
  }
  const WaitContext ctx = Ctx(rank, crowded);
  const size_t words = kBufferBytes / sizeof(uint64_t);
  for (uint64_t seq = 1; seq <= ops; ++seq) {
    auto out = board.AcquireWrite(seq, ctx);
    if (!out.ok()) return out.status().ToString();
    auto* w = static_cast<uint64_t*>(*out);
    for (size_t k = 0; k < words; ++k) w[k] = Value(rank, seq, k);
    board.Post(seq);
    // Alternate the two ways of reading: every rank at once, and one by one.
    if (seq % 2 == 0) {
      base::Status st = board.WaitAllPosted(seq, ctx);
      if (!st.ok()) return st.ToString();
    }
    for (int q = 0; q < board.nranks(); ++q) {
      const void* in = board.Posted(q, seq);
      if (seq % 2 == 1) {
        auto p = board.WaitPosted(q, seq, ctx);
        if (!p.ok()) return p.status().ToString();
        in = *p;
      }
      const auto* r = static_cast<const uint64_t*>(in);
      for (size_t k = 0; k < words; ++k) {
        if (r[k] != Value(q, seq, k)) {
          return "rank " + std::to_string(rank) + " op " + std::to_string(seq) + ": rank " + std::to_string(q) +
                 "'s word " + std::to_string(k) + " is " + std::to_string(r[k]);
        }
      }
    }
    board.Done(seq);
  }
  return "";
}

void RunThreads(int nranks, uint64_t ops, bool crowded, bool one_core) {
  Boards boards(nranks);
  std::vector<std::string> errors(nranks);
  std::vector<std::thread> threads;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < nranks; ++r) {
    const int cpu = one_core ? 0 : -1;
    threads.emplace_back([&, r, cpu] { errors[r] = RunRank(boards[r], r, ops, crowded, cpu); });
  }
  for (auto& t : threads) t.join();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  for (int r = 0; r < nranks; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  ::testing::Test::RecordProperty("ms", std::to_string(ms));
}

// LL posts: every size from 0 to 64 bytes (whole and partial 4-byte words),
// read while the writer is still writing, across buffer reuse; plain and
// crowded readers (the crowded ones find the words after the counter wait).
std::string RunRankLL(Board& board, int rank, uint64_t ops, bool crowded) {
  const WaitContext ctx = Ctx(rank, crowded);
  unsigned char data[64 + 4];
  alignas(4) unsigned char got[64 + 4];
  for (uint64_t seq = 1; seq <= ops; ++seq) {
    const size_t bytes = static_cast<size_t>(seq % 65);
    auto out = board.AcquireWrite(seq, ctx);
    if (!out.ok()) return out.status().ToString();
    for (size_t k = 0; k < bytes; ++k) data[k] = static_cast<unsigned char>(Value(rank, seq, k));
    board.PostLL(seq, CallSignature(), data, bytes);
    for (int q = 0; q < board.nranks(); ++q) {
      std::memset(got, 0xee, sizeof(got));
      auto st = board.ReadLL(q, seq, CallSignature(), got, bytes, ctx);
      if (!st.ok()) return st.status().ToString();
      if (!*st) return "an unchecked read reported a mismatch";
      for (size_t k = 0; k < bytes; ++k) {
        if (got[k] != static_cast<unsigned char>(Value(q, seq, k))) {
          return "rank " + std::to_string(rank) + " op " + std::to_string(seq) + ": rank " + std::to_string(q) +
                 "'s byte " + std::to_string(k) + " of " + std::to_string(bytes);
        }
      }
    }
    board.Done(seq);
  }
  return "";
}

void RunThreadsLL(int nranks, uint64_t ops, bool crowded) {
  Boards boards(nranks);
  std::vector<std::string> errors(nranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] { errors[r] = RunRankLL(boards[r], r, ops, crowded); });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < nranks; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(BoardTest, LLPostsPlainWaits) { RunThreadsLL(2, 5000, false); }
TEST(BoardTest, LLPostsCrowdedWaits) { RunThreadsLL(4, 3000, true); }

// A reader past its polls sleeps on the counter and still gets the words; a
// peer that aborted after posting is reported even though its words are there.
TEST(BoardTest, LLReadSleepsThenReadsAndHearsAborts) {
  Boards boards(2);
  WaitContext ctx = Ctx(0, false);
  ctx.spin_count = 10;
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    const uint32_t v = 0xabcd1234u;
    ASSERT_TRUE(boards[1].AcquireWrite(1, Ctx(1, false)).ok());
    boards[1].PostLL(1, CallSignature(), &v, sizeof(v));
  });
  uint32_t got = 0;
  ASSERT_TRUE(boards[0].ReadLL(1, 1, CallSignature(), &got, sizeof(got), ctx).ok());
  writer.join();
  EXPECT_EQ(got, 0xabcd1234u);
  boards.Abort(1, base::RemoteError("rank 1 gave up"), 1);
  auto st = boards[0].ReadLL(1, 1, CallSignature(), &got, sizeof(got), ctx);
  EXPECT_EQ(st.status().code(), base::Code::kRemoteError) << st.status().ToString();
  // The survivor names the rank that gave up, with its message.
  EXPECT_EQ(st.status().origin(), 1);
  EXPECT_NE(st.status().message().find("rank 1 gave up"), std::string::npos) << st.status().ToString();
}

TEST(BoardTest, ThreadsPlainWaits) { RunThreads(4, 3000, false, false); }

TEST(BoardTest, ThreadsCrowdedWaits) { RunThreads(4, 3000, true, false); }

// Every rank on core 0: nobody moves unless a waiter gives the core away.
TEST(BoardTest, ThreadsCrowdedOnOneCore) { RunThreads(3, 2000, true, true); }

TEST(BoardTest, ThreadsCrowdedManyRanks) { RunThreads(7, 500, true, false); }

// A crowded waiter that was told the wrong core for a neighbour still gets
// there: it polls at most kCrowdedPollUs before yielding anyway.
TEST(BoardTest, CrowdedWaitSurvivesStaleCores) {
  const int nranks = 3;
  Boards boards(nranks);
  std::atomic<bool> stop{false};
  std::vector<std::string> errors(nranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] { errors[r] = RunRank(boards[r], r, 1000, true, 0); });
  }
  // Keep claiming that every rank runs on a core that does not exist.
  std::thread liar([&] {
    while (!stop.load()) {
      for (int r = 0; r < nranks; ++r) boards.pages[0]->control(r)->cpu.store(1 << 20, std::memory_order_relaxed);
      std::this_thread::yield();
    }
  });
  for (auto& t : threads) t.join();
  stop.store(true);
  liar.join();
  for (int r = 0; r < nranks; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(BoardTest, CrowdedWaitEndsWhenAPeerAborts) {
  Boards boards(2);
  const WaitContext ctx = Ctx(0, true);
  ASSERT_TRUE(boards[0].AcquireWrite(1, ctx).ok());
  boards[0].Post(1);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    boards.Abort(1, base::RemoteError("rank 1 aborted"), 1);
  });
  const auto start = std::chrono::steady_clock::now();
  base::Status st = boards[0].WaitAllPosted(1, ctx);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  aborter.join();
  EXPECT_EQ(st.code(), base::Code::kRemoteError) << st.ToString();
  EXPECT_NE(st.ToString().find("aborted"), std::string::npos) << st.ToString();
  EXPECT_LT(ms, 5000);
}

TEST(BoardTest, CrowdedWaitEndsOnLocalAbort) {
  Boards boards(2);
  std::atomic<bool> abort{false};
  const WaitContext ctx = Ctx(0, true, &abort);
  ASSERT_TRUE(boards[0].AcquireWrite(1, ctx).ok());
  boards[0].Post(1);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    abort.store(true);
  });
  base::Status st = boards[0].WaitPosted(1, 1, ctx).status();
  aborter.join();
  EXPECT_EQ(st.code(), base::Code::kInvalidUsage) << st.ToString();
}

// A peer process that dies without a word: the crowded wait notices that it
// exited, long before the deadline.
TEST(BoardTest, CrowdedWaitEndsWhenAPeerProcessExits) {
  const pid_t child = fork();
  if (child == 0) {
    usleep(20000);
    _exit(0);  // never posts
  }
  ASSERT_GT(child, 0);
  auto segments = SharedSegments(2, {SelfProcessId(), ProcessId{child, 0}});
  ASSERT_EQ(segments.size(), 2u);
  Board board(HostPages::Over(0, BoardBytes(kBufferBytes), segments), kBufferBytes);
  const WaitContext ctx = Ctx(0, true);
  ASSERT_TRUE(board.AcquireWrite(1, ctx).ok());
  board.Post(1);
  const auto start = std::chrono::steady_clock::now();
  std::thread reaper([child] { waitpid(child, nullptr, 0); });
  base::Status st = board.WaitAllPosted(1, ctx);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  reaper.join();
  EXPECT_EQ(st.code(), base::Code::kRemoteError) << st.ToString();
  EXPECT_NE(st.ToString().find("exited"), std::string::npos) << st.ToString();
  EXPECT_LT(ms, 5000) << "the wait's deadline is " << ctx.timeout_ms << " ms";
}

// Processes over POSIX shared memory, crowded: forked ranks, each checks
// every post and exits non-zero on a mismatch.
TEST(BoardTest, ProcessesCrowdedWaits) {
  const int nranks = 4;
  auto segments = SharedSegments(nranks, std::vector<ProcessId>(nranks, SelfProcessId()));
  ASSERT_EQ(segments.size(), static_cast<size_t>(nranks));
  // Every rank's board formatted before any forked rank posts.
  std::vector<std::unique_ptr<Board>> formatted;
  for (int r = 0; r < nranks; ++r) {
    formatted.push_back(
        std::make_unique<Board>(HostPages::Over(r, BoardBytes(kBufferBytes), segments), kBufferBytes));
  }
  std::vector<pid_t> pids;
  for (int r = 0; r < nranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      Board& board = *formatted[r];
      const std::string err = RunRank(board, r, 3000, true, r % 2 == 0 ? 0 : -1);
      if (!err.empty()) std::fprintf(stderr, "%s\n", err.c_str());
      _exit(err.empty() ? 0 : 1);
    }
    ASSERT_GT(pid, 0);
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
}

}  // namespace
}  // namespace ringo::transport
