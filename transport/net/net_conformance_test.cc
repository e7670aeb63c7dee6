// The net conformance suite: every implementation of net.h (the in-memory
// fake, TCP sockets; verbs where built) passes the same tests: handshake,
// messages of every size intact and in order with many in flight, a receive
// too small, aborts that carry the fault notice both ways, a peer that goes
// away, a stranger refused; and the proxy moving FIFO slots and notices over
// a connection, with slots after the FIFO's header or apart from it (the
// layout of GPUDirect edges).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "transport/fifo/fifo.h"
#include "transport/net/fake_net.h"
#include "transport/net/ib/net.h"
#include "transport/net/net.h"
#include "transport/net/proxy.h"
#include "transport/net/socket/net.h"

namespace ringo::transport::net {
namespace {

using base::Status;
using Clock = std::chrono::steady_clock;

struct Factory {
  const char* name;
  std::function<std::unique_ptr<Net>()> make;
};

std::unique_ptr<Net> MakeTcp() {
  SocketNetOptions o;
  o.ifname_spec = "lo";
  o.streams = 3;
  o.timeout_ms = 10000;
  auto n = MakeSocketNet(o);
  EXPECT_TRUE(n.ok()) << n.status().ToString();
  return n.ok() ? std::move(n).value() : nullptr;
}

// Verbs where a port is active (a SoftRoCE guest, tests/rdma/): skipped
// elsewhere, unless RINGO_TEST_REQUIRE_IB=1 asks for a failure instead.
std::unique_ptr<Net> MakeIb() {
  IbNetOptions o;
  o.qps = 2;
  o.timeout_ms = 10000;
  o.ifname_spec = "lo";
  auto n = MakeIbNet(o);
  if (!n.ok()) {
    const char* require = std::getenv("RINGO_TEST_REQUIRE_IB");
    if (require != nullptr && std::string(require) == "1") ADD_FAILURE() << n.status().ToString();
    std::printf("verbs unavailable: %s\n", n.status().ToString().c_str());
    return nullptr;
  }
  return std::move(n).value();
}

class NetConformance : public ::testing::TestWithParam<Factory> {
 protected:
  void SetUp() override {
    net_ = GetParam().make();
    if (net_ == nullptr && std::string(GetParam().name) == "ib") GTEST_SKIP() << "no usable verbs port here";
    ASSERT_NE(net_, nullptr);
  }

  // `bytes` at `data` registered with `c` (null for transports that register nothing).
  static std::unique_ptr<MemoryRegion> Reg(Connection& c, void* data, size_t bytes) {
    auto r = c.Register(data, bytes, MemoryKind::kHost);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }

  // A connection from rank 1 to rank 0 (tag 77).
  void Connect(std::unique_ptr<SendConnection>* send, std::unique_ptr<RecvConnection>* recv, uint64_t tag = 77) {
    NetHandle handle;
    auto listener = net_->Listen(0, ConnectOptions{0, 1, 77}, &handle);
    ASSERT_TRUE(listener.ok()) << listener.status().ToString();
    Status accept_st;
    std::thread acceptor([&] {
      auto r = (*listener)->Accept(1, DeadlineAfterMs(5000));
      if (r.ok()) *recv = std::move(r).value();
      else accept_st = r.status();
    });
    auto s = net_->Connect(0, handle, ConnectOptions{1, 0, tag}, DeadlineAfterMs(5000));
    acceptor.join();
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_TRUE(accept_st.ok()) << accept_st.ToString();
    *send = std::move(s).value();
  }

