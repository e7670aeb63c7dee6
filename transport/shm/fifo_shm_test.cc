// The connector FIFO across processes, over POSIX shared memory: names and
// opening rules, many slots between a parent and a forked child, and a peer
// process that exits (a RemoteError naming it, long before the deadline).
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "transport/fifo/fifo.h"
#include "transport/fifo/fifo_testing.h"
#include "transport/shm/segment.h"

namespace ringo::transport {
namespace {

using base::Code;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using testing::Ctx;
using testing::Fill;
using testing::MessageBytes;
using testing::MsSince;
using testing::Verify;

std::string UniqueShmName(int channel) {
  std::random_device rd;
  const uint64_t tag = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
  return ShmFifoName(tag, 1, channel);
}

// Reaps a child on a thread, so that it stops existing (kill(pid, 0) fails)
// as soon as it exits, as a peer that is not our child would.
struct Reaper {
  explicit Reaper(pid_t pid)
      : thread([this, pid] {
          int st = 0;
          while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
          }
          status = st;
          reaped = true;
        }) {}
  ~Reaper() {
    if (thread.joinable()) thread.join();
  }
  std::thread thread;
  int status = 0;
  std::atomic<bool> reaped{false};
};

TEST(FifoShmTest, CreateOpenAndNameRules) {
  const std::string name = UniqueShmName(0);
  EXPECT_EQ(name.rfind("/ringo-", 0), 0u) << name;
  EXPECT_NE(name.find("-r1-c0"), std::string::npos) << name;
  auto mem = CreateShmFifo(name, 512, 1);
  ASSERT_TRUE(mem.ok()) << mem.status().ToString();
  // Creating the same name twice fails (O_EXCL): two communicators never share a FIFO.
  auto dup = CreateShmFifo(name, 512, 1);
  EXPECT_FALSE(dup.ok());
  // The wrong size is refused.
  auto wrong = OpenShmFifo(name, 1024);
  EXPECT_FALSE(wrong.ok());
  auto peer = OpenShmFifo(name, 512);
  ASSERT_TRUE(peer.ok()) << peer.status().ToString();
  UnlinkShm(name);
  EXPECT_FALSE(OpenShmFifo(name, 512).ok()) << "unlinked names are gone";
  // Both mappings see the same memory.
  RecvEnd recv(*mem, 1, SelfProcessId());
  SendEnd send(*peer, 0, SelfProcessId());
  const WaitContext ctx = Ctx(0, 1000, 0);
  auto s = send.Acquire(ctx, 0);
  ASSERT_TRUE(s.ok());
  std::memcpy(*s, "shared", 6);
  send.Post(6);
  size_t bytes = 0;
  auto r = recv.Acquire(ctx, 0, &bytes);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(bytes, 6u);
  EXPECT_EQ(std::memcmp(*r, "shared", 6), 0);
  EXPECT_NE(*r, static_cast<const void*>(*s)) << "two mappings";
}

TEST(FifoShmTest, OpeningAMissingFifoFails) {
  auto r = OpenShmFifo(UniqueShmName(3), 512);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kSystemError);
}

// A child process sends many slots through shared memory; the parent checks them.
TEST(FifoShmTest, ProcessesPassManySlots) {
  constexpr size_t kSlotBytes = 1024;
  constexpr uint64_t kMessages = 20000;
  for (int spin : {0, 5000}) {
    const std::string name = UniqueShmName(1);
    auto mem = CreateShmFifo(name, kSlotBytes, 1);
    ASSERT_TRUE(mem.ok()) << mem.status().ToString();
    RecvEnd recv(*mem, 1, SelfProcessId());
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      auto theirs = OpenShmFifo(name, kSlotBytes);
      if (!theirs.ok()) _exit(2);
      SendEnd send(*theirs, 0, SelfProcessId());
      const WaitContext ctx = Ctx(0, 20000, spin);
      for (uint64_t i = 0; i < kMessages; ++i) {
        auto slot = send.Acquire(ctx, static_cast<int64_t>(i));
        if (!slot.ok()) _exit(3);
        const size_t bytes = MessageBytes(i, kSlotBytes);
        Fill(*slot, i, bytes);
        send.Post(bytes);
      }
      _exit(0);
    }
    const WaitContext ctx = Ctx(1, 20000, spin);
    std::string error;
    for (uint64_t i = 0; i < kMessages && error.empty(); ++i) {
      size_t bytes = 0;
      auto slot = recv.Acquire(ctx, static_cast<int64_t>(i), &bytes);
      if (!slot.ok()) {
        error = slot.status().ToString();
        break;
      }
      error = Verify(*slot, i, bytes, kSlotBytes);
      recv.Release();
    }
    UnlinkShm(name);
    int st = 0;
    ASSERT_EQ(waitpid(child, &st, 0), child);
    EXPECT_EQ(error, "");
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
  }
}

