// The connector FIFO: slots pass intact and in order between a producer and
// a consumer (threads, and processes over shared memory), with spinning and
// with futex sleeps; every wait ends: at its deadline with a Timeout naming
// the peer and the step, at once when either side aborts, and long before the
// deadline when the peer process has exited.
#include "transport/fifo/fifo.h"

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
#include "transport/shm/segment.h"

namespace ringo::transport {
namespace {

using base::Code;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

int64_t MsSince(steady_clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(steady_clock::now() - t).count();
}

WaitContext Ctx(int self_rank, int64_t timeout_ms, int spin_count, const std::atomic<bool>* abort = nullptr,
                int yield_count = 0) {
  WaitContext c;
  c.local_abort = abort;
  c.timeout_ms = timeout_ms;
  c.spin_count = spin_count;
  c.yield_count = yield_count;
  c.self_rank = self_rank;
  c.channel = 0;
  return c;
}

// The size and contents of message i: sizes cover 0, 1, odd values and full slots.
size_t MessageBytes(uint64_t i, size_t slot_bytes) {
  switch (i % 7) {
    case 0: return 0;
    case 1: return 1;
    case 2: return slot_bytes;
    case 3: return slot_bytes - 1;
    default: return static_cast<size_t>((i * 2654435761u) % (slot_bytes + 1));
  }
}
uint8_t MessageByte(uint64_t i, size_t k) { return static_cast<uint8_t>((i * 131 + k * 7 + (k >> 8)) ^ (i >> 3)); }

uint64_t Checksum(const void* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t k = 0; k < n; ++k) h = (h ^ static_cast<const uint8_t*>(p)[k]) * 1099511628211ull;
  return h;
}

void Fill(void* slot, uint64_t i, size_t bytes) {
  auto* b = static_cast<uint8_t*>(slot);
  for (size_t k = 0; k < bytes; ++k) b[k] = MessageByte(i, k);
}

// Checks message i in a received slot; "" if intact.
std::string Verify(const void* slot, uint64_t i, size_t bytes, size_t slot_bytes) {
  if (bytes != MessageBytes(i, slot_bytes)) {
    return "message " + std::to_string(i) + " has " + std::to_string(bytes) + " bytes, expected " +
           std::to_string(MessageBytes(i, slot_bytes));
  }
  std::vector<uint8_t> want(bytes);
  Fill(want.data(), i, bytes);
  if (Checksum(slot, bytes) != Checksum(want.data(), bytes) || std::memcmp(slot, want.data(), bytes) != 0) {
    return "message " + std::to_string(i) + " is corrupted";
  }
  return "";
}

// Producer and consumer threads over one in-process FIFO.
void PassMessages(size_t slot_bytes, int spin_count, uint64_t messages, bool slow_consumer, int yield_count = 0) {
  auto mem = AllocateProcessFifo(slot_bytes, /*receiver_rank=*/1);
  SendEnd send(mem, 0, SelfProcessId());
  RecvEnd recv(mem, 1, SelfProcessId());
  ASSERT_EQ(send.slot_bytes(), slot_bytes);
  ASSERT_EQ(recv.slot_bytes(), slot_bytes);
  std::string producer_error;
  std::thread producer([&] {
    const WaitContext ctx = Ctx(0, 20000, spin_count, nullptr, yield_count);
    for (uint64_t i = 0; i < messages; ++i) {
      const size_t bytes = MessageBytes(i, slot_bytes);
      // Every other message says its size up front: small ones go inline.
      auto slot = send.Acquire(ctx, static_cast<int64_t>(i), i % 2 == 0 ? bytes : SIZE_MAX);
      if (!slot.ok()) {
        producer_error = slot.status().ToString();
        return;
      }
      Fill(*slot, i, bytes);
      send.Post(bytes);
    }
  });
  const WaitContext ctx = Ctx(1, 20000, spin_count, nullptr, yield_count);
  std::mt19937 rng(7);
  std::string consumer_error;
  for (uint64_t i = 0; i < messages && consumer_error.empty(); ++i) {
    size_t bytes = 0;
    auto slot = recv.Acquire(ctx, static_cast<int64_t>(i), &bytes);
    if (!slot.ok()) {
      consumer_error = slot.status().ToString();
      break;
    }
    consumer_error = Verify(*slot, i, bytes, slot_bytes);
    if (slow_consumer && rng() % 64 == 0) {
      // Hold the slot a while: the producer fills the others and must wait.
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      if (consumer_error.empty()) consumer_error = Verify(*slot, i, bytes, slot_bytes);
    }
    recv.Release();
  }
  producer.join();
  EXPECT_EQ(producer_error, "");
  EXPECT_EQ(consumer_error, "");
  EXPECT_EQ(mem->base(), static_cast<void*>(send.header()));
  EXPECT_EQ(send.header()->tail.value.load(), messages);
  EXPECT_EQ(send.header()->head.value.load(), messages);
}

TEST(FifoTest, LayoutAndFormat) {
  EXPECT_EQ(kSlots, 8);
  EXPECT_EQ(FifoBytes(4096), kFifoDataOffset + 8 * 4096);
  auto mem = AllocateProcessFifo(256, 5);
  auto* h = static_cast<FifoHeader*>(mem->base());
  EXPECT_EQ(h->slot_bytes, 256u);
  EXPECT_EQ(h->receiver_rank, 5);
  EXPECT_EQ(h->receiver_process.pid, getpid());
  EXPECT_EQ(h->sender_rank, -1);
  EXPECT_EQ(h->sender_aborted.load(), 0u);
  EXPECT_EQ(h->receiver_aborted.load(), 0u);
  EXPECT_EQ(h->tail.value.load(), 0u);
  EXPECT_EQ(h->head.value.load(), 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(mem->base()) % 64, 0u);
  SendEnd send(mem, 4, ProcessId{1234, 0});
  EXPECT_EQ(h->sender_rank, 4);
  EXPECT_EQ(h->sender_process.pid, 1234);
}

TEST(FifoTest, SlotsAreUsedRoundRobin) {
  auto mem = AllocateProcessFifo(128, 1);
  SendEnd send(mem, 0, SelfProcessId());
  RecvEnd recv(mem, 1, SelfProcessId());
  const WaitContext ctx = Ctx(0, 1000, 0);
  char* data = static_cast<char*>(mem->base()) + kFifoDataOffset;
  for (int i = 0; i < 3 * kSlots; ++i) {
    auto s = send.Acquire(ctx, i);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(*s, static_cast<void*>(data + (i % kSlots) * 128));
    static_cast<char*>(*s)[0] = static_cast<char>(i);
    send.Post(static_cast<size_t>(i % 129));
    size_t bytes = 0;
    auto r = recv.Acquire(ctx, i, &bytes);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, static_cast<const void*>(*s));
    EXPECT_EQ(bytes, static_cast<size_t>(i % 129));
    EXPECT_EQ(static_cast<const char*>(*r)[0], static_cast<char>(i));
    recv.Release();
  }
}