  // Tests `r` until done or an error, at most `ms`.
  static Status Finish(Connection& c, Request* r, size_t* bytes, int64_t ms = 10000) {
    const auto until = Clock::now() + std::chrono::milliseconds(ms);
    while (Clock::now() < until) {
      bool done = false;
      Status st = c.Test(r, &done, bytes);
      if (!st.ok() || done) return st;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return base::Timeout("request not done in time");
  }

  // A sending proxy (rank 1) serving `out` and a receiving one (rank 0)
  // serving `in`, over a new connection; started.
  struct Proxies {
    std::unique_ptr<Proxy> sender, receiver;
  };
  void StartProxies(std::shared_ptr<FifoMemory> out, std::shared_ptr<FifoMemory> in, bool device_fed,
                    Proxies* p) {
    std::unique_ptr<SendConnection> send;
    std::unique_ptr<RecvConnection> recv;
    ASSERT_NO_FATAL_FAILURE(Connect(&send, &recv));
    ProxyOptions po;
    po.self_rank = 1;
    p->sender = std::make_unique<Proxy>(po);
    po.self_rank = 0;
    p->receiver = std::make_unique<Proxy>(po);
    ASSERT_TRUE(p->sender->AddSender(std::move(out), std::move(send), 0, device_fed).ok());
    ASSERT_TRUE(p->receiver->AddReceiver(std::move(in), std::move(recv), 0, device_fed).ok());
    ASSERT_TRUE(p->sender->Start().ok());
    ASSERT_TRUE(p->receiver->Start().ok());
  }

  std::unique_ptr<Net> net_;
};

TEST_P(NetConformance, DevicesAndProperties) {
  ASSERT_GE(net_->DeviceCount(), 1);
  auto p = net_->Properties(0);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_FALSE(p->name.empty());
  EXPECT_GE(p->max_requests, 1);
  EXPECT_FALSE(net_->Properties(net_->DeviceCount()).ok());
  EXPECT_FALSE(net_->Properties(-1).ok());
}

TEST_P(NetConformance, MessagesArriveIntactAndInOrder) {
  std::unique_ptr<SendConnection> send;
  std::unique_ptr<RecvConnection> recv;
  Connect(&send, &recv);
  const std::vector<size_t> fixed = {0, 1, 63, 4096, kSplitBytes - 1, kSplitBytes, kSplitBytes + 1, (1 << 20) + 13};
  std::mt19937_64 rng(3);
  std::vector<size_t> sizes = fixed;
  for (int i = 0; i < 150; ++i) sizes.push_back(rng() % 3 == 0 ? rng() % (300 << 10) : rng() % 5000);
  const size_t capacity = 2 << 20;
  auto byte = [](size_t m, size_t k) { return static_cast<char>((m * 131 + k * 7) ^ (k >> 9)); };
  std::string problem;
  std::thread sender([&] {
    // One registered area, each message at its own place in it (a message's
    // memory is not reused while it may be in flight).
    size_t total = 0;
    std::vector<size_t> at(sizes.size());
    for (size_t m = 0; m < sizes.size(); ++m) {
      at[m] = total;
      total += (sizes[m] + 63) / 64 * 64;
    }
    std::vector<char> area(total + 64);
    auto region = Reg(*send, area.data(), area.size());
    std::vector<Request*> inflight;
    size_t next = 0, completed = 0;
    while (completed < sizes.size()) {
      while (next < sizes.size()) {
        char* data = area.data() + at[next];
        for (size_t k = 0; k < sizes[next]; ++k) data[k] = byte(next, k);
        auto r = send->Isend(data, sizes[next], region.get());
        if (!r.ok()) return void(problem = r.status().ToString());
        if (*r == nullptr) break;
        inflight.push_back(*r);
        ++next;
      }
      size_t bytes = 0;
      bool done = false;
      Status st = send->Test(inflight.front(), &done, &bytes);
      if (!st.ok()) return void(problem = st.ToString());
      if (done) {
        if (bytes != sizes[completed]) return void(problem = "send completed with the wrong size");
        inflight.erase(inflight.begin());
        ++completed;
      }
    }
  });
  std::vector<char> buffer(capacity);
  auto in_region = Reg(*recv, buffer.data(), buffer.size());
  for (size_t m = 0; m < sizes.size(); ++m) {
    auto r = recv->Irecv(buffer.data(), capacity, in_region.get());
    ASSERT_TRUE(r.ok() && *r != nullptr) << r.status().ToString();
    size_t bytes = 0;
    Status st = Finish(*recv, *r, &bytes);
    ASSERT_TRUE(st.ok()) << "message " << m << ": " << st.ToString();
    ASSERT_EQ(bytes, sizes[m]) << "message " << m;
    for (size_t k = 0; k < bytes; ++k) {
      if (buffer[k] != byte(m, k)) FAIL() << "message " << m << " byte " << k;
    }
  }
  sender.join();
  EXPECT_EQ(problem, "");
}

TEST_P(NetConformance, AReceiveTooSmallIsAnErrorNamingThePeer) {
  std::unique_ptr<SendConnection> send;
  std::unique_ptr<RecvConnection> recv;
  Connect(&send, &recv);
  std::vector<char> data(1000, 'x'), small(10);
  auto out_region = Reg(*send, data.data(), data.size());
  auto in_region = Reg(*recv, small.data(), small.size());
  auto s = send->Isend(data.data(), data.size(), out_region.get());
  ASSERT_TRUE(s.ok() && *s != nullptr);
  auto r = recv->Irecv(small.data(), small.size(), in_region.get());
  ASSERT_TRUE(r.ok() && *r != nullptr);
  size_t bytes = 0;
  std::thread pump([&] { (void)Finish(*send, *s, &bytes, 2000); });
  Status st = Finish(*recv, *r, &bytes);
  pump.join();
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.origin(), 1) << st.ToString();
}

TEST_P(NetConformance, AbortsCarryTheNoticeBothWays) {
  for (bool sender_aborts : {true, false}) {
    std::unique_ptr<SendConnection> send;
    std::unique_ptr<RecvConnection> recv;
    Connect(&send, &recv);
    const Status why = base::Timeout("rank 5 stalled").WithOrigin(5, "rank 5 stalled", 42);
    std::vector<char> buffer(64);
    auto in_region = Reg(*recv, buffer.data(), buffer.size());
    auto out_region = Reg(*send, buffer.data(), buffer.size());
    if (sender_aborts) {
      send->Abort(why, 1, 9);
      auto r = recv->Irecv(buffer.data(), buffer.size(), in_region.get());
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      size_t bytes = 0;
      Status st = *r == nullptr ? base::Internal("no request") : Finish(*recv, *r, &bytes, 3000);
      EXPECT_EQ(st.code(), base::Code::kTimeout) << st.ToString();
      EXPECT_EQ(st.origin(), 5) << st.ToString();
      EXPECT_EQ(st.origin_seq(), 42u);
      EXPECT_NE(st.message().find("rank 5 stalled"), std::string::npos) << st.ToString();
    } else {
      recv->Abort(why, 0, 9);
      Status st;
      const auto until = Clock::now() + std::chrono::seconds(3);
      while (st.ok() && Clock::now() < until) {  // a sender hears it on its next progress
        auto s = send->Isend(buffer.data(), buffer.size(), out_region.get());
        if (!s.ok()) {
          st = s.status();
          break;
        }
        if (*s != nullptr) {
          size_t bytes = 0;
          bool done = false;
          st = send->Test(*s, &done, &bytes);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      EXPECT_EQ(st.code(), base::Code::kTimeout) << st.ToString();
      EXPECT_EQ(st.origin(), 5) << st.ToString();
    }
  }
}

TEST_P(NetConformance, APeerThatGoesAwayIsAnError) {
  std::unique_ptr<SendConnection> send;
  std::unique_ptr<RecvConnection> recv;
  Connect(&send, &recv);
  std::vector<char> buffer(64);
  auto in_region = Reg(*recv, buffer.data(), buffer.size());
  auto r = recv->Irecv(buffer.data(), buffer.size(), in_region.get());
  ASSERT_TRUE(r.ok() && *r != nullptr);
  send.reset();
  size_t bytes = 0;
  const auto start = Clock::now();
  Status st = Finish(*recv, *r, &bytes, 5000);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.code(), base::Code::kTimeout) << st.ToString();
  EXPECT_EQ(st.origin(), 1) << st.ToString();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 2.0);
}

// Close in good order: every message sent arrives, then a receive beyond
// fails saying the peer closed after everything (kAfterEveryCollective).
TEST_P(NetConformance, ACloseInGoodOrderDeliversEverythingFirst) {
  std::unique_ptr<SendConnection> send;
  std::unique_ptr<RecvConnection> recv;
  Connect(&send, &recv);
  constexpr int kMessages = 5;
  std::vector<char> out(kMessages * 1000), in(2000);
  for (size_t k = 0; k < out.size(); ++k) out[k] = static_cast<char>(k * 7);
  auto out_region = Reg(*send, out.data(), out.size());
  auto in_region = Reg(*recv, in.data(), in.size());
  std::thread sender([&] {
    std::vector<Request*> sent;
    for (int m = 0; m < kMessages; ++m) {
      auto r = send->Isend(out.data() + m * 1000, 1000, out_region.get());
      if (r.ok() && *r != nullptr) sent.push_back(*r);
    }
    send->Close();  // waits for the messages, then closes
  });
  for (int m = 0; m < kMessages; ++m) {
    auto r = recv->Irecv(in.data(), in.size(), in_region.get());
    ASSERT_TRUE(r.ok() && *r != nullptr) << r.status().ToString();
    size_t bytes = 0;
    Status st = Finish(*recv, *r, &bytes);
    ASSERT_TRUE(st.ok()) << "message " << m << ": " << st.ToString();
    ASSERT_EQ(bytes, 1000u);
    ASSERT_EQ(in[999], static_cast<char>((m * 1000 + 999) * 7));
  }
  sender.join();
  auto r = recv->Irecv(in.data(), in.size(), in_region.get());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  size_t bytes = 0;
  Status st = *r == nullptr ? base::Internal("no request") : Finish(*recv, *r, &bytes, 3000);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.origin(), 1) << st.ToString();
  EXPECT_EQ(st.origin_seq(), kAfterEveryCollective) << st.ToString();
}

// Requests may be tested in any order: a later one first.
TEST_P(NetConformance, RequestsCompleteWhicheverIsTestedFirst) {
  std::unique_ptr<SendConnection> send;
  std::unique_ptr<RecvConnection> recv;
  Connect(&send, &recv);
  std::vector<char> out(3000, 'a'), in(3000);
  out[1500] = 'b';
  auto out_region = Reg(*send, out.data(), out.size());
  auto in_region = Reg(*recv, in.data(), in.size());
  auto r1 = recv->Irecv(in.data(), 1500, in_region.get());
  auto r2 = recv->Irecv(in.data() + 1500, 1500, in_region.get());
  auto s1 = send->Isend(out.data(), 1000, out_region.get());
  auto s2 = send->Isend(out.data() + 1500, 1200, out_region.get());
  ASSERT_TRUE(r1.ok() && *r1 && r2.ok() && *r2 && s1.ok() && *s1 && s2.ok() && *s2);
  size_t b1 = 0, b2 = 0, sb1 = 0, sb2 = 0;
  std::thread pump([&] {
    EXPECT_TRUE(Finish(*send, *s2, &sb2).ok());
    EXPECT_TRUE(Finish(*send, *s1, &sb1).ok());
  });
  EXPECT_TRUE(Finish(*recv, *r2, &b2).ok());
  EXPECT_TRUE(Finish(*recv, *r1, &b1).ok());
  pump.join();
  EXPECT_EQ(b1, 1000u);
  EXPECT_EQ(b2, 1200u);
  EXPECT_EQ(sb1, 1000u);
  EXPECT_EQ(sb2, 1200u);
  EXPECT_EQ(in[1500], 'b');
}

TEST_P(NetConformance, AConnectionOfAnotherCommunicatorIsRefused) {
  NetHandle handle;
  auto listener = net_->Listen(0, ConnectOptions{0, 1, 77}, &handle);
  ASSERT_TRUE(listener.ok());
  std::thread acceptor([&] { EXPECT_FALSE((*listener)->Accept(1, DeadlineAfterMs(700)).ok()); });
  auto s = net_->Connect(0, handle, ConnectOptions{1, 0, 78}, DeadlineAfterMs(700));
  acceptor.join();
  EXPECT_FALSE(s.ok());
}

// The proxy over a connection: an executor's slots (sizes 0..slot, with
// signatures) arrive intact with their metadata; aborts reach the other
// executor with their origin.
TEST_P(NetConformance, ProxyMovesSlotsAndAborts) {
  constexpr size_t kSlotBytes = 4096;
  auto out_mem = AllocateProcessFifo(kSlotBytes, 0, kProxySlotPrefix);
  auto in_mem = AllocateProcessFifo(kSlotBytes, 0, kProxySlotPrefix);
  static_cast<FifoHeader*>(in_mem->base())->sender_rank = 1;
  SendEnd out(out_mem, 1, SelfProcessId());
  RecvEnd in(in_mem, 0, SelfProcessId());
  Proxies proxies;
  ASSERT_NO_FATAL_FAILURE(StartProxies(out_mem, in_mem, /*device_fed=*/false, &proxies));
  WaitContext w;
  w.timeout_ms = 5000;
  w.spin_count = 100;
  w.nranks = 8;
  constexpr int kMessages = 300;
  std::thread producer([&] {
    for (int m = 0; m < kMessages; ++m) {
      auto slot = out.Acquire(w, m);
      if (!slot.ok()) return;
      const size_t bytes = static_cast<size_t>(m * 37) % (kSlotBytes + 1);
      for (size_t k = 0; k < bytes; ++k) static_cast<char*>(*slot)[k] = static_cast<char>(m + k);
      CallSignature sig;
      sig.seq = static_cast<uint64_t>(m) + 1;
      sig.count = m;
      out.Post(bytes, sig);
    }
  });
  for (int m = 0; m < kMessages; ++m) {
    size_t bytes = 0;
    CallSignature sig;
    auto slot = in.Acquire(w, m, &bytes, &sig);
    ASSERT_TRUE(slot.ok()) << slot.status().ToString();
    ASSERT_EQ(bytes, static_cast<size_t>(m * 37) % (kSlotBytes + 1));
    ASSERT_EQ(sig.seq, static_cast<uint64_t>(m) + 1);
    for (size_t k = 0; k < bytes; ++k) ASSERT_EQ(static_cast<const char*>(*slot)[k], static_cast<char>(m + k));
    in.Release();
  }
  producer.join();
  // The sending executor fails; the receiving one hears where it started.
  out.Abort(base::RemoteError("rank 3 died").WithOrigin(3, "rank 3 died", 17), 1, 17);
  size_t bytes = 0;
  auto slot = in.Acquire(w, kMessages, &bytes);
  EXPECT_EQ(slot.status().code(), base::Code::kRemoteError) << slot.status().ToString();
  EXPECT_EQ(slot.status().origin(), 3) << slot.status().ToString();
  EXPECT_NE(slot.status().message().find("rank 3 died"), std::string::npos) << slot.status().ToString();
}

// A FIFO whose slots are apart from its header, as a GPUDirect edge's are
// (in device memory there; process memory here); counts the proxy's calls
// to make the network's writes visible, and checks each comes before the
// tail shows its slot.
class ApartFifo : public FifoMemory {
 public:
  explicit ApartFifo(size_t slot_bytes)
      : header_(kFifoDataOffset / 64), slots_(kSlots * (slot_bytes + kProxySlotPrefix) / 64) {
    FormatFifoHeader(header(), FifoGeometry{slot_bytes, kProxySlotPrefix, 0}, 0, SelfProcessId());
  }
  void* base() override { return header_.data(); }
  char* slots_apart() override { return reinterpret_cast<char*>(slots_.data()); }
  Status AfterNetworkWrite() override {
    if (header()->tail.value.load() != static_cast<uint64_t>(visible_calls.load())) early.store(true);
    ++visible_calls;
    return Status();
  }
  FifoHeader* header() { return reinterpret_cast<FifoHeader*>(header_.data()); }
  // Slot `k`'s data at `shift` (a kernel writes it there).
  char* Data(uint64_t k, uint32_t shift) {
    return slots_apart() + (k % kSlots) * header()->slot_stride + kProxySlotPrefix + shift;
  }
  std::atomic<int> visible_calls{0};
  std::atomic<bool> early{false};

