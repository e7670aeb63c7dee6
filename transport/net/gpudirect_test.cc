// GPUDirect RDMA's verdict from faked facts: available by either route only
// with verbs and a GPU that supports it, never used (the data path is not
// built), and the line saying which piece is missing; the module probe
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
  f.verbs = f.gpu_rdma = f.gpu_dmabuf = f.verbs_dmabuf = f.peermem = true;
  return f;
}

TEST(GpuDirect, AvailableByEitherRouteNeverUsed) {
  GpuDirectFacts f = All();
  GpuDirectVerdict v = JudgeGpuDirect(f);
  EXPECT_TRUE(v.available);
  EXPECT_FALSE(v.used);
  EXPECT_NE(v.text.find("available (dma-buf"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("not used"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("pinned host memory"), std::string::npos) << v.text;
  f.gpu_dmabuf = false;  // the peermem route alone
  v = JudgeGpuDirect(f);
  EXPECT_TRUE(v.available);
  EXPECT_NE(v.text.find("available (nvidia_peermem"), std::string::npos) << v.text;
  f.peermem = false;
  v = JudgeGpuDirect(f);
  EXPECT_FALSE(v.available);
  EXPECT_NE(v.text.find("GPU dma-buf no"), std::string::npos) << v.text;
}

TEST(GpuDirect, NeedsVerbsAndTheGpu) {
  GpuDirectFacts f = All();
  f.verbs = false;  // sockets: no NIC reads GPU memory
  GpuDirectVerdict v = JudgeGpuDirect(f);
  EXPECT_FALSE(v.available);
  EXPECT_NE(v.text.find("not available (verbs no"), std::string::npos) << v.text;
  f = All();
  f.gpu_rdma = false;
  EXPECT_FALSE(JudgeGpuDirect(f).available);
  f = All();
  f.verbs_dmabuf = false;  // dma-buf needs both ends; peermem still there
  EXPECT_TRUE(JudgeGpuDirect(f).available);
  f.peermem = false;
  EXPECT_FALSE(JudgeGpuDirect(f).available);
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
