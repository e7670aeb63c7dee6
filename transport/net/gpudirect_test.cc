// GPUDirect RDMA's verdict from faked facts: available by either route only
// with verbs and a GPU that supports it, offered only where
// RINGO_NET_GPUDIRECT=1 asks for it, and the line saying which piece is
// missing; an edge's choice from its two ends' offers; the module probe
// against a faked /sys/module.
#include "transport/net/gpudirect.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace ringo::transport::net {
namespace {

GpuDirectFacts All() {
  GpuDirectFacts f;
  f.verbs = f.gpu_rdma = f.gpu_visible = f.gpu_dmabuf = f.verbs_dmabuf = f.peermem = true;
  return f;
}

TEST(GpuDirect, AvailableByEitherRouteUsedOnlyWhenAsked) {
  GpuDirectFacts f = All();
  GpuDirectVerdict v = JudgeGpuDirect(f, /*wanted=*/false);
  EXPECT_TRUE(v.available);
  EXPECT_FALSE(v.used);
  EXPECT_NE(v.text.find("available (dma-buf"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("not used (RINGO_NET_GPUDIRECT=0)"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("pinned host memory"), std::string::npos) << v.text;
  v = JudgeGpuDirect(f, /*wanted=*/true);
  EXPECT_TRUE(v.used);
  EXPECT_NE(v.text.find("offered (RINGO_NET_GPUDIRECT=1)"), std::string::npos) << v.text;
  f.gpu_dmabuf = false;  // the peermem route alone
  v = JudgeGpuDirect(f, true);
  EXPECT_TRUE(v.available);
  EXPECT_TRUE(v.used);
  EXPECT_NE(v.text.find("available (nvidia_peermem"), std::string::npos) << v.text;
  f.peermem = false;
  v = JudgeGpuDirect(f, true);
  EXPECT_FALSE(v.available);
  EXPECT_FALSE(v.used);  // asked for, but a piece is missing: staged, and the line says why
  EXPECT_NE(v.text.find("GPU dma-buf no"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("though RINGO_NET_GPUDIRECT=1 asks for it"), std::string::npos) << v.text;
}

TEST(GpuDirect, NeedsVerbsAndTheGpu) {
  GpuDirectFacts f = All();
  f.verbs = false;  // sockets: no NIC reads GPU memory
  GpuDirectVerdict v = JudgeGpuDirect(f, true);
  EXPECT_FALSE(v.available);
  EXPECT_FALSE(v.used);
  EXPECT_NE(v.text.find("not available (verbs no"), std::string::npos) << v.text;
  f = All();
  f.gpu_rdma = false;
  EXPECT_FALSE(JudgeGpuDirect(f, true).used);
  f = All();
  f.gpu_visible = false;  // the NIC's writes could not be made visible to the kernels
  v = JudgeGpuDirect(f, true);
  EXPECT_FALSE(v.used);
  EXPECT_NE(v.text.find("GPU write ordering or flush no"), std::string::npos) << v.text;
  f = All();
  f.verbs_dmabuf = false;  // dma-buf needs both ends; peermem still there
  EXPECT_TRUE(JudgeGpuDirect(f, true).used);
  f.peermem = false;
  EXPECT_FALSE(JudgeGpuDirect(f, true).used);
}

// An edge keeps its slots in device memory only where both of its ends
// offer GPUDirect and it goes over verbs; every combination, both ways
// round (the two ends must agree).
TEST(GpuDirect, AnEdgeTakesItWhereBothEndsOfferItOverVerbs) {
  for (bool gpu : {false, true}) {
    for (bool stand_in : {false, true}) {
      for (NetKind kind : {NetKind::kSocket, NetKind::kIb}) {
        for (int offers = 0; offers < 4; ++offers) {
          const bool mine = (offers & 1) != 0, theirs = (offers & 2) != 0;
          // Host FIFOs only for a test's stand-in, on any transport.
          const bool want = mine && theirs && (gpu ? kind == NetKind::kIb : stand_in);
          EXPECT_EQ(EdgeSlotsApart(gpu, kind, mine, theirs, stand_in), want)
              << gpu << " " << stand_in << " " << NetKindName(kind) << " " << offers;
          EXPECT_EQ(EdgeSlotsApart(gpu, kind, theirs, mine, stand_in), want);
        }
      }
    }
  }
}

TEST(GpuDirect, ProbeReadsTheModulesAndTheGpu) {
  char dir[] = "/tmp/ringo-gpudirect-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  // No GPU here (or one without the attributes): the GPU facts are no.
  GpuDirectFacts f = ProbeGpuDirect(0, /*verbs=*/false, dir);
  EXPECT_FALSE(f.verbs);
  EXPECT_FALSE(f.verbs_dmabuf);  // not asked of the library without verbs
  EXPECT_FALSE(f.peermem);
  ASSERT_EQ(mkdir((std::string(dir) + "/nvidia_peermem").c_str(), 0755), 0);
  f = ProbeGpuDirect(0, false, dir);
  EXPECT_TRUE(f.peermem);
  rmdir((std::string(dir) + "/nvidia_peermem").c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace ringo::transport::net
