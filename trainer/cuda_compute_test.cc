// The GPU backend against the CPU backend, operation by operation, on the
// same inputs. Tolerances from the arithmetic:
//
// - Element-wise and per-column work (bias, ReLU, column sums, batch norm,
//   SGD, scaling): both backends do the same operations in the same order
//   without fused multiply-add (the CPU build has no -mfma; the kernels are
//   built with --fmad=false), in float or double as written, and sqrt and
//   division are correctly rounded on both: equal bits.
// - Softmax cross-entropy: double exp and log are within 2 ulp of double on
//   the GPU, and the result is rounded to float: within one float ulp.
// - GEMM: each backend's dot product of length k errs by at most
//   gamma_k = k u / (1 - k u) times sum |a||b| (u = 2^-24), whatever the
//   order or fusion, so the two differ by at most twice that.
//
// Skips without a GPU (fails instead under RINGO_REQUIRE_GPU=1).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "trainer/compute.h"

namespace ringo::train {
namespace {

bool RequireGpu() {
  const char* v = std::getenv("RINGO_REQUIRE_GPU");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

#define SKIP_WITHOUT_GPU()                                                                   \
  do {                                                                                       \
    if (CudaDeviceCount() == 0) {                                                            \
      if (RequireGpu()) GTEST_FAIL() << "RINGO_REQUIRE_GPU=1, but no GPU is visible";        \
      GTEST_SKIP() << "no GPU visible (or no CUDA driver): the GPU backend is not exercised"; \
    }                                                                                        \
  } while (0)

std::vector<float> Random(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// One operation's buffers on both backends.
class Pair {
 public:
  Pair(Compute* cpu, Compute* gpu) : cpu_(cpu), gpu_(gpu) {}
  ~Pair() {
    for (auto& [c, g] : bufs_) {
      cpu_->FreeBytes(c);
      gpu_->FreeBytes(g);
    }
  }
  // Backend buffers holding `host`'s bytes; index into cpu()/gpu().
  template <typename T>
  int Put(const std::vector<T>& host) {
    const size_t bytes = host.size() * sizeof(T);
    void* c = cpu_->AllocBytes(bytes);
    void* g = gpu_->AllocBytes(bytes);
    cpu_->CopyIn(host.data(), c, bytes);
    gpu_->CopyIn(host.data(), g, bytes);
    bufs_.push_back({c, g});
    return static_cast<int>(bufs_.size()) - 1;
  }
  template <typename T>
  T* cpu(int i) { return static_cast<T*>(bufs_[i].first); }
  template <typename T>
  T* gpu(int i) { return static_cast<T*>(bufs_[i].second); }
  // Both copies back: [cpu..., gpu...].
  template <typename T>
  void Get(int i, size_t n, std::vector<T>* c, std::vector<T>* g) {
    c->resize(n);
    g->resize(n);
    cpu_->CopyOut(bufs_[i].first, c->data(), n * sizeof(T));
    gpu_->CopyOut(bufs_[i].second, g->data(), n * sizeof(T));
  }
  template <typename T>
  void ExpectSameBits(int i, size_t n, const char* what) {
    std::vector<T> c, g;
    Get(i, n, &c, &g);
    for (size_t k = 0; k < n; ++k) {
      ASSERT_EQ(std::memcmp(&c[k], &g[k], sizeof(T)), 0) << what << "[" << k << "]: cpu " << c[k] << " gpu " << g[k];
    }
  }

 private:
  Compute* cpu_;
  Compute* gpu_;
  std::vector<std::pair<void*, void*>> bufs_;
};

class CudaComputeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) return;
    cpu_ = MakeCpuCompute(1);
    auto made = MakeCudaCompute(0, GemmKind::kAuto);
    ASSERT_TRUE(made.ok()) << made.status().message();
    gpu_ = std::move(*made);
  }
  std::unique_ptr<Compute> cpu_, gpu_;
};

TEST_F(CudaComputeTest, ElementWiseAndColumnWorkMatchBitForBit) {
  SKIP_WITHOUT_GPU();
  const int rows = 37, cols = 70;
  const size_t n = static_cast<size_t>(rows) * cols;
  Pair p(cpu_.get(), gpu_.get());
  const int x = p.Put(Random(n, 1)), y = p.Put(Random(n, 2)), bias = p.Put(Random(cols, 3));
  const int out = p.Put(Random(cols, 4)), relu = p.Put(std::vector<float>(n)), back = p.Put(Random(n, 5));
  for (Compute* c : {cpu_.get(), gpu_.get()}) {
    const bool g = c == gpu_.get();
    auto F = [&](int i) { return g ? p.gpu<float>(i) : p.cpu<float>(i); };
    c->AddBias(rows, cols, F(bias), F(y));
    c->ColumnSum(rows, cols, F(x), 0.5f, F(out));
    c->Relu(n, F(x), F(relu));
    c->ReluBackward(n, F(relu), F(back), F(back));
    c->Scale(n, 0.75f, F(x));
  }
  p.ExpectSameBits<float>(y, n, "AddBias");
  p.ExpectSameBits<float>(out, cols, "ColumnSum");
  p.ExpectSameBits<float>(relu, n, "Relu");
  p.ExpectSameBits<float>(back, n, "ReluBackward");
  p.ExpectSameBits<float>(x, n, "Scale");
}

TEST_F(CudaComputeTest, SgdMatchesBitForBit) {
  SKIP_WITHOUT_GPU();
  const size_t n = 100003;
  Pair p(cpu_.get(), gpu_.get());
  const int w = p.Put(Random(n, 6)), g = p.Put(Random(n, 7)), v = p.Put(Random(n, 8));
  for (Compute* c : {cpu_.get(), gpu_.get()}) {
    const bool d = c == gpu_.get();
    auto F = [&](int i) { return d ? p.gpu<float>(i) : p.cpu<float>(i); };
    for (int step = 0; step < 3; ++step) c->SgdStep(n, F(w), F(g), F(v), 0.05f, 0.9f, 5e-4f);
  }
  p.ExpectSameBits<float>(w, n, "SgdStep w");
  p.ExpectSameBits<float>(v, n, "SgdStep v");
}

TEST_F(CudaComputeTest, BatchNormMatchesBitForBit) {
  SKIP_WITHOUT_GPU();
  const int rows = 48, cols = 300;
  const size_t n = static_cast<size_t>(rows) * cols;
  Pair p(cpu_.get(), gpu_.get());
  std::vector<float> running(2 * cols, 0.0f);
  for (int c = 0; c < cols; ++c) running[cols + c] = 1.0f;
  const int x = p.Put(Random(n, 9, -2.0f, 3.0f)), dy = p.Put(Random(n, 10));
  const int stats = p.Put(std::vector<double>(2 * cols + 1)), grad_stats = p.Put(std::vector<double>(2 * cols + 1));
  const int run = p.Put(running), mean = p.Put(std::vector<float>(cols)), invstd = p.Put(std::vector<float>(cols));
  const int gamma = p.Put(Random(cols, 11, 0.5f, 1.5f)), beta = p.Put(Random(cols, 12));
  const int xhat = p.Put(std::vector<float>(n)), yy = p.Put(std::vector<float>(n)), dx = p.Put(std::vector<float>(n));
  const int dgamma = p.Put(Random(cols, 13)), dbeta = p.Put(Random(cols, 14));
  const int eval_mean = p.Put(std::vector<float>(cols)), eval_invstd = p.Put(std::vector<float>(cols));
  for (Compute* c : {cpu_.get(), gpu_.get()}) {
    const bool g = c == gpu_.get();
    auto F = [&](int i) { return g ? p.gpu<float>(i) : p.cpu<float>(i); };
    auto D = [&](int i) { return g ? p.gpu<double>(i) : p.cpu<double>(i); };
    c->ColumnMoments(rows, cols, F(x), D(stats));
    c->BatchNormStats(cols, D(stats), 0.1, 1e-5, F(run), F(mean), F(invstd));
    c->BatchNormApply(rows, cols, F(x), F(mean), F(invstd), F(gamma), F(beta), F(xhat), F(yy));
    c->BatchNormGradSums(rows, cols, F(dy), F(xhat), D(grad_stats));
    c->BatchNormParamGrads(cols, D(grad_stats), /*accumulate=*/true, F(dgamma), F(dbeta));
    c->BatchNormBackward(rows, cols, F(dy), F(xhat), F(gamma), F(invstd), D(grad_stats), F(dx));
    c->BatchNormStats(cols, nullptr, 0.1, 1e-5, F(run), F(eval_mean), F(eval_invstd));
  }
  p.ExpectSameBits<double>(stats, 2 * cols + 1, "ColumnMoments");
  p.ExpectSameBits<float>(run, 2 * cols, "running statistics");
  p.ExpectSameBits<float>(mean, cols, "batch mean");
  p.ExpectSameBits<float>(invstd, cols, "batch invstd");
  p.ExpectSameBits<float>(xhat, n, "xhat");
  p.ExpectSameBits<float>(yy, n, "BatchNormApply");
  p.ExpectSameBits<double>(grad_stats, 2 * cols + 1, "BatchNormGradSums");
  p.ExpectSameBits<float>(dgamma, cols, "dgamma");
  p.ExpectSameBits<float>(dbeta, cols, "dbeta");
  p.ExpectSameBits<float>(dx, n, "BatchNormBackward");
  p.ExpectSameBits<float>(eval_mean, cols, "evaluation mean");
  p.ExpectSameBits<float>(eval_invstd, cols, "evaluation invstd");
}

TEST_F(CudaComputeTest, SoftmaxCrossEntropyWithinOneUlpAndTheSameCounts) {
  SKIP_WITHOUT_GPU();
  const int rows = 333, cols = 10;
  Pair p(cpu_.get(), gpu_.get());
  std::vector<uint8_t> labels(rows);
  for (int r = 0; r < rows; ++r) labels[r] = static_cast<uint8_t>((r * 7) % cols);
  const int z = p.Put(Random(static_cast<size_t>(rows) * cols, 15, -6.0f, 6.0f)), lab = p.Put(labels);
  const int d = p.Put(std::vector<float>(static_cast<size_t>(rows) * cols));
  double loss[2] = {0, 0};
  int64_t correct[2] = {0, 0}, counted[2] = {0, 0};
  for (Compute* c : {cpu_.get(), gpu_.get()}) {
    const int g = c == gpu_.get();
    float* zz = g ? p.gpu<float>(z) : p.cpu<float>(z);
    const uint8_t* ll = g ? p.gpu<uint8_t>(lab) : p.cpu<uint8_t>(lab);
    c->SoftmaxCrossEntropy(rows, cols, zz, ll, 1.0f / rows, g ? p.gpu<float>(d) : p.cpu<float>(d));
    c->SoftmaxCrossEntropy(rows, cols, zz, ll, 1.0f / rows, g ? p.gpu<float>(d) : p.cpu<float>(d));
    c->TakeMetrics(&loss[g], &correct[g]);
    c->CountCorrect(rows, cols, zz, ll);
    double unused = 0;
    c->TakeMetrics(&unused, &counted[g]);
    EXPECT_EQ(unused, 0.0) << "TakeMetrics zeroes the loss";
  }
  EXPECT_EQ(correct[0], correct[1]);
  EXPECT_EQ(counted[0], counted[1]);
  EXPECT_EQ(2 * counted[0], correct[0]);
  // 2 x 333 rows, each within 2 ulp of double per exp/log: far below 1e-12 relative.
  EXPECT_NEAR(loss[1], loss[0], 1e-12 * loss[0]);
  std::vector<float> c, g;
  p.Get(d, static_cast<size_t>(rows) * cols, &c, &g);
  for (size_t k = 0; k < c.size(); ++k) {
    const float ulp = c[k] == 0.0f ? std::numeric_limits<float>::denorm_min() : std::ldexp(1.0f, std::ilogb(c[k]) - 23);
    ASSERT_LE(std::fabs(c[k] - g[k]), ulp) << k << ": cpu " << c[k] << " gpu " << g[k];
  }
}

// Both GEMMs (cuBLAS where it loads, and the trainer's own) in every
// transposition, against OpenBLAS.
TEST_F(CudaComputeTest, GemmWithinTwiceGammaK) {
  SKIP_WITHOUT_GPU();
  std::vector<std::unique_ptr<Compute>> gpus;
  gpus.push_back(std::move(gpu_));
  auto own = MakeCudaCompute(0, GemmKind::kOwn);
  ASSERT_TRUE(own.ok()) << own.status().message();
  gpus.push_back(std::move(*own));
  auto cublas = MakeCudaCompute(0, GemmKind::kCublas);
  if (cublas.ok()) {
    gpus.push_back(std::move(*cublas));
  } else {  // a machine without libcublas: the own GEMM only, said
    std::printf("cuBLAS not tested here: %s\n", cublas.status().message().c_str());
  }
  const double u = std::ldexp(1.0, -24);
  // k = 784 (whole 16-deep tiles, the first layer's inputs), 37 (a partial tile: a weight gradient over a micro-batch).
  for (const int k : {784, 37})
  for (auto& gpu : gpus) {
    const int m = 67, n = 129;
    const double gamma = k * u / (1 - k * u);
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      const int lda = ta ? m : k, ldb = tb ? k : n;
      const std::vector<float> a = Random(static_cast<size_t>(m) * k, 16 + t), b = Random(static_cast<size_t>(k) * n, 20 + t);
      const std::vector<float> c0 = Random(static_cast<size_t>(m) * n, 24 + t);
      Pair p(cpu_.get(), gpu.get());
      const int ia = p.Put(a), ib = p.Put(b), ic = p.Put(c0);
      for (Compute* c : {cpu_.get(), gpu.get()}) {
        const bool g = c == gpu.get();
        auto F = [&](int i) { return g ? p.gpu<float>(i) : p.cpu<float>(i); };
        c->Gemm(ta, tb, m, n, k, 0.5f, F(ia), lda, F(ib), ldb, 0.25f, F(ic), n);
      }
      std::vector<float> c, g;
      p.Get(ic, static_cast<size_t>(m) * n, &c, &g);
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
          double mag = 0.25 * std::fabs(c0[static_cast<size_t>(i) * n + j]);
          for (int l = 0; l < k; ++l) {
            const float av = ta ? a[static_cast<size_t>(l) * lda + i] : a[static_cast<size_t>(i) * lda + l];
            const float bv = tb ? b[static_cast<size_t>(j) * ldb + l] : b[static_cast<size_t>(l) * ldb + j];
            mag += 0.5 * std::fabs(static_cast<double>(av) * bv);
          }
          const size_t o = static_cast<size_t>(i) * n + j;
          ASSERT_LE(std::fabs(static_cast<double>(c[o]) - g[o]), 2 * gamma * mag + 1e-30)
              << gpu->Name() << " k " << k << " trans " << ta << tb << " at " << i << "," << j;
        }
      }
    }
  }
}