 private:
  struct alignas(64) Line {
    char b[64];
  };
  std::vector<Line> header_, slots_;
};

// The proxy over a connection with slots apart on both sides, as a kernel
// drives them (data at a shift, the size word carrying it, the tail
// published with release; the head released by the receiver): each slot
// goes as its metadata and then its data, every size 0..slot arrives intact
// with its signature, and each received slot is made visible before its tail.
TEST_P(NetConformance, ProxyMovesSlotsApart) {
  constexpr size_t kSlotBytes = 4096;
  auto out = std::make_shared<ApartFifo>(kSlotBytes);
  auto in = std::make_shared<ApartFifo>(kSlotBytes);
  Proxies proxies;
  ASSERT_NO_FATAL_FAILURE(StartProxies(out, in, /*device_fed=*/true, &proxies));
  constexpr int kMessages = 300;
  auto size_of = [](int m) { return static_cast<size_t>(m * 37) % (kSlotBytes - 15); };
  auto shift_of = [](int m) { return static_cast<uint32_t>(m % 16); };
  std::atomic<bool> stuck{false};
  std::thread producer([&] {
    FifoHeader* h = out->header();
    for (int m = 0; m < kMessages; ++m) {
      const auto until = Clock::now() + std::chrono::seconds(10);
      while (m - h->head.value.load(std::memory_order_acquire) >= static_cast<uint64_t>(kSlots)) {
        if (Clock::now() > until) {
          stuck.store(true);
          return;
        }
        std::this_thread::yield();
      }
      char* data = out->Data(m, shift_of(m));
      for (size_t k = 0; k < size_of(m); ++k) data[k] = static_cast<char>(m + k);
      h->meta[m % kSlots].bytes = size_of(m) | (uint64_t{shift_of(m)} << kSlotShiftBit);
      h->meta[m % kSlots].sig.seq = static_cast<uint64_t>(m) + 1;
      h->tail.value.store(m + 1, std::memory_order_release);
      WakeProxy(h);
    }
  });
  FifoHeader* h = in->header();
  for (int m = 0; m < kMessages; ++m) {
    const auto until = Clock::now() + std::chrono::seconds(10);
    while (h->tail.value.load(std::memory_order_acquire) <= static_cast<uint64_t>(m)) {
      ASSERT_LT(Clock::now(), until) << "slot " << m << " never arrived";
      ASSERT_EQ(h->sender_aborted.load(), 0u) << h->sender_notice.text;
      std::this_thread::yield();
    }
    const uint64_t word = h->meta[m % kSlots].bytes;
    ASSERT_EQ(word & ((uint64_t{1} << kSlotShiftBit) - 1), size_of(m)) << m;
    ASSERT_EQ(word >> kSlotShiftBit, shift_of(m)) << m;
    ASSERT_EQ(h->meta[m % kSlots].sig.seq, static_cast<uint64_t>(m) + 1);
    const char* data = in->Data(m, shift_of(m));
    for (size_t k = 0; k < size_of(m); ++k) ASSERT_EQ(data[k], static_cast<char>(m + k)) << m << " " << k;
    h->head.value.store(m + 1, std::memory_order_release);
    WakeProxy(h);
  }
  producer.join();
  EXPECT_FALSE(stuck.load());
  EXPECT_EQ(in->visible_calls.load(), kMessages);
  EXPECT_FALSE(in->early.load()) << "a slot was published before the proxy made it visible";
  EXPECT_EQ(out->visible_calls.load(), 0);
}

// Idle edges with slots apart let their proxies sleep, even where the
// connection takes fewer requests than two per slot (the fake network's 8):
// an edge the connection holds back is no work.
TEST_P(NetConformance, IdleEdgesWithSlotsApartLetTheProxySleep) {
  auto out = std::make_shared<ApartFifo>(4096);
  auto in = std::make_shared<ApartFifo>(4096);
  Proxies proxies;
  ASSERT_NO_FATAL_FAILURE(StartProxies(out, in, /*device_fed=*/false, &proxies));
  for (ApartFifo* f : {out.get(), in.get()}) {
    // A proxy falls asleep once its spins and yields are spent: moments
    // here, seconds in the emulated machine of the verbs test (its 5 s
    // limit failed 1 run in 5 there).
    // The state seen counts: a sleeping proxy wakes now and then to look.
    const auto until = Clock::now() + std::chrono::seconds(60);
    bool slept = false;
    while (!(slept = f->header()->proxy_sleeping.load() == 1) && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    EXPECT_TRUE(slept) << (f == in.get() ? "receiving" : "sending") << " proxy";
  }
}

// Edges a kernel feeds: once a launch is marked (MarkDeviceLaunch, as the
// GPU engines do before enqueuing a kernel) the proxies do not sleep until
// the kernel marks it ended, since a kernel's posts cannot wake them; slots
// posted without a wake, as a kernel posts them, go through; once the
// launch is marked ended, both proxies fall asleep again.
TEST_P(NetConformance, AProxyStaysAwakeWhileAKernelRuns) {
  constexpr size_t kSlotBytes = 4096;
  auto out = std::make_shared<ApartFifo>(kSlotBytes);
  auto in = std::make_shared<ApartFifo>(kSlotBytes);
  Proxies proxies;
  ASSERT_NO_FATAL_FAILURE(StartProxies(out, in, /*device_fed=*/true, &proxies));
  // Whether the proxy was seen in state `want` (a sleeping proxy wakes now
  // and then to look around: the state seen counts, not a second look).
  auto await_sleeping = [](FifoHeader* h, uint32_t want) {
    const auto until = Clock::now() + std::chrono::seconds(60);  // as IdleEdgesWithSlotsApartLetTheProxySleep
    for (;;) {
      if (h->proxy_sleeping.load() == want) return true;
      if (Clock::now() >= until) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  };
  ASSERT_TRUE(await_sleeping(out->header(), 1));
  ASSERT_TRUE(await_sleeping(in->header(), 1));
  MarkDeviceLaunch(out->header(), 1);
  MarkDeviceLaunch(in->header(), 1);
  ASSERT_TRUE(await_sleeping(out->header(), 0));
  ASSERT_TRUE(await_sleeping(in->header(), 0));
  EXPECT_TRUE(DeviceLaunchRunning(out->header()));
  // 300 ms of a running kernel (far past the spins and yields before a
  // sleep): neither proxy declares a sleep, and slots posted without a
  // wake arrive.
  FifoHeader* src = out->header();
  FifoHeader* dst = in->header();
  for (int m = 0; m < 30; ++m) {
    char* data = out->Data(m, 0);
    for (size_t k = 0; k < 64; ++k) data[k] = static_cast<char>(m + k);
    src->meta[m % kSlots].bytes = 64;
    src->meta[m % kSlots].sig.seq = static_cast<uint64_t>(m) + 1;
    src->tail.value.store(m + 1, std::memory_order_release);  // no WakeProxy: a kernel cannot
    const auto until = Clock::now() + std::chrono::seconds(10);
    while (dst->tail.value.load(std::memory_order_acquire) <= static_cast<uint64_t>(m)) {
      ASSERT_LT(Clock::now(), until) << "slot " << m << " never arrived";
      std::this_thread::yield();
    }
    ASSERT_EQ(in->Data(m, 0)[63], static_cast<char>(m + 63));
    dst->head.value.store(m + 1, std::memory_order_release);  // released, no wake either
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_EQ(src->proxy_sleeping.load(), 0u) << "the sending proxy slept while a kernel ran, slot " << m;
    ASSERT_EQ(dst->proxy_sleeping.load(), 0u) << "the receiving proxy slept while a kernel ran, slot " << m;
  }
  __atomic_store_n(&src->device_ended, uint64_t{1}, __ATOMIC_RELEASE);  // as the kernel marks it
  __atomic_store_n(&dst->device_ended, uint64_t{1}, __ATOMIC_RELEASE);
  EXPECT_FALSE(DeviceLaunchRunning(src));
  EXPECT_TRUE(await_sleeping(src, 1)) << "sending proxy";
  EXPECT_TRUE(await_sleeping(dst, 1)) << "receiving proxy";
}

// A receiving proxy with slots apart, fed by hand: metadata that says more
// than the data that follows is an error naming the sender, in the FIFO.
TEST_P(NetConformance, SlotsApartRefuseMetadataThatLies) {
  constexpr size_t kSlotBytes = 4096;
  std::unique_ptr<SendConnection> send;
  std::unique_ptr<RecvConnection> recv;
  Connect(&send, &recv);
  auto in = std::make_shared<ApartFifo>(kSlotBytes);
  ProxyOptions po;
  po.self_rank = 0;
  Proxy receiver_proxy(po);
  ASSERT_TRUE(receiver_proxy.AddReceiver(in, std::move(recv), 0).ok());
  ASSERT_TRUE(receiver_proxy.Start().ok());
  std::vector<char> buf(kSlotBytes + 64, 7);
  SlotMeta meta{};
  meta.bytes = 100;  // and only 50 follow
  auto mem = Reg(*send, buf.data(), buf.size());
  std::memcpy(buf.data(), &meta, sizeof(meta));
  auto r1 = send->Isend(buf.data(), sizeof(meta), mem.get());
  ASSERT_TRUE(r1.ok() && *r1 != nullptr);
  size_t bytes = 0;
  ASSERT_TRUE(Finish(*send, *r1, &bytes).ok());
  auto r2 = send->Isend(buf.data() + 64, 50, mem.get());
  ASSERT_TRUE(r2.ok() && *r2 != nullptr);
  ASSERT_TRUE(Finish(*send, *r2, &bytes).ok());
  FifoHeader* h = in->header();
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (h->sender_aborted.load() == 0 && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_NE(h->sender_aborted.load(), 0u);
  EXPECT_EQ(h->tail.value.load(), 0u);
  EXPECT_NE(std::string(h->sender_notice.text).find("rank 1 sent message 0"), std::string::npos)
      << h->sender_notice.text;
  EXPECT_EQ(in->visible_calls.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Nets, NetConformance,
                         ::testing::Values(Factory{"fake", [] { return MakeFakeNet(); }}, Factory{"socket", MakeTcp},
                                           Factory{"ib", MakeIb}),
                         [](const ::testing::TestParamInfo<Factory>& info) { return std::string(info.param.name); });

// Sockets only: garbage written into a data stream (not a frame) is an error
// naming the sender, not a crash or a read out of bounds.
TEST(SocketNet, GarbageOnADataStreamIsAnError) {
  auto net = MakeTcp();
  ASSERT_NE(net, nullptr);
  NetHandle handle;
  auto listener = net->Listen(0, ConnectOptions{0, 1, 5}, &handle);
  ASSERT_TRUE(listener.ok());
  std::unique_ptr<RecvConnection> recv;
  std::thread acceptor([&] {
    auto r = (*listener)->Accept(1, DeadlineAfterMs(5000));
    if (r.ok()) recv = std::move(r).value();
  });
  auto send = net->Connect(0, handle, ConnectOptions{1, 0, 5}, DeadlineAfterMs(5000));
  acceptor.join();
  ASSERT_TRUE(send.ok() && recv != nullptr);
  std::vector<int> fds;
  std::vector<short> events;
  (*send)->PollFds(&fds, &events);
  ASSERT_FALSE(fds.empty());
  std::mt19937 rng(1);
  std::vector<char> garbage(4096);
  for (char& c : garbage) c = static_cast<char>(rng());
  for (int fd : fds) ASSERT_EQ(write(fd, garbage.data(), garbage.size()), static_cast<ssize_t>(garbage.size()));
  std::vector<char> buffer(1 << 20);
  auto r = recv->Irecv(buffer.data(), buffer.size(), nullptr);
  ASSERT_TRUE(r.ok() && *r != nullptr);
  Status st;
  for (int i = 0; i < 1000 && st.ok(); ++i) {
    bool done = false;
    size_t bytes = 0;
    st = recv->Test(*r, &done, &bytes);
    if (done) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(st.code(), base::Code::kRemoteError) << st.ToString();
  EXPECT_NE(st.message().find("not a Ringo frame"), std::string::npos) << st.ToString();
  EXPECT_EQ(st.origin(), 1);
}

}  // namespace
}  // namespace ringo::transport::net
