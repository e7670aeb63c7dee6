// The GPU forms of point-to-point and what came with it, on communicators
// whose ranks share CUDA device 0 (ringoCommInitAll with a repeated device
// list, one non-blocking stream per rank, one thread driving every rank in
// groups): send/recv rings in both directions and to oneself, several
// messages on one pair, all-to-all, gather and scatter (every root), a split
// of the GPU communicators, premul-sum with a host and a device scalar, and
// fp8 sums. Data is written and read back with cudaMemcpy. Skips where no
// GPU is visible (fails instead under RINGO_REQUIRE_GPU=1); not yet run on
// a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/cuda.h"
#include "base/gpu_test.h"
#include "ringo/ringo.h"

#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#define RINGO_TEST_HAVE_CUDART 1
#else
#define RINGO_TEST_HAVE_CUDART 0
#endif

namespace ringo::tests {
namespace {

bool GpuVisible() { return base::ProbeCuda().device_count > 0; }

#define SKIP_WITHOUT_GPU() \
  RINGO_SKIP_WITHOUT_GPU(GpuVisible(), "no CUDA device visible (" + base::ProbeCuda().reason + ")")

#if RINGO_TEST_HAVE_CUDART

// n ranks on device 0, a stream and device buffers each.
class Ranks {
 public:
  explicit Ranks(int n) : comms_(n, nullptr), streams_(n, nullptr) {
    std::vector<int> devlist(n, 0);
    ok_ = ringoCommInitAll(comms_.data(), n, devlist.data()) == ringoSuccess;
    for (auto& s : streams_) cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  }
  ~Ranks() {
    for (auto& s : streams_) cudaStreamSynchronize(s);
    for (ringoComm_t c : comms_) {
      if (c != nullptr) ringoCommDestroy(c);
    }
    for (void* p : buffers_) cudaFree(p);
    for (auto& s : streams_) cudaStreamDestroy(s);
  }
  bool ok() const { return ok_; }
  int n() const { return static_cast<int>(comms_.size()); }
  ringoComm_t comm(int r) const { return comms_[r]; }
  cudaStream_t stream(int r) const { return streams_[r]; }
  // Device memory holding `bytes` (zeroed), freed with the ranks; allocated
  // before any collective runs (a cudaFree between them would wait for ring
  // kernels: docs/gpu.md's hazards).
  void* Alloc(size_t bytes) {
    void* p = nullptr;
    cudaMalloc(&p, bytes == 0 ? 1 : bytes);
    cudaMemset(p, 0, bytes == 0 ? 1 : bytes);
    buffers_.push_back(p);
    return p;
  }
  void SyncAll() {
    for (auto& s : streams_) cudaStreamSynchronize(s);
  }
  std::string AsyncErrors() {
    std::string out;
    for (int r = 0; r < n(); ++r) {
      ringoResult_t e = ringoSuccess;
      ringoCommGetAsyncError(comms_[r], &e);
      if (e != ringoSuccess) out += "rank " + std::to_string(r) + ": " + ringoGetLastError(comms_[r]) + "; ";
    }
    return out;
  }