TEST(FifoTest, SenderFillsExactlyKSlotsAhead) {
  auto mem = AllocateProcessFifo(64, 1);
  SendEnd send(mem, 0, SelfProcessId());
  RecvEnd recv(mem, 1, SelfProcessId());
  const WaitContext ctx = Ctx(0, 200, 0);
  for (int i = 0; i < kSlots; ++i) {
    auto s = send.Acquire(ctx, i);
    ASSERT_TRUE(s.ok()) << i << ": " << s.status().ToString();
    send.Post(8);
  }
  // The ninth waits for the receiver: with nobody releasing, it times out.
  auto start = steady_clock::now();
  auto s = send.Acquire(ctx, kSlots);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kTimeout) << s.status().ToString();
  EXPECT_GE(MsSince(start), 190);
  EXPECT_NE(s.status().message().find("peer rank 1"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("step 8"), std::string::npos) << s.status().message();
  // One release frees exactly one slot.
  size_t bytes = 0;
  ASSERT_TRUE(recv.Acquire(ctx, 0, &bytes).ok());
  recv.Release();
  auto again = send.Acquire(ctx, kSlots);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  send.Post(8);
  EXPECT_FALSE(send.Acquire(ctx, kSlots + 1).ok());
}

TEST(FifoTest, SmallPayloadsTravelInTheMetadataLine) {
  auto mem = AllocateProcessFifo(128, 1);
  auto* h = static_cast<FifoHeader*>(mem->base());
  SendEnd send(mem, 0, SelfProcessId());
  RecvEnd recv(mem, 1, SelfProcessId());
  const WaitContext ctx = Ctx(0, 1000, 0);
  for (int i = 0; i < 2 * kSlots; ++i) {
    const size_t n = static_cast<size_t>(i) % (kInlineBytes + 1);
    auto s = send.Acquire(ctx, i, n);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(*s, static_cast<void*>(h->meta[i % kSlots].inline_data));
    std::memset(*s, 'a' + i, n);
    send.Post(n);
    EXPECT_EQ(h->meta[i % kSlots].bytes, n | kInlineSlot);
    EXPECT_EQ(h->meta[i % kSlots].posted, static_cast<uint64_t>(i + 1));
    size_t bytes = 0;
    auto r = recv.Acquire(ctx, i, &bytes);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, static_cast<const void*>(*s));
    EXPECT_EQ(bytes, n);
    EXPECT_EQ(std::string(static_cast<const char*>(*r), bytes), std::string(n, static_cast<char>('a' + i)));
    recv.Release();
  }
  // One byte more than the inline area: the slot's own memory.
  auto big = send.Acquire(ctx, 0, kInlineBytes + 1);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(*big, static_cast<void*>(static_cast<char*>(mem->base()) + kFifoDataOffset));
}

