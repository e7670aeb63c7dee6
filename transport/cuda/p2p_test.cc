// P2pRing: argument checks (everywhere) and, where a GPU is visible, the
// layout and zeroing of the connectors and the abort flags.
#include "transport/cuda/p2p.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "base/cuda.h"
#include "base/gpu_test.h"

namespace ringo::transport {
namespace {

P2pRingSpec Spec(int nranks) {
  P2pRingSpec s;
  s.nranks = nranks;
  for (int r = 0; r < nranks; ++r) {
    s.order.push_back(nranks - 1 - r);
    s.devices.push_back(0);
  }
  s.nchannels = 2;
  s.slot_bytes = 4096;
  s.ll_slot_bytes = 1024;
  return s;
}

TEST(P2pRing, RejectsBadSpecs) {
  EXPECT_EQ(P2pRing::Create(Spec(1)).status().code(), base::Code::kInvalidArgument);
  P2pRingSpec s = Spec(2);
  s.slot_bytes = 100;
  EXPECT_EQ(P2pRing::Create(s).status().code(), base::Code::kInvalidArgument);
  s = Spec(2);
  s.devices.pop_back();
  EXPECT_EQ(P2pRing::Create(s).status().code(), base::Code::kInvalidArgument);
  EXPECT_EQ(P2pFifoBytes(4096, 1024), kFifoDataOffset + 8 * (4096 + 1024));
}

TEST(P2pRing, WithoutCudaToolkitSaysSo) {
  if (base::CudaRuntimeBuilt()) GTEST_SKIP() << "built with the CUDA toolkit";
  auto r = P2pRing::Create(Spec(2));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("without the CUDA toolkit"), std::string::npos);
}

TEST(P2pRing, AllocatesZeroedConnectorsOnOneGpu) {
  RINGO_SKIP_WITHOUT_GPU(base::ProbeCuda().device_count > 0, "no CUDA device visible ("
                                                                 << base::ProbeCuda().reason
                                                                 << "): p2p allocation not tested");
  auto made = P2pRing::Create(Spec(3));
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  P2pRing& ring = **made;
  for (int pos = 0; pos < 3; ++pos) {
    for (int c = 0; c < 2; ++c) {
      const P2pFifo& f = ring.Edge(pos, c);
      EXPECT_EQ(f.device, 0);
      EXPECT_EQ(base::PointerDevice(f.header), 0);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(f.header) % 4096, 0u);
      EXPECT_EQ(f.geometry.LLOffset() - f.geometry.SlotOffset(0), 8u * 4096);
      EXPECT_EQ(*f.abort_word, 0u);  // mapped host memory: readable from the host
    }
  }
  ring.RaiseAbort(1);
  EXPECT_EQ(*ring.Edge(1, 0).abort_word, 1u);
  EXPECT_EQ(*ring.Edge(0, 1).abort_word, 1u);
  EXPECT_EQ(*ring.Edge(2, 0).abort_word, 0u);
}

}  // namespace
}  // namespace ringo::transport
