// The kernels' FIFO primitives (internal/device_fifo.cuh) compiled as host
// C++ and run by CPU threads: the counter waits and posts at both scopes,
// the watchdog's abort, peer-abort and deadline verdicts, the error record's
// single claim, and the launch-end mark a network proxy reads. libcu++'s
// atomics have host definitions, so this runs the very functions the kernels
// call. What it cannot see is how a GPU orders them (its scopes and caches):
// ring_kernel_test's, on a GPU. On x86 every load acquires and every store
// releases anyway, so the ordering checks here catch a wrong protocol (a post
// before the data, a wait that returns early), not a weak fence.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "kernels/cuda/device_types.h"
#include "kernels/cuda/internal/host_shim.h"
// internal/device_fifo.cuh, copied by the build under a name cc rules take.
#include "kernels/cuda/internal/device_fifo_on_host.h"

namespace ringo::kernels::gpu::internal {
namespace {

struct Guarded {
  volatile int abort_flag = 0;
  ErrorRecord record{};
  int claim = 0;
  KernelGuard guard;
  volatile int block_failed = 0;

  explicit Guarded(uint64_t timeout_ns) {
    guard.abort = &abort_flag;
    guard.error = &record;
    guard.claim = &claim;
    guard.timeout_ns = timeout_ns;
    guard.rank = 3;
  }
  Watchdog Dog(int channel) { return Watchdog(guard, channel, &block_failed); }
};

// A sender fills a slot ring and posts its tail; a receiver waits for each
// step, checks the slot holds that step's data, and releases the head the
// sender waits on before reusing the slot: the Simple protocol's handshake
// through the kernels' own WaitCounter and PostCounter.
void RunHandshake(uint32_t gpu_scope) {
  constexpr int kSlots = 4;
  constexpr int kWords = 64;
  // Both threads spin (as the kernels do): few steps, so that a loaded machine
  // that runs one at a time still ends in seconds.
  constexpr uint64_t kSteps = 1000;
  std::vector<uint64_t> slots(kSlots * kWords, 0);
  uint64_t tail = 0;
  uint64_t head = 0;
  Guarded sender_guard(/*timeout_ns=*/30ull * 1000 * 1000 * 1000);
  Guarded receiver_guard(/*timeout_ns=*/30ull * 1000 * 1000 * 1000);
  std::atomic<uint64_t> bad{0};

  std::thread sender([&] {
    const Watchdog dog = sender_guard.Dog(0);
    for (uint64_t step = 0; step < kSteps; ++step) {
      uint64_t seen = 0;
      if (step >= kSlots) {
        ASSERT_TRUE(WaitCounter(&head, step - kSlots + 1, nullptr, dog, WaitSite{1, 0, int64_t(step), step}, &seen,
                                gpu_scope));
        ASSERT_GE(seen, step - kSlots + 1);
      }
      uint64_t* slot = &slots[(step % kSlots) * kWords];
      for (int w = 0; w < kWords; ++w) slot[w] = step * 1000 + w;
      PostCounter(&tail, step + 1, gpu_scope);
    }
  });
  std::thread receiver([&] {
    const Watchdog dog = receiver_guard.Dog(0);
    for (uint64_t step = 0; step < kSteps; ++step) {
      uint64_t seen = 0;
      ASSERT_TRUE(WaitCounter(&tail, step + 1, nullptr, dog, WaitSite{0, 1, int64_t(step), step + 1}, &seen,
                              gpu_scope));
      const uint64_t* slot = &slots[(step % kSlots) * kWords];
      for (int w = 0; w < kWords; ++w) {
        if (slot[w] != step * 1000 + w) bad.fetch_add(1);
      }
      PostCounter(&head, step + 1, gpu_scope);
    }
  });
  sender.join();
  receiver.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(tail, kSteps);
  EXPECT_EQ(head, kSteps);
  EXPECT_EQ(sender_guard.record.code, 0);
  EXPECT_EQ(receiver_guard.record.code, 0);
  EXPECT_EQ(LoadOwnCounter(&tail), kSteps);
}

TEST(DeviceFifoOnHost, HandshakeAtSystemScope) { RunHandshake(0); }

TEST(DeviceFifoOnHost, HandshakeAtGpuScope) { RunHandshake(1); }

TEST(DeviceFifoOnHost, AWaitReturnsTheValueItSawAtOrPastTheTarget) {
  uint64_t counter = 7;
  Guarded g(0);
  uint64_t seen = 0;
  EXPECT_TRUE(WaitCounter(&counter, 5, nullptr, g.Dog(0), WaitSite{}, &seen, 0));
  EXPECT_EQ(seen, 7u);
  EXPECT_TRUE(WaitCounter(&counter, 7, nullptr, g.Dog(0), WaitSite{}, &seen, 1));
  EXPECT_EQ(seen, 7u);
  EXPECT_EQ(LoadOwnCounter(nullptr), 0u);
}

TEST(DeviceFifoOnHost, TheDeadlineRecordsATimeoutWithTheWaitsSite) {
  uint64_t counter = 2;
  Guarded g(/*timeout_ns=*/20ull * 1000 * 1000);
  uint64_t seen = 0;
  const uint64_t t0 = HostClockNs();
  EXPECT_FALSE(WaitCounter(&counter, 9, nullptr, g.Dog(5), WaitSite{1, 1, 42, 9}, &seen, 0));
  EXPECT_GE(HostClockNs() - t0, 20ull * 1000 * 1000);
  EXPECT_EQ(g.record.code, static_cast<int32_t>(KernelError::kTimeout));
  EXPECT_EQ(g.record.rank, 3);
  EXPECT_EQ(g.record.peer, 1);
  EXPECT_EQ(g.record.channel, 5);
  EXPECT_EQ(g.record.receiving, 1);
  EXPECT_EQ(g.record.step, 42);
  EXPECT_EQ(g.record.expected, 9u);
  EXPECT_EQ(g.record.observed, 2u);
  EXPECT_GE(g.record.waited_ns, 20ull * 1000 * 1000);
  EXPECT_EQ(g.claim, 1);
  EXPECT_NE(g.block_failed, 0);
}

TEST(DeviceFifoOnHost, AbortsAreToldApartAndTheFirstFailureKeepsTheRecord) {
  uint64_t counter = 0;
  uint32_t peer_abort = 1;
  Guarded g(0);
  uint64_t seen = 0;
  EXPECT_FALSE(WaitCounter(&counter, 1, &peer_abort, g.Dog(0), WaitSite{2, 0, 7, 1}, &seen, 0));
  EXPECT_EQ(g.record.code, static_cast<int32_t>(KernelError::kPeerAborted));
  EXPECT_EQ(g.record.peer, 2);

  // Another block of the launch fails later: the claim is taken, so the
  // record still tells the first failure.
  volatile int other_block = 0;
  g.abort_flag = 1;
  const Watchdog other(g.guard, 1, &other_block);
  EXPECT_FALSE(WaitCounter(&counter, 1, nullptr, other, WaitSite{4, 1, 9, 1}, &seen, 1));
  EXPECT_NE(other_block, 0);
  EXPECT_EQ(g.record.code, static_cast<int32_t>(KernelError::kPeerAborted));
  EXPECT_EQ(g.record.peer, 2);
  EXPECT_EQ(g.record.channel, 0);

  // With the claim free again, the local abort is told as such.
  Guarded fresh(0);
  fresh.abort_flag = 1;
  EXPECT_FALSE(WaitCounter(&counter, 1, &peer_abort, fresh.Dog(0), WaitSite{}, &seen, 0));
  EXPECT_EQ(fresh.record.code, static_cast<int32_t>(KernelError::kAborted));
}

TEST(DeviceFifoOnHost, ManyBlocksFailingAtOnceWriteOneRecord) {
  uint64_t counter = 0;
  Guarded g(0);
  g.abort_flag = 1;
  constexpr int kBlocks = 8;
  std::vector<std::thread> blocks;
  std::vector<int> failed(kBlocks, 0);
  for (int b = 0; b < kBlocks; ++b) {
    blocks.emplace_back([&, b] {
      volatile int block_failed = 0;
      const Watchdog dog(g.guard, b, &block_failed);
      uint64_t seen = 0;
      failed[b] = !WaitCounter(&counter, 1, nullptr, dog, WaitSite{b, 1, b, 1}, &seen, 0);
    });
  }
  for (auto& t : blocks) t.join();
  for (int b = 0; b < kBlocks; ++b) EXPECT_EQ(failed[b], 1) << b;
  EXPECT_EQ(g.claim, 1);
  EXPECT_EQ(g.record.code, static_cast<int32_t>(KernelError::kAborted));
  // One block's fields, whole: the channel and the peer agree.
  EXPECT_EQ(g.record.channel, g.record.peer);
  EXPECT_EQ(g.record.step, g.record.peer);
}

TEST(DeviceFifoOnHost, ABlockAlreadyFailedStopsWaitingWithoutARecord) {
  uint64_t counter = 0;
  Guarded g(0);
  g.block_failed = 1;
  uint64_t seen = 0;
  EXPECT_FALSE(WaitCounter(&counter, 1, nullptr, g.Dog(0), WaitSite{}, &seen, 0));
  EXPECT_EQ(g.record.code, 0);
  EXPECT_EQ(g.claim, 0);
}

TEST(DeviceFifoOnHost, TheLaunchEndMarkIsWrittenOnlyWhereAProxyReadsIt) {
  DeviceFifo served;
  uint64_t ended = 0;
  served.launch_ended = &ended;
  MarkLaunchEnded(served, 17);
  EXPECT_EQ(ended, 17u);
  DeviceFifo plain;  // launch_ended == nullptr: nothing to write
  MarkLaunchEnded(plain, 18);
  EXPECT_EQ(ended, 17u);
}

}  // namespace
}  // namespace ringo::kernels::gpu::internal