TEST(FifoTest, AFifoWithASlotPrefixNeverInlines) {
  // A proxy sends every slot's metadata with its data from the prefix:
  // nothing may hide in the metadata line.
  auto mem = AllocateProcessFifo(128, 1, /*slot_prefix=*/64);
  SendEnd send(mem, 0, SelfProcessId());
  auto s = send.TryAcquire(8);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s, static_cast<void*>(static_cast<char*>(mem->base()) + kFifoDataOffset + 64));
  send.Post(8);
  EXPECT_EQ(send.header()->meta[0].bytes, 8u);
}

TEST(FifoTest, PollingTakesASlotByItsPostedMarkAndWaitingByTheTail) {
  auto mem = AllocateProcessFifo(64, 1);
  auto* h = static_cast<FifoHeader*>(mem->base());
  RecvEnd recv(mem, 1, SelfProcessId());
  size_t bytes = 0;
  auto none = recv.TryAcquire(&bytes, nullptr);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
  // The mark alone (a host sender between its mark and its tail).
  h->meta[0].bytes = 5;
  __atomic_store_n(&h->meta[0].posted, 1, __ATOMIC_RELEASE);
  auto first = recv.TryAcquire(&bytes, nullptr);
  ASSERT_TRUE(first.ok());
  EXPECT_NE(*first, nullptr);
  EXPECT_EQ(bytes, 5u);
  recv.Release();
  // A stale mark (from the slot's previous round) does not count.
  h->meta[1].bytes = 6;
  h->meta[1].posted = 2 - kSlots;
  auto stale = recv.TryAcquire(&bytes, nullptr);
  ASSERT_TRUE(stale.ok());
  EXPECT_EQ(*stale, nullptr);
  // The tail alone: polling does not look at it (it polls marks only), a
  // blocking wait does.
  h->tail.value.store(2);
  auto polled = recv.TryAcquire(&bytes, nullptr);
  ASSERT_TRUE(polled.ok());
  EXPECT_EQ(*polled, nullptr);
  auto waited = recv.Acquire(Ctx(1, 1000, 0), 1, &bytes);
  ASSERT_TRUE(waited.ok()) << waited.status().ToString();
  EXPECT_NE(*waited, nullptr);
  EXPECT_EQ(bytes, 6u);
}

