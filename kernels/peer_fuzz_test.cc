// A fake peer that writes random and truncated slot headers and board posts
// into the receive paths of the ring executor and the one-shot: whatever it
// sends, the real rank returns (no crash, no hang past its short timeout) and,
// when it fails, names the peer. Bounded rounds with fixed seeds.
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/ring_executor.h"
#include "kernels/oneshot_executor.h"
#include "kernels/coll_signature.h"
#include "transport/shm/board.h"
#include "transport/fifo/fifo.h"

namespace ringo::kernels {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kTimeoutMs = 150;

transport::WaitContext Wait(int rank) {
  transport::WaitContext w;
  w.timeout_ms = kTimeoutMs;
  w.spin_count = 100;
  w.yield_count = 100;
  w.self_rank = rank;
  w.nranks = 2;
  return w;
}

transport::CallSignature RandomSignature(std::mt19937_64& rng, const transport::CallSignature& real) {
  transport::CallSignature s = real;
  switch (rng() % 5) {
    case 0: break;  // the right one
    case 1: s.seq = rng(); break;
    case 2: s.count = static_cast<int64_t>(rng()); break;
    case 3: s.shape = static_cast<uint32_t>(rng()); break;
    default: s.root = static_cast<int32_t>(rng()); break;
  }
  return s;
}

// Rank 0 runs a ring AllReduce; rank 1 is the fake: it posts slots with
// random sizes (up to twice the slot, 0, the right size), random
// signatures and random bytes, then stops, and drains what rank 0 sends.
TEST(PeerFuzz, RingReceiveSurvivesRandomSlots) {
  constexpr size_t kSlotBytes = 256;
  std::mt19937_64 rng(42);
  int errors = 0;
  for (int round = 0; round < 100; ++round) {
    // The ring 0 -> 1 -> 0: each edge's FIFO in the receiver's (this process's) memory.
    const transport::ProcessId self = transport::SelfProcessId();
    auto into1 = transport::AllocateProcessFifo(kSlotBytes, 1);
    auto into0 = transport::AllocateProcessFifo(kSlotBytes, 0);
    transport::SendEnd send0(into1, 0, self);
    transport::RecvEnd recv1(into1, 1, self);
    transport::SendEnd send1(into0, 1, self);
    transport::RecvEnd recv0(into0, 0, self);
    const std::vector<int> order = {0, 1};
    CollArgs args;
    args.count = 1 + static_cast<int64_t>(rng() % 300);
    args.dtype = base::DataType::kFloat32;
    std::vector<float> in(args.count, 1.0f), out(args.count, 0.0f);
    args.send = in.data();
    args.recv = out.data();
    const transport::CallSignature sig = MakeSignature(args, 7);
    std::atomic<bool> stop{false};
    std::thread fake([&, seed = rng()] {
      std::mt19937_64 r(seed);
      transport::SendEnd& send = send1;
      transport::RecvEnd& recv = recv1;
      const int posts = static_cast<int>(r() % 6);
      for (int i = 0; i < posts && !stop.load(); ++i) {
        auto slot = send.Acquire(Wait(1), i);
        if (!slot.ok()) break;
        const size_t bytes = r() % 3 == 0 ? static_cast<size_t>(r() % (2 * kSlotBytes + 1))
                                          : static_cast<size_t>(std::min<int64_t>(args.count * 4, 32 * 4));
        auto* b = static_cast<unsigned char*>(*slot);
        for (size_t k = 0; k < kSlotBytes; ++k) b[k] = static_cast<unsigned char>(r());
        send.Post(bytes, RandomSignature(r, sig));
      }
      while (!stop.load()) {  // drain rank 0's slots so it never waits on a full FIFO
        size_t got = 0;
        auto s = recv.Acquire(Wait(1), 0, &got);
        if (!s.ok()) continue;
        recv.Release();
      }
    });
    const RingArgs ring = MakeRingArgs(args, 0, 2, 0, order.data(), 1, 128);
    ChannelEnds ends;
    ends.recv = &recv0;
    ends.send = &send0;
    ends.wait = Wait(0);
    ends.sig = sig;
    const auto start = Clock::now();
    base::Status st = RunHostChannel(ring, 0, HostStores(), ends);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    stop.store(true);
    fake.join();
    EXPECT_LT(seconds, 5.0) << "round " << round;
    if (!st.ok()) {
      ++errors;
      EXPECT_NE(st.message().find("rank 1"), std::string::npos) << "round " << round << ": " << st.ToString();
      EXPECT_EQ(st.origin(), 1) << st.ToString();
    }
  }
  EXPECT_GT(errors, 60);  // most rounds send something wrong
}

// Rank 0 runs one-shot AllReduces; rank 1 is the fake: it writes random
// words into its buffer and header signature, publishes random counters, or
// posts nothing at all.
TEST(PeerFuzz, OneShotSurvivesRandomPosts) {
  constexpr size_t kBufferBytes = 4096;
  std::mt19937_64 rng(7);
  int errors = 0;
  for (int round = 0; round < 100; ++round) {
    auto pages = transport::HostPages::InProcess(2, transport::BoardBytes(kBufferBytes));
    transport::Board board0(pages[0], kBufferBytes);
    transport::Board board1(pages[1], kBufferBytes);
    CollArgs args;
    args.count = 1 + static_cast<int64_t>(rng() % 64);
    args.dtype = base::DataType::kFloat32;
    std::vector<float> in(args.count, 1.0f), out(args.count, 0.0f);
    args.send = in.data();
    args.recv = out.data();
    const uint64_t seq = 1 + rng() % 3;
    const transport::CallSignature sig = MakeSignature(args, seq);
    const int64_t ll = rng() % 2 == 0 ? 64 : 0;
    // The fake post, written before rank 0 looks.
    transport::BoardHeader* h = board1.header(1);
    auto* buf = reinterpret_cast<unsigned char*>(h) + 4096 + (seq % 2) * kBufferBytes;
    const size_t words = rng() % 40;
    for (size_t k = 0; k < words * 8; ++k) buf[k] = static_cast<unsigned char>(rng());
    if (rng() % 2 == 0) {  // a plausible LL flag in every word
      auto* w = reinterpret_cast<uint64_t*>(buf);
      for (size_t k = 0; k < words; ++k) w[k] = (seq << 32) | (w[k] & 0xffffffffu);
    }
    h->sig[seq % 2] = RandomSignature(rng, sig);
    if (rng() % 4 != 0) transport::Publish(h->posted, rng() % 2 == 0 ? seq : rng());
    transport::Publish(h->done, seq + 2);  // never blocks rank 0's buffer reuse
    transport::Publish(board0.header(0)->done, seq - 1);  // rank 0's earlier operations
    const auto start = Clock::now();
    base::Status st = RunHostOneShot(args, 0, 2, board0, seq, Wait(0), ll, sig);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_LT(seconds, 5.0) << "round " << round;
    if (!st.ok()) {
      ++errors;
      EXPECT_NE(st.message().find("rank 1"), std::string::npos) << "round " << round << ": " << st.ToString();
    }
  }
  EXPECT_GT(errors, 60);
}

}  // namespace
}  // namespace ringo::kernels
