// The host-or-GPU decision without a GPU: RINGO_DEVICE parsing, the order of
// the config's kind over RINGO_DEVICE, AUTO in and across processes, and the
// agreement every rank of a multi-process communicator reaches from the
// others' wishes and hosts.
#include "collectives/plan/device_choice.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ringo::collectives {
namespace {

using W = DeviceWish;
using R = DeviceRequest;

CudaFacts Gpus(int n, bool kernels = true) {
  CudaFacts f;
  f.device_count = n;
  f.no_gpu_reason = n == 0 ? "no CUDA device is visible" : "";
  f.kernels_built = kernels;
  return f;
}

W Wish(R api, R env, const CudaFacts& facts, bool in_process) {
  auto c = ChooseWish(api, env, facts, in_process);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? c->wish : W::kHost;
}

TEST(DeviceChoice, ParsesRingoDevice) {
  EXPECT_EQ(ParseDeviceRequest(""), R::kAuto);
  EXPECT_EQ(ParseDeviceRequest("auto"), R::kAuto);
  EXPECT_EQ(ParseDeviceRequest("host"), R::kHost);
  EXPECT_EQ(ParseDeviceRequest("cuda"), R::kCuda);
}

TEST(DeviceChoice, AutoTakesAGpuInProcessAndAsksTheOthersAcrossProcesses) {
  EXPECT_EQ(Wish(R::kAuto, R::kAuto, Gpus(1), true), W::kCuda);
  EXPECT_EQ(Wish(R::kAuto, R::kAuto, Gpus(1), false), W::kCudaIfAll);
  auto none = ChooseWish(R::kAuto, R::kAuto, Gpus(0), false);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->wish, W::kHost);
  EXPECT_NE(none->note.find("no CUDA device is visible"), std::string::npos) << none->note;
  auto no_kernels = ChooseWish(R::kAuto, R::kAuto, Gpus(2, false), true);
  ASSERT_TRUE(no_kernels.ok());
  EXPECT_EQ(no_kernels->wish, W::kHost);
  EXPECT_NE(no_kernels->note.find("no GPU kernels"), std::string::npos) << no_kernels->note;
}

TEST(DeviceChoice, RingoDeviceAppliesOnlyWhereTheConfigSaysAuto) {
  EXPECT_EQ(Wish(R::kAuto, R::kHost, Gpus(1), true), W::kHost);
  EXPECT_EQ(Wish(R::kAuto, R::kHost, Gpus(1), false), W::kHost);
  EXPECT_EQ(Wish(R::kAuto, R::kCuda, Gpus(1), false), W::kCuda);
  EXPECT_EQ(Wish(R::kCuda, R::kHost, Gpus(1), false), W::kCuda);  // the explicit kind wins
  EXPECT_EQ(Wish(R::kHost, R::kCuda, Gpus(1), true), W::kHost);
  // Host memory needs no facts about GPUs (the caller does not probe CUDA).
  EXPECT_EQ(Wish(R::kAuto, R::kHost, Gpus(0), false), W::kHost);
}

TEST(DeviceChoice, RequiredGpuThatIsNotThereSaysWhy) {
  auto from_api = ChooseWish(R::kCuda, R::kAuto, Gpus(0), true);
  ASSERT_FALSE(from_api.ok());
  EXPECT_EQ(from_api.status().code(), base::Code::kInvalidUsage);
  EXPECT_NE(
      from_api.status().message().find("RINGO_DEVICE_CUDA: no GPU is visible (no CUDA device"),
      std::string::npos)
      << from_api.status().message();
  auto from_env = ChooseWish(R::kAuto, R::kCuda, Gpus(0), false);
  ASSERT_FALSE(from_env.ok());
  EXPECT_NE(from_env.status().message().find("RINGO_DEVICE=cuda"), std::string::npos);
  auto no_kernels = ChooseWish(R::kCuda, R::kAuto, Gpus(1, false), false);
  ASSERT_FALSE(no_kernels.ok());
  EXPECT_NE(no_kernels.status().message().find("no GPU kernels"), std::string::npos);
}