 private:
  bool ok_ = false;
  std::vector<ringoComm_t> comms_;
  std::vector<cudaStream_t> streams_;
  std::vector<void*> buffers_;
};

std::vector<int32_t> Read(const void* d, size_t n) {
  std::vector<int32_t> h(n);
  cudaMemcpy(h.data(), d, n * sizeof(int32_t), cudaMemcpyDeviceToHost);
  return h;
}

void Write(void* d, const std::vector<int32_t>& h) {
  cudaMemcpy(d, h.data(), h.size() * sizeof(int32_t), cudaMemcpyHostToDevice);
}

TEST(GpuP2p, RingsSelfAndSeveralMessages) {
  SKIP_WITHOUT_GPU();
  for (int n : {1, 2, 4}) {
    Ranks ranks(n);
    ASSERT_TRUE(ranks.ok()) << ringoGetLastError(nullptr);
    const size_t count = 300001;  // several slots
    std::vector<void*> out(n), back(n), self_in(n), self_out(n), in(n);
    for (int r = 0; r < n; ++r) {
      in[r] = ranks.Alloc(count * 4);
      out[r] = ranks.Alloc(count * 4);
      back[r] = ranks.Alloc(count * 4);
      self_in[r] = ranks.Alloc(64);
      self_out[r] = ranks.Alloc(64);
      std::vector<int32_t> h(count);
      for (size_t i = 0; i < count; ++i) h[i] = static_cast<int32_t>(r * 1000003 + i);
      Write(in[r], h);
      Write(self_in[r], std::vector<int32_t>(16, 77 + r));
    }
    ASSERT_EQ(ringoGroupStart(), ringoSuccess);
    for (int r = 0; r < n; ++r) {
      const int next = (r + 1) % n, prev = (r + n - 1) % n;
      ringoSend(in[r], count, ringoInt32, next, ranks.comm(r), ranks.stream(r));
      ringoRecv(out[r], count, ringoInt32, prev, ranks.comm(r), ranks.stream(r));
      ringoSend(in[r], count, ringoInt32, prev, ranks.comm(r), ranks.stream(r));
      ringoRecv(back[r], count, ringoInt32, next, ranks.comm(r), ranks.stream(r));
      ringoSend(self_in[r], 16, ringoInt32, r, ranks.comm(r), ranks.stream(r));
      ringoRecv(self_out[r], 16, ringoInt32, r, ranks.comm(r), ranks.stream(r));
    }
    ASSERT_EQ(ringoGroupEnd(), ringoSuccess) << ringoGetLastError(nullptr);
    ranks.SyncAll();
    ASSERT_EQ(ranks.AsyncErrors(), "");
    for (int r = 0; r < n; ++r) {
      const int prev = (r + n - 1) % n, next = (r + 1) % n;
      const auto got = Read(out[r], count), got_back = Read(back[r], count);
      EXPECT_EQ(got[count - 1], static_cast<int32_t>(prev * 1000003 + count - 1)) << "n=" << n << " rank " << r;
      EXPECT_EQ(got_back[7], static_cast<int32_t>(next * 1000003 + 7)) << "n=" << n << " rank " << r;
      EXPECT_EQ(Read(self_out[r], 16)[15], 77 + r);
    }
  }
}

TEST(GpuP2p, AllToAllGatherScatter) {
  SKIP_WITHOUT_GPU();
  const int n = 3;
  const size_t count = 1000;
  Ranks ranks(n);
  ASSERT_TRUE(ranks.ok()) << ringoGetLastError(nullptr);
  std::vector<void*> in(n), out(n), gathered(n), scattered(n);
  for (int r = 0; r < n; ++r) {
    in[r] = ranks.Alloc(n * count * 4);
    out[r] = ranks.Alloc(n * count * 4);
    gathered[r] = ranks.Alloc(n * count * 4);
    scattered[r] = ranks.Alloc(count * 4);
    std::vector<int32_t> h(n * count);
    for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<int32_t>(r * 100000 + i);
    Write(in[r], h);
  }
  ASSERT_EQ(ringoGroupStart(), ringoSuccess);
  for (int r = 0; r < n; ++r) ringoAllToAll(in[r], out[r], count, ringoInt32, ranks.comm(r), ranks.stream(r));
  ASSERT_EQ(ringoGroupEnd(), ringoSuccess) << ringoGetLastError(nullptr);
  for (int root = 0; root < n; ++root) {
    ASSERT_EQ(ringoGroupStart(), ringoSuccess);
    for (int r = 0; r < n; ++r) {
      ringoGather(in[r], gathered[r], count, ringoInt32, root, ranks.comm(r), ranks.stream(r));
      ringoScatter(in[r], scattered[r], count, ringoInt32, root, ranks.comm(r), ranks.stream(r));
    }
    ASSERT_EQ(ringoGroupEnd(), ringoSuccess) << ringoGetLastError(nullptr);
    ranks.SyncAll();
    ASSERT_EQ(ranks.AsyncErrors(), "");
    const auto g = Read(gathered[root], n * count);
    for (int q = 0; q < n; ++q) EXPECT_EQ(g[q * count + 5], static_cast<int32_t>(q * 100000 + 5)) << "root " << root;
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(Read(scattered[r], count)[9], static_cast<int32_t>(root * 100000 + r * count + 9)) << "root " << root;
    }
  }
  for (int r = 0; r < n; ++r) {
    const auto o = Read(out[r], n * count);
    for (int q = 0; q < n; ++q) EXPECT_EQ(o[q * count + 3], static_cast<int32_t>(q * 100000 + r * count + 3));
  }
}

TEST(GpuP2p, SplitPremulSumAndFp8) {
  SKIP_WITHOUT_GPU();
  const int n = 4;
  Ranks ranks(n);
  ASSERT_TRUE(ranks.ok()) << ringoGetLastError(nullptr);
  std::vector<ringoComm_t> children(n, nullptr);
  ASSERT_EQ(ringoGroupStart(), ringoSuccess);
  for (int r = 0; r < n; ++r) ringoCommSplit(ranks.comm(r), r % 2, r, &children[r], nullptr);
  ASSERT_EQ(ringoGroupEnd(), ringoSuccess) << ringoGetLastError(nullptr);
  std::vector<void*> x(n), y(n), dev_scalar(n), f8in(n), f8out(n);
  for (int r = 0; r < n; ++r) {
    x[r] = ranks.Alloc(64 * sizeof(float));
    y[r] = ranks.Alloc(64 * sizeof(float));
    dev_scalar[r] = ranks.Alloc(sizeof(float));
    f8in[r] = ranks.Alloc(64);
    f8out[r] = ranks.Alloc(64);
    std::vector<float> ones(64, 1.0f);
    cudaMemcpy(x[r], ones.data(), 64 * sizeof(float), cudaMemcpyHostToDevice);
    const float s = static_cast<float>(r + 1);
    cudaMemcpy(dev_scalar[r], &s, sizeof(s), cudaMemcpyHostToDevice);
    std::vector<uint8_t> f8(64, 0x38);  // 1.0 in E4M3
    cudaMemcpy(f8in[r], f8.data(), 64, cudaMemcpyHostToDevice);
  }
  std::vector<ringoRedOp_t> host_ops(n), dev_ops(n);
  for (int r = 0; r < n; ++r) {
    float s = 2.0f;
    ASSERT_EQ(ringoRedOpCreatePreMulSum(&host_ops[r], &s, ringoFloat32, ringoScalarHostImmediate, children[r]),
              ringoSuccess);
    ASSERT_EQ(ringoRedOpCreatePreMulSum(&dev_ops[r], dev_scalar[r], ringoFloat32, ringoScalarDevice, ranks.comm(r)),
              ringoSuccess)
        << ringoGetLastError(ranks.comm(r));
  }
  ASSERT_EQ(ringoGroupStart(), ringoSuccess);
  for (int r = 0; r < n; ++r) {
    ringoAllReduce(x[r], y[r], 64, ringoFloat32, host_ops[r], children[r], ranks.stream(r));
  }
  ASSERT_EQ(ringoGroupEnd(), ringoSuccess) << ringoGetLastError(nullptr);
  ranks.SyncAll();
  for (int r = 0; r < n; ++r) {
    float got = 0;
    cudaMemcpy(&got, y[r], sizeof(got), cudaMemcpyDeviceToHost);
    EXPECT_EQ(got, 4.0f) << "child of rank " << r;  // 2 ranks x 2 x 1
  }
  ASSERT_EQ(ringoGroupStart(), ringoSuccess);
  for (int r = 0; r < n; ++r) {
    ringoAllReduce(x[r], y[r], 64, ringoFloat32, dev_ops[r], ranks.comm(r), ranks.stream(r));
    ringoAllReduce(f8in[r], f8out[r], 64, ringoFloat8e4m3, ringoSum, ranks.comm(r), ranks.stream(r));
  }
  ASSERT_EQ(ringoGroupEnd(), ringoSuccess) << ringoGetLastError(nullptr);
  ranks.SyncAll();
  ASSERT_EQ(ranks.AsyncErrors(), "");
  for (int r = 0; r < n; ++r) {
    float got = 0;
    cudaMemcpy(&got, y[r], sizeof(got), cudaMemcpyDeviceToHost);
    EXPECT_EQ(got, 10.0f);  // 1 + 2 + 3 + 4
    uint8_t f8 = 0;
    cudaMemcpy(&f8, f8out[r], 1, cudaMemcpyDeviceToHost);
    EXPECT_EQ(f8, 0x48);  // 4.0 in E4M3
  }
  for (ringoComm_t c : children) ringoCommDestroy(c);
}

#else

TEST(GpuP2p, NeedsTheCudaToolkit) { GTEST_SKIP() << "built without the CUDA toolkit"; }

#endif

}  // namespace
}  // namespace ringo::tests
