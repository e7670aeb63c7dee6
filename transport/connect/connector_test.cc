// The connector: ranks as threads over an exchange in memory, each told
// what the others are (records made up so that the same threads look like
// threads of one process, processes of one host, processes with their own
// /dev/shm, or hosts of their own), connect a ring of two lanes and a
// point-to-point pair, and move slots through the FIFOs they got: process
// memory, shared memory and the network (loopback TCP through the proxy).
// A peer that never answers is named at the timeout; ranks that disagree on
// the geometry fail naming each other; a GPU FIFO without a GPU fails on
// both ends at once.
#include "transport/connect/connector.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/config.h"
#include "gtest/gtest.h"
#include "transport/bootstrap/exchange.h"
#include "transport/fifo/fifo.h"

namespace ringo::transport {
namespace {

constexpr uint64_t kSlotBytes = 1024;

enum class Layout { kThreads, kProcesses, kDomains, kHosts };

// Rank r's record, as the layout says the ranks are placed.
PeerInfo Record(int r, Layout layout) {
  PeerInfo p = LocalPeerInfo(r, -1);
  if (layout != Layout::kThreads) p.pid = 100000 + r;  // another process of this host
  if (layout == Layout::kHosts) p.host_hash ^= 0x1000 * (r + 1);  // another host
  return p;
}

struct Rank {
  std::unique_ptr<Exchange> exchange;
  std::unique_ptr<Connector> connector;
};

// `gpudirect`: every rank's GPUDirect offer (empty: none).
std::vector<Rank> MakeRanks(int n, Layout layout, int64_t timeout_ms = 20000, uint64_t tag = 0, int device = -1,
                            std::vector<uint8_t> gpudirect = {}) {
  static std::atomic<uint64_t> tags{0x5eed0000};
  if (tag == 0) tag = ++tags;
  auto fabric = std::make_shared<LocalFabric>(n);
  std::vector<int> members(n);
  std::iota(members.begin(), members.end(), 0);
  std::vector<Rank> ranks(n);
  for (int r = 0; r < n; ++r) {
    ConnectorSpec spec;
    spec.rank = r;
    spec.nranks = n;
    spec.tag = tag;
    for (int q = 0; q < n; ++q) spec.peers.push_back(Record(q, layout));
    if (layout == Layout::kDomains) {
      for (int q = 0; q < n; ++q) spec.domains.push_back(q);  // nobody opens anyone's /dev/shm
    }
    spec.timeout_ms = timeout_ms;
    spec.device = device;
    spec.gpudirect = gpudirect;
    spec.gpudirect_host_stand_in = !gpudirect.empty();
    spec.proxy_spin_count = 100;
    spec.proxy_yield_count = 100;
    ranks[r].exchange =
        std::make_unique<FabricExchange>(LocalFabric::View(fabric, r), 0, members, timeout_ms);
    ranks[r].connector = std::make_unique<Connector>(ranks[r].exchange.get(), spec, base::GetConfig());
  }
  return ranks;
}

WaitContext Wait(int rank) {
  WaitContext w;
  w.timeout_ms = 20000;
  w.self_rank = rank;
  return w;
}

// Each rank sends `count` slots of its rank and lane to its successor on
// every lane of a ring, and checks what its predecessor sent.
// `gpudirect`: the ranks' offers (host FIFOs with slots apart, the test
// stand-in of GPUDirect edges).
void RingRoundTrip(Layout layout, Medium expect, std::vector<uint8_t> gpudirect = {}) {
  const int n = 3;
  const int lanes = 2;
  std::vector<Rank> ranks = MakeRanks(n, layout, 20000, 0, -1, gpudirect);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      const int next = (r + 1) % n;
      const int prev = (r + n - 1) % n;
      std::vector<PairKey> sends, recvs;
      for (int c = 0; c < lanes; ++c) {
        sends.push_back({next, c});
        recvs.push_back({prev, c});
      }
      auto links = ranks[r].connector->Connect(sends, recvs, FifoGeometry{kSlotBytes, 0, 0}, false, nullptr);
      if (!links.ok()) {
        errors[r] = links.status().ToString();
        return;
      }
      for (const FifoLink& l : *links) {
        if (l.medium != expect) errors[r] = std::string("medium ") + MediumName(l.medium);
        if ((l.slots != nullptr) != !gpudirect.empty()) errors[r] = "slots apart: not as offered";
      }
      for (int c = 0; c < lanes && errors[r].empty(); ++c) {
        auto send = MakeSendEnd((*links)[c], r);
        auto recv = MakeRecvEnd((*links)[lanes + c], r);
        for (int k = 0; k < 20 && errors[r].empty(); ++k) {
          auto slot = send->Acquire(Wait(r), k);
          if (!slot.ok()) {
            errors[r] = slot.status().ToString();
            break;
          }
          const uint64_t word = (static_cast<uint64_t>(r) << 32) | (c << 16) | k;
          std::memcpy(*slot, &word, sizeof(word));
          send->Post(sizeof(word));
          size_t bytes = 0;
          auto in = recv->Acquire(Wait(r), k, &bytes);
          if (!in.ok()) {
            errors[r] = in.status().ToString();
            break;
          }
          uint64_t got = 0;
          std::memcpy(&got, *in, sizeof(got));
          const uint64_t want = (static_cast<uint64_t>(prev) << 32) | (c << 16) | k;
          if (bytes != sizeof(word) || got != want) errors[r] = "lane " + std::to_string(c) + ": wrong slot";
          recv->Release();
        }
      }
      ranks[r].connector->Shutdown(/*drain=*/true, 5000);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(Connector, ThreadsShareProcessMemory) { RingRoundTrip(Layout::kThreads, Medium::kProcess); }
TEST(Connector, ProcessesShareMemory) { RingRoundTrip(Layout::kProcesses, Medium::kShm); }
TEST(Connector, ProcessesWithoutSharedMemoryTakeTheNetwork) { RingRoundTrip(Layout::kDomains, Medium::kNet); }
TEST(Connector, HostsTakeTheNetwork) { RingRoundTrip(Layout::kHosts, Medium::kNet); }
// Host ends over FIFOs whose slots are apart from their headers (as a
// GPUDirect edge's are), metadata and data going as two messages.
TEST(Connector, HostEndsWorkOnSlotsApart) { RingRoundTrip(Layout::kHosts, Medium::kNet, {1, 1, 1}); }

TEST(Connector, ChoosesTheSameMediumOnBothEnds) {
  for (Layout layout : {Layout::kThreads, Layout::kProcesses, Layout::kDomains, Layout::kHosts}) {
    std::vector<Rank> ranks = MakeRanks(2, layout);
    for (bool gpu : {false, true}) {
      EXPECT_EQ(ranks[0].connector->ChooseMedium(1, gpu), ranks[1].connector->ChooseMedium(0, gpu));
    }
  }
  std::vector<Rank> ranks = MakeRanks(2, Layout::kProcesses);
  EXPECT_EQ(ranks[0].connector->ChooseMedium(1, true), Medium::kCudaIpc);
  EXPECT_EQ(MakeRanks(2, Layout::kThreads)[0].connector->ChooseMedium(1, true), Medium::kCudaPeer);
}

// A sender whose receiver never takes part: the wait ends at the timeout,
// naming the receiver.
TEST(Connector, APeerThatNeverConnectsIsNamed) {
  std::vector<Rank> ranks = MakeRanks(2, Layout::kProcesses, /*timeout_ms=*/300);
  auto links = ranks[0].connector->Connect({{1, kP2pLane}}, {}, FifoGeometry{kSlotBytes, 0, 0}, false, nullptr);
  ASSERT_FALSE(links.ok());
  EXPECT_EQ(links.status().code(), base::Code::kTimeout) << links.status().ToString();
  EXPECT_EQ(links.status().origin(), 1);
  EXPECT_NE(links.status().message().find("rank 1"), std::string::npos) << links.status().ToString();
}

// Ranks that disagree on the slot size both fail, each naming the other's side.
TEST(Connector, MismatchedGeometryFailsBothEnds) {
  std::vector<Rank> ranks = MakeRanks(2, Layout::kProcesses, 5000);
  base::Status st0, st1;
  std::thread t([&] {
    st1 = ranks[1].connector->Connect({}, {{0, 0}}, FifoGeometry{2 * kSlotBytes, 0, 0}, false, nullptr).status();
  });
  st0 = ranks[0].connector->Connect({{1, 0}}, {}, FifoGeometry{kSlotBytes, 0, 0}, false, nullptr).status();
  t.join();
  EXPECT_FALSE(st0.ok());
  EXPECT_NE(st0.message().find("slots"), std::string::npos) << st0.ToString();
  EXPECT_FALSE(st1.ok());
  EXPECT_EQ(st1.origin(), 0) << st1.ToString();
}

// Rank 0 sends to rank 1 on one GPU FIFO (lane 0); each end's outcome.
std::pair<base::Status, base::Status> ConnectGpuPair(std::vector<Rank>& ranks) {
  base::Status st0, st1;
  std::thread t([&] {
    st1 = ranks[1].connector->Connect({}, {{0, 0}}, FifoGeometry{kSlotBytes, 0, 1024}, true, nullptr).status();
  });
  st0 = ranks[0].connector->Connect({{1, 0}}, {}, FifoGeometry{kSlotBytes, 0, 1024}, true, nullptr).status();
  t.join();
  return {st0, st1};
}

// GPU FIFOs where no GPU is usable: both ends fail at once, not at the timeout.
TEST(Connector, GpuFifosWithoutAGpuFailPromptly) {
  std::vector<Rank> ranks = MakeRanks(2, Layout::kProcesses, 20000);
  const auto start = std::chrono::steady_clock::now();
  const auto [st0, st1] = ConnectGpuPair(ranks);
  EXPECT_FALSE(st0.ok());
  EXPECT_FALSE(st1.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// GPU FIFOs between hosts: pinned host memory mapped into the rank's GPU.
// Where no GPU is usable both ends fail at once, naming CUDA.
TEST(Connector, GpuFifosAcrossHostsNeedCuda) {
  for (int device : {-1, 0}) {
    std::vector<Rank> ranks = MakeRanks(2, Layout::kHosts, 20000, 0, device);
    EXPECT_EQ(ranks[0].connector->ChooseMedium(1, true), Medium::kNet);
    const auto start = std::chrono::steady_clock::now();
    const auto [st0, st1] = ConnectGpuPair(ranks);
    EXPECT_FALSE(st0.ok());
    EXPECT_FALSE(st1.ok());
    const std::string why = st0.message() + " / " + st1.message();
    EXPECT_TRUE(why.find("CUDA") != std::string::npos || why.find("cuda") != std::string::npos) << why;
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  }
}

// What a kernel does on a FIFO the proxy serves (kernels/cuda/internal/
// primitives.cuh), done here on the CPU: its data at a shift within the
// slot, the size word carrying the shift, no posted mark, the tail
// published with release; the receiver finds slots by the tail alone and
// releases them by the head. Over the network between hosts the proxy must
// move exactly the slot's span.
// Slot k's data: after the header, or where the slots are kept apart.
char* SlotData(const FifoLink& l, uint64_t k) {
  const int i = static_cast<int>(k % kSlots);
  if (l.slots != nullptr) return static_cast<char*>(l.slots) + i * l.geometry.stride() + l.geometry.slot_prefix;
  return reinterpret_cast<char*>(l.header) + l.geometry.SlotOffset(i);
}

bool KernelPost(const FifoLink& l, uint64_t k, const std::vector<uint8_t>& data, uint32_t shift) {
  FifoHeader* h = l.header;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (k - h->head.value.load(std::memory_order_acquire) >= static_cast<uint64_t>(kSlots)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  char* slot = SlotData(l, k);
  std::memcpy(slot + shift, data.data(), data.size());
  h->meta[k % kSlots].bytes = data.size() | (static_cast<uint64_t>(shift) << kSlotShiftBit);
  h->tail.value.store(k + 1, std::memory_order_release);
  WakeProxy(h);  // as the GPU engine does when it enqueues the kernel
  return true;
}

std::string KernelTake(const FifoLink& l, uint64_t k, std::vector<uint8_t>* out, uint32_t* shift) {
  FifoHeader* h = l.header;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (h->tail.value.load(std::memory_order_acquire) <= k) {
    if (std::chrono::steady_clock::now() > deadline) return "slot " + std::to_string(k) + " never came";
    std::this_thread::yield();
  }
  const uint64_t word = h->meta[k % kSlots].bytes;
  const size_t n = word & ((uint64_t{1} << kSlotShiftBit) - 1);
  *shift = static_cast<uint32_t>(word >> kSlotShiftBit) & 15u;
  const char* slot = SlotData(l, k);
  out->assign(slot + *shift, slot + *shift + n);
  h->head.value.store(k + 1, std::memory_order_release);
  return "";
}

// Three hosts in a ring, kernel-style slots on every edge; with `offers`,
// the edges whose two ends offer GPUDirect keep their slots apart (the
// layout of device slots, in process memory here) and go as metadata and
// data messages, the others as one.
void KernelStyleRing(std::vector<uint8_t> offers) {
  const int n = 3;
  std::vector<Rank> ranks = MakeRanks(n, Layout::kHosts, 20000, 0, -1, offers);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      const int next = (r + 1) % n, prev = (r + n - 1) % n;
      auto links = ranks[r].connector->Connect({{next, 0}}, {{prev, 0}}, FifoGeometry{kSlotBytes, 0, 0}, false, nullptr);
      if (!links.ok()) {
        errors[r] = links.status().ToString();
        return;
      }
      const FifoLink& out = (*links)[0];
      const FifoLink& in = (*links)[1];
      if (out.medium != Medium::kNet || out.geometry.slot_prefix == 0 || out.geometry.ll_slot_bytes != 0) {
        errors[r] = "not a proxy FIFO of Simple slots";
        return;
      }
      auto offered = [&](int q) { return !offers.empty() && offers[q] != 0; };
      if ((out.slots != nullptr) != (offered(r) && offered(next)) ||
          (in.slots != nullptr) != (offered(r) && offered(prev))) {
        errors[r] = "slots apart where both ends do not offer GPUDirect, or not apart where they do";
        return;
      }
      std::string send_error;
      std::thread sender([&] {
        for (uint64_t k = 0; k < 40 && send_error.empty(); ++k) {
          const uint32_t shift = static_cast<uint32_t>(k % 16);
          const size_t bytes = k == 5 ? 0 : (k * 37) % (kSlotBytes - 15);  // up to the slot less the shift
          std::vector<uint8_t> data(bytes);
          for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(r * 7 + k + i);
          if (!KernelPost(out, k, data, shift)) send_error = "slot " + std::to_string(k) + ": no room for 20 s";
        }
      });
      for (uint64_t k = 0; k < 40 && errors[r].empty(); ++k) {
        std::vector<uint8_t> got;
        uint32_t shift = 99;
        errors[r] = KernelTake(in, k, &got, &shift);
        const size_t bytes = k == 5 ? 0 : (k * 37) % (kSlotBytes - 15);
        if (!errors[r].empty()) break;
        if (shift != k % 16 || got.size() != bytes) {
          errors[r] = "slot " + std::to_string(k) + ": " + std::to_string(got.size()) + " bytes at shift " +
                      std::to_string(shift);
        }
        for (size_t i = 0; i < got.size() && errors[r].empty(); ++i) {
          if (got[i] != static_cast<uint8_t>(prev * 7 + k + i)) errors[r] = "slot " + std::to_string(k) + " byte wrong";
        }
      }
      sender.join();
      if (errors[r].empty()) errors[r] = send_error;
      ranks[r].connector->Shutdown(/*drain=*/true, 5000);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(Connector, KernelStyleSlotsCrossHosts) { KernelStyleRing({}); }

// Ranks 0 and 1 offer GPUDirect, rank 2 does not: the edge 0 -> 1 keeps its
// slots apart on both sides, 1 -> 2 and 2 -> 0 stage as before; one ring.
TEST(Connector, KernelStyleSlotsApartWhereBothEndsOfferGpuDirect) { KernelStyleRing({1, 1, 0}); }

// Memory domains among threads of one process: one domain.
TEST(Connector, MemoryDomainsOfOneProcess) {
  const int n = 3;
  auto fabric = std::make_shared<LocalFabric>(n);
  std::vector<int> members(n);
  std::iota(members.begin(), members.end(), 0);
  std::vector<std::vector<int>> domains(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      FabricExchange ex(LocalFabric::View(fabric, r), 0, members, 10000);
      std::vector<PeerInfo> peers;
      for (int q = 0; q < n; ++q) peers.push_back(LocalPeerInfo(q, -1));
      auto d = MemoryDomains(ex, 0x77, peers);
      if (d.ok()) domains[r] = *d;
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(domains[r], std::vector<int>(n, 0)) << "rank " << r;
}

}  // namespace
}  // namespace ringo::transport
