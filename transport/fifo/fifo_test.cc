// The connector FIFO's host ends within one process: slots pass intact and
// in order between producer and consumer threads, with spinning, yielding
// and futex sleeps; every wait ends, at its deadline with a Timeout naming
// the peer and the step, or at once when either side aborts. Across
// processes, over shared memory: shm/fifo_shm_test.cc.
#include "transport/fifo/fifo.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "transport/fifo/fifo_testing.h"

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

}  // namespace
}  // namespace ringo::transport