TEST(FifoTest, AnOversizedInlineSlotIsARemoteErrorNamingTheSender) {
  auto mem = AllocateProcessFifo(4096, 1);
  auto* h = static_cast<FifoHeader*>(mem->base());
  h->sender_rank = 3;
  RecvEnd recv(mem, 1, SelfProcessId());
  h->meta[0].bytes = (kInlineBytes + 1) | kInlineSlot;  // fits the slot, not the line
  __atomic_store_n(&h->meta[0].posted, 1, __ATOMIC_RELEASE);
  size_t bytes = 0;
  auto r = recv.TryAcquire(&bytes, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kRemoteError);
  EXPECT_EQ(r.status().origin(), 3) << r.status().ToString();
  EXPECT_NE(r.status().message().find("25 bytes into a 24-byte inline slot"), std::string::npos)
      << r.status().message();
}

TEST(FifoTest, ThreadsPassManySlotsWithFutexSleeps) { PassMessages(4096, 0, 20000, true); }
TEST(FifoTest, ThreadsPassManySlotsSpinning) { PassMessages(4096, 1 << 20, 20000, true); }
TEST(FifoTest, ThreadsPassManySlotsYielding) { PassMessages(4096, 10, 20000, true, 1000); }
TEST(FifoTest, ThreadsPassManySmallSlots) { PassMessages(64, 0, 50000, false); }
TEST(FifoTest, ThreadsPassManySmallSlotsSpinningALittle) { PassMessages(64, 50, 50000, false); }

TEST(FifoTest, WaitingReceiverTimesOutNamingPeerAndStep) {
  auto mem = AllocateProcessFifo(256, 3);
  SendEnd send(mem, 2, SelfProcessId());
  RecvEnd recv(mem, 3, SelfProcessId());
  for (int spin : {0, 1000}) {
    WaitContext ctx = Ctx(3, 300, spin, nullptr, spin == 0 ? 0 : 100000);
    ctx.channel = 1;
    size_t bytes = 0;
    const auto start = steady_clock::now();
    auto r = recv.Acquire(ctx, 17, &bytes);
    const int64_t elapsed = MsSince(start);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kTimeout) << r.status().ToString();
    const std::string& m = r.status().message();
    EXPECT_NE(m.find("rank 3"), std::string::npos) << m;       // who waited
    EXPECT_NE(m.find("peer rank 2"), std::string::npos) << m;  // on whom
    EXPECT_NE(m.find("step 17"), std::string::npos) << m;
    EXPECT_NE(m.find("channel 1"), std::string::npos) << m;
    EXPECT_NE(m.find("300 ms"), std::string::npos) << m;
    EXPECT_GE(elapsed, 295);
    EXPECT_LT(elapsed, 300 + 1500) << "the deadline was overrun";
  }
}

// A waiter on another thread; returns its status and when it returned.
struct Waiter {
  std::thread thread;
  base::Status status;
  steady_clock::time_point returned;
  std::atomic<bool> done{false};

  void StartRecv(RecvEnd* recv, WaitContext ctx, int64_t step) {
    thread = std::thread([this, recv, ctx, step] {
      size_t bytes = 0;
      auto r = recv->Acquire(ctx, step, &bytes);
      status = r.ok() ? base::OkStatus() : r.status();
      returned = steady_clock::now();
      done = true;
    });
  }
  void StartSend(SendEnd* send, WaitContext ctx, int64_t step) {
    thread = std::thread([this, send, ctx, step] {
      auto r = send->Acquire(ctx, step);
      status = r.ok() ? base::OkStatus() : r.status();
      returned = steady_clock::now();
      done = true;
    });
  }
};