TEST_F(CudaComputeTest, EventsOrderStreamsAndTime) {
  SKIP_WITHOUT_GPU();
  Compute* c = gpu_.get();
  Compute::Stream other = c->NewStream();
  Compute::Event a = c->NewEvent(), b = c->NewEvent();
  const size_t n = size_t{1} << 24;
  float* x = c->Alloc(n);
  std::vector<float> ones(n, 1.0f);
  c->Upload(ones.data(), x, n);
  c->Record(a, c->stream());
  for (int i = 0; i < 20; ++i) c->Scale(n, 2.0f, x);
  c->Record(b, c->stream());
  c->StreamWait(other, b);  // the other stream's work after the scaling
  Compute::Event e = c->NewEvent();
  c->Record(e, other);
  c->Synchronize(other);  // only the other stream: b is complete only if the wait held
  EXPECT_GE(c->ElapsedMs(b, e), 0.0);
  EXPECT_TRUE(c->Error().ok()) << "b not complete after the other stream's wait: " << c->Error().message();
  c->FreeEvent(e);
  c->Synchronize(c->stream());
  EXPECT_GT(c->ElapsedMs(a, b), 0.0);
  float first = 0;
  c->Download(x, &first, 1);
  EXPECT_EQ(first, 1048576.0f);
  EXPECT_TRUE(c->Error().ok()) << c->Error().message();
  c->Free(x);
  c->FreeEvent(a);
  c->FreeEvent(b);
  c->FreeStream(other);
}

TEST(CudaCompute, WithoutAGpuTheErrorSaysSo) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a GPU is visible: nothing to refuse";
  auto made = MakeCudaCompute(0, GemmKind::kAuto);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("GPU"), std::string::npos) << made.status().message();
}

}  // namespace
}  // namespace ringo::train
