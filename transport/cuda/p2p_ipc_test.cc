// The cross-process p2p ring without a GPU: the exchange record's checks
// (what a rank accepts from its neighbours), the same-process test that picks
// plain pointers over IPC handles, the connector stride, argument checks, and
// that ranks with no usable GPU all fail promptly instead of waiting on each
// other; the count of users that lets ranks of one process share a
// connector allocation without waiting for each other at destruction. The
// IPC path itself needs a GPU: tests/gpu_process_test.cc.
#include "transport/cuda/p2p_ipc.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/cuda.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/cuda/internal/ipc_wire.h"
#include "transport/cuda/internal/shared_connectors.h"

namespace ringo::transport {
namespace {

using internal::IpcRecord;

// Two ranks that are threads of one process, each the other's ring
// predecessor: each registers its own allocation and retains the other's.
// Destroying them one after the other (either order) frees each allocation
// exactly once, when its last user lets go, and nobody waits.
TEST(SharedConnectors, TheLastUserFreesWithoutWaiting) {
  for (bool a_first : {true, false}) {
    std::vector<std::pair<void*, int>> freed;
    internal::SharedConnectors shared([&](void* p, int device) { freed.emplace_back(p, device); });
    int a_mem = 0, b_mem = 0;
    shared.Register(&a_mem, 0);
    shared.Register(&b_mem, 1);
    EXPECT_TRUE(shared.Retain(&b_mem));   // rank A sends into B's connectors
    EXPECT_TRUE(shared.Retain(&a_mem));   // and B into A's
    EXPECT_FALSE(shared.Retain(&freed));  // not a registered allocation
    auto destroy = [&](void* own, void* peer) {
      shared.Release(peer);  // done writing the successor's memory
      shared.Release(own);   // no wait for the predecessor
    };
    if (a_first) {
      destroy(&a_mem, &b_mem);
      EXPECT_TRUE(freed.empty());  // each still has its other user
      destroy(&b_mem, &a_mem);
    } else {
      destroy(&b_mem, &a_mem);
      EXPECT_TRUE(freed.empty());
      destroy(&a_mem, &b_mem);
    }
    ASSERT_EQ(freed.size(), 2u);
    EXPECT_NE(freed[0].first, freed[1].first);
    for (const auto& [p, device] : freed) EXPECT_EQ(device, p == &a_mem ? 0 : 1);
    EXPECT_EQ(shared.size(), 0u);
    EXPECT_FALSE(shared.Release(&a_mem));  // gone: a second release does nothing
  }
  // An allocation nobody else took is freed by its owner at once.
  int own = 0;
  int frees = 0;
  internal::SharedConnectors alone([&](void*, int) { ++frees; });
  alone.Register(&own, 0);
  EXPECT_TRUE(alone.Release(&own));
  EXPECT_EQ(frees, 1);
}

IpcRecord GoodRecord(int rank) {
  IpcRecord r = internal::FailedIpcRecord(rank);
  r.ok = 1;
  r.nchannels = 2;
  r.slot_bytes = 4096;
  r.ll_slot_bytes = 1024;
  r.stride = P2pIpcStride(4096, 1024);
  r.device_pointer = 0x7f0000000000ull + static_cast<uint64_t>(rank) * 0x100000;
  std::strcpy(r.bus_id, "00000000:65:00.0");
  r.handle[0] = static_cast<unsigned char>(rank + 1);
  return r;
}

void ExpectRefused(const IpcRecord& theirs, int rank, base::Code code, const std::string& text) {
  const base::Status st = internal::CheckIpcRecord(theirs, rank, GoodRecord(0));
  EXPECT_EQ(st.code(), code) << st.ToString();
  EXPECT_NE(st.message().find(text), std::string::npos) << st.message();
}

TEST(P2pIpcRecord, AcceptsANeighbourWithTheSameGeometry) {
  EXPECT_TRUE(internal::CheckIpcRecord(GoodRecord(3), 3, GoodRecord(0)).ok());
  EXPECT_EQ(internal::BusId(GoodRecord(1)), "00000000:65:00.0");
}

TEST(P2pIpcRecord, NamesARankThatFailedBeforeTheExchange) {
  ExpectRefused(internal::FailedIpcRecord(2), 2, base::Code::kRemoteError,
                "rank 2 could not allocate or export its GPU connectors");
}

TEST(P2pIpcRecord, RefusesMalformedOrMismatchedRecords) {
  IpcRecord r = GoodRecord(1);
  r.magic ^= 1;
  ExpectRefused(r, 1, base::Code::kInternal, "malformed");
  r = GoodRecord(1);
  r.version = internal::kIpcRecordVersion + 1;
  ExpectRefused(r, 1, base::Code::kInternal, "malformed");
  ExpectRefused(GoodRecord(1), 2, base::Code::kInternal, "names rank 1");
  r = GoodRecord(1);
  r.nchannels = 3;
  ExpectRefused(r, 1, base::Code::kInternal, "another geometry (3 channels");
  r = GoodRecord(1);
  r.ll_slot_bytes = 2048;
  ExpectRefused(r, 1, base::Code::kInternal, "another geometry");
  r = GoodRecord(1);
  std::memset(r.bus_id, 'x', sizeof(r.bus_id));
  ExpectRefused(r, 1, base::Code::kInternal, "unterminated bus id");
  EXPECT_EQ(internal::BusId(r).size(), internal::kBusIdBytes);
  r = GoodRecord(1);
  r.device_pointer = 0;
  ExpectRefused(r, 1, base::Code::kInternal, "null allocation");
}

TEST(P2pIpcRecord, SameProcessNeedsPidAndNonce) {
  const IpcRecord a = GoodRecord(0);
  IpcRecord b = GoodRecord(1);
  EXPECT_TRUE(internal::SameProcess(a, b));  // both made here
  b.pid += 1;                                // a forked child keeps the nonce
  EXPECT_FALSE(internal::SameProcess(a, b));
  b = GoodRecord(1);
  b.process_nonce ^= 1;  // another process that reuses the pid
  EXPECT_FALSE(internal::SameProcess(a, b));
  EXPECT_EQ(internal::ProcessNonce(), internal::ProcessNonce());
}

TEST(P2pIpcRing, StrideKeepsEachConnectorOnItsOwnPages) {
  for (uint64_t slot : {16ull, 1024ull, 4096ull, 524288ull}) {
    const uint64_t stride = P2pIpcStride(slot, 1024);
    EXPECT_EQ(stride % 4096, 0u);
    EXPECT_GE(stride, P2pFifoBytes(slot, 1024));
    EXPECT_LT(stride - P2pFifoBytes(slot, 1024), 4096u);
  }
}

// Two ranks (threads) through a real bootstrap where no GPU is usable: both
// fail at once with an error, neither waits for its timeout.
TEST(P2pIpcRing, WithoutAGpuEveryRankFailsPromptly) {
  if (base::ProbeCuda().device_count > 0)
    GTEST_SKIP() << "a GPU is visible: the no-GPU path is not reachable";
  constexpr int64_t kTimeoutMs = 20000;
  auto id = CreateUniqueId("", "lo", kTimeoutMs);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  std::vector<base::Status> out(2);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto boot = Bootstrap::Connect(*id, r, 2, kTimeoutMs);
      if (!boot.ok()) {
        out[r] = boot.status();
        return;
      }
      P2pIpcSpec spec;
      spec.rank = r;
      spec.nranks = 2;
      spec.order = {0, 1};
      spec.nchannels = 2;
      spec.slot_bytes = 4096;
      spec.ll_slot_bytes = 1024;
      spec.timeout_ms = kTimeoutMs;
      out[r] = P2pIpcRing::Connect(**boot, spec).status();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) EXPECT_FALSE(out[r].ok()) << "rank " << r;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(P2pIpcRing, RejectsBadSpecsBeforeTouchingTheBootstrap) {
  auto id = CreateUniqueId("", "lo", 5000);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  auto boot = Bootstrap::Connect(*id, 0, 1, 5000);
  ASSERT_TRUE(boot.ok()) << boot.status().ToString();
  P2pIpcSpec spec;
  spec.rank = 0;
  spec.nranks = 1;
  spec.order = {0};
  spec.slot_bytes = 4096;
  spec.ll_slot_bytes = 1024;
  EXPECT_EQ(P2pIpcRing::Connect(**boot, spec).status().code(),
            base::Code::kInvalidArgument);  // one rank
  spec.nranks = 2;
  spec.order = {0, 1};
  EXPECT_EQ(P2pIpcRing::Connect(**boot, spec).status().code(),
            base::Code::kInvalidArgument);  // size differs
  spec.slot_bytes = 100;
  EXPECT_EQ(P2pIpcRing::Connect(**boot, spec).status().code(), base::Code::kInvalidArgument);
}

}  // namespace
}  // namespace ringo::transport