TEST(FifoTest, AbortFifoWakesAWaitingReceiver) {
  for (int spin : {0, 100000}) {
    auto mem = AllocateProcessFifo(256, 1);
    SendEnd send(mem, 0, SelfProcessId());
    RecvEnd recv(mem, 1, SelfProcessId());
    Waiter w;
    w.StartRecv(&recv, Ctx(1, 30000, spin, nullptr, spin == 0 ? 0 : 1000000), 5);
    std::this_thread::sleep_for(milliseconds(150));  // let it fall asleep
    EXPECT_FALSE(w.done.load());
    const auto aborted_at = steady_clock::now();
    send.Abort(base::RemoteError("rank 0 aborted"), 0, 0);
    w.thread.join();
    const auto latency = std::chrono::duration_cast<milliseconds>(w.returned - aborted_at).count();
    EXPECT_EQ(w.status.code(), Code::kRemoteError) << w.status.ToString();
    EXPECT_NE(w.status.message().find("aborted"), std::string::npos) << w.status.message();
    EXPECT_NE(w.status.message().find("peer rank 0"), std::string::npos) << w.status.message();
    EXPECT_LT(latency, 1000) << "the abort did not wake the waiter promptly";
    EXPECT_EQ(recv.header()->sender_aborted.load(), 1u);
    EXPECT_EQ(w.status.origin(), 0);
  }
}

TEST(FifoTest, AbortFifoWakesAWaitingSender) {
  auto mem = AllocateProcessFifo(64, 1);
  SendEnd send(mem, 0, SelfProcessId());
  RecvEnd recv(mem, 1, SelfProcessId());
  const WaitContext ctx = Ctx(0, 30000, 0);
  for (int i = 0; i < kSlots; ++i) {
    ASSERT_TRUE(send.Acquire(ctx, i).ok());
    send.Post(1);
  }
  Waiter w;
  w.StartSend(&send, ctx, kSlots);
  std::this_thread::sleep_for(milliseconds(150));
  EXPECT_FALSE(w.done.load());
  const auto aborted_at = steady_clock::now();
  recv.Abort(base::RemoteError("rank 1 aborted"), 1, 0);
  w.thread.join();
  EXPECT_EQ(w.status.code(), Code::kRemoteError) << w.status.ToString();
  EXPECT_NE(w.status.message().find("peer rank 1"), std::string::npos) << w.status.message();
  EXPECT_LT(std::chrono::duration_cast<milliseconds>(w.returned - aborted_at).count(), 1000);
}

TEST(FifoTest, LocalAbortFlagAndWakeStopAWaiter) {
  for (int spin : {0, 100000}) {
    auto mem = AllocateProcessFifo(256, 1);
    SendEnd send(mem, 0, SelfProcessId());
    RecvEnd recv(mem, 1, SelfProcessId());
    std::atomic<bool> abort{false};
    Waiter w;
    w.StartRecv(&recv, Ctx(1, 30000, spin, &abort, spin == 0 ? 0 : 1000000), 9);
    std::this_thread::sleep_for(milliseconds(150));
    EXPECT_FALSE(w.done.load());
    const auto aborted_at = steady_clock::now();
    abort = true;
    WakeFifo(recv.header());
    w.thread.join();
    EXPECT_FALSE(w.status.ok());
    EXPECT_EQ(w.status.code(), Code::kInvalidUsage) << w.status.ToString();
    EXPECT_NE(w.status.message().find("aborted"), std::string::npos) << w.status.message();
    EXPECT_LT(std::chrono::duration_cast<milliseconds>(w.returned - aborted_at).count(), 1000);
    // The FIFO itself was not marked aborted: only this side gave up.
    EXPECT_EQ(recv.header()->sender_aborted.load(), 0u);
    EXPECT_EQ(recv.header()->receiver_aborted.load(), 0u);
  }
}

TEST(FifoTest, AnAbortedFifoFailsTheNextWaitAtOnce) {
  auto mem = AllocateProcessFifo(64, 1);
  SendEnd send(mem, 0, SelfProcessId());
  RecvEnd recv(mem, 1, SelfProcessId());
  send.Abort(base::RemoteError("rank 0 aborted"), 0, 0);
  size_t bytes = 0;
  const auto start = steady_clock::now();
  auto r = recv.Acquire(Ctx(1, 30000, 0), 0, &bytes);
  EXPECT_EQ(r.status().code(), Code::kRemoteError);
  EXPECT_LT(MsSince(start), 1000);
}

// ----------------------------------------------------- across processes ----

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