DeviceAgreement Agree(const std::vector<W>& wishes, const std::vector<uint64_t>& hosts, bool across_hosts = true) {
  auto a = AgreeOnDevice(wishes, hosts, across_hosts);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return a.ok() ? *a : DeviceAgreement{};
}

TEST(DeviceChoice, RanksOfOneHostThatAllWantAGpuGetIt) {
  EXPECT_TRUE(
      Agree({W::kCudaIfAll, W::kCudaIfAll, W::kCudaIfAll, W::kCudaIfAll}, {7, 7, 7, 7}).cuda);
  EXPECT_TRUE(Agree({W::kCuda, W::kCudaIfAll}, {7, 7}).cuda);
  EXPECT_TRUE(Agree({W::kCuda, W::kCuda}, {7, 7}).cuda);
  const DeviceAgreement host = Agree({W::kHost, W::kHost, W::kHost}, {1, 2, 3});
  EXPECT_FALSE(host.cuda);
  EXPECT_EQ(host.note, "");  // nobody wanted a GPU: nothing to say
}

TEST(DeviceChoice, AutoFallsBackToHostTogether) {
  DeviceAgreement a = Agree({W::kCudaIfAll, W::kHost, W::kCudaIfAll}, {7, 7, 7});
  EXPECT_FALSE(a.cuda);
  EXPECT_NE(a.note.find("rank 1 uses host memory"), std::string::npos) << a.note;
}

TEST(DeviceChoice, GpuAcrossHostsIsOffUntilAGpuRunVerifiedIt) {
  // Not allowed (RINGO_GPU_ACROSS_HOSTS=0, the default): auto falls back to
  // host memory on every rank, saying why; a required GPU is refused.
  DeviceAgreement a = Agree({W::kCudaIfAll, W::kCudaIfAll, W::kCudaIfAll}, {7, 7, 9}, /*across_hosts=*/false);
  EXPECT_FALSE(a.cuda);
  EXPECT_FALSE(a.hosts_spanned);
  EXPECT_NE(a.note.find("RINGO_GPU_ACROSS_HOSTS=1"), std::string::npos) << a.note;
  auto required = AgreeOnDevice({W::kCudaIfAll, W::kCuda}, {7, 8}, false);
  ASSERT_FALSE(required.ok());
  EXPECT_EQ(required.status().code(), base::Code::kInvalidUsage);
  EXPECT_NE(required.status().message().find("rank 1 asked for GPU memory"), std::string::npos)
      << required.status().message();
  // One host: unaffected.
  a = Agree({W::kCuda, W::kCuda}, {7, 7}, false);
  EXPECT_TRUE(a.cuda);
  EXPECT_FALSE(a.hosts_spanned);
}

TEST(DeviceChoice, GpuAcrossHosts) {
  // Allowed: ranks on several hosts keep GPU memory, edges between hosts go
  // through pinned host memory and the network.
  DeviceAgreement a = Agree({W::kCudaIfAll, W::kCudaIfAll, W::kCudaIfAll}, {7, 7, 9});
  EXPECT_TRUE(a.cuda);
  EXPECT_TRUE(a.hosts_spanned);
  a = Agree({W::kCuda, W::kCuda}, {7, 8});
  EXPECT_TRUE(a.cuda);
  EXPECT_TRUE(a.hosts_spanned);
  EXPECT_FALSE(Agree({W::kCuda, W::kCuda}, {7, 7}).hosts_spanned);
}

TEST(DeviceChoice, ARequiredGpuThatCannotBeHadFailsOnEveryRank) {
  auto mixed = AgreeOnDevice({W::kHost, W::kCudaIfAll, W::kCuda}, {7, 7, 7}, true);
  ASSERT_FALSE(mixed.ok());
  EXPECT_EQ(mixed.status().code(), base::Code::kInvalidUsage);
  EXPECT_NE(mixed.status().message().find("rank 2 asked for GPU memory"), std::string::npos);
  EXPECT_NE(mixed.status().message().find("but rank 0 uses host memory"), std::string::npos);
  auto garbage = AgreeOnDevice({W::kCuda, static_cast<W>(7)}, {7, 7}, true);
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.status().message().find("rank 1 sent an unknown device wish 7"),
            std::string::npos);
}

}  // namespace
}  // namespace ringo::collectives