// The sender process opens the FIFO and exits without posting: the waiting
// receiver fails with a RemoteError naming the pid, long before its timeout.
TEST(FifoShmTest, ExitedSenderProcessIsARemoteErrorNamingItsPid) {
  constexpr size_t kSlotBytes = 256;
  const std::string name = UniqueShmName(2);
  auto mem = CreateShmFifo(name, kSlotBytes, 1);
  ASSERT_TRUE(mem.ok()) << mem.status().ToString();
  RecvEnd recv(*mem, 1, SelfProcessId());
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(ready[0]);
    auto theirs = OpenShmFifo(name, kSlotBytes);
    if (!theirs.ok()) _exit(2);
    SendEnd send(*theirs, 0, SelfProcessId());
    char c = 1;
    if (write(ready[1], &c, 1) != 1) _exit(3);
    std::this_thread::sleep_for(milliseconds(100));  // let the parent start waiting
    _exit(0);  // without posting anything
  }
  close(ready[1]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  UnlinkShm(name);
  Reaper reaper(child);
  constexpr int64_t kTimeoutMs = 20000;
  size_t bytes = 0;
  const auto start = steady_clock::now();
  auto r = recv.Acquire(Ctx(1, kTimeoutMs, 0), 4, &bytes);
  const int64_t elapsed = MsSince(start);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kRemoteError) << r.status().ToString();
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("pid " + std::to_string(child)), std::string::npos) << m;
  EXPECT_NE(m.find("peer rank 0"), std::string::npos) << m;
  EXPECT_NE(m.find("step 4"), std::string::npos) << m;
  EXPECT_LT(elapsed, 5000) << "the dead peer was noticed only after " << elapsed << " ms";
}

// The receiver process exits while the sender waits for a free slot.
TEST(FifoShmTest, ExitedReceiverProcessIsARemoteError) {
  constexpr size_t kSlotBytes = 128;
  const std::string name = UniqueShmName(4);
  auto mem = CreateShmFifo(name, kSlotBytes, 1);
  ASSERT_TRUE(mem.ok()) << mem.status().ToString();
  auto mine = OpenShmFifo(name, kSlotBytes);
  ASSERT_TRUE(mine.ok());
  SendEnd send(*mine, 0, SelfProcessId());
  const WaitContext ctx = Ctx(0, 20000, 0);
  for (int i = 0; i < kSlots; ++i) {
    ASSERT_TRUE(send.Acquire(ctx, i).ok());
    send.Post(4);
  }
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(ready[0]);
    auto theirs = OpenShmFifo(name, kSlotBytes);
    if (!theirs.ok()) _exit(2);
    RecvEnd recv(*theirs, 1, SelfProcessId());
    char c = 1;
    if (write(ready[1], &c, 1) != 1) _exit(3);
    _exit(0);
  }
  close(ready[1]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  UnlinkShm(name);
  Reaper reaper(child);
  const auto start = steady_clock::now();
  auto s = send.Acquire(ctx, kSlots);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kRemoteError) << s.status().ToString();
  EXPECT_NE(s.status().message().find("pid " + std::to_string(child)), std::string::npos) << s.status().message();
  EXPECT_LT(MsSince(start), 5000);
}

}  // namespace
}  // namespace ringo::transport
