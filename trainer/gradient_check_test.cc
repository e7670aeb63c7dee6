// Every layer's backward pass against central finite differences of the
// loss: Linear, ReLU, BatchNorm (batch statistics), softmax cross-entropy,
// through a small network so that each layer's input gradient is checked
// by the parameters of the layers before it. Also accumulation and the
// SyncBatchNorm reducer.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "trainer/compute.h"
#include "trainer/mlp.h"

namespace ringo::train {
namespace {

struct Net {
  std::unique_ptr<Compute> compute = MakeCpuCompute(1);
  std::unique_ptr<Mlp> mlp;
  std::vector<float> w, g;
  std::vector<float> x;
  std::vector<uint8_t> labels;
  int rows;

  Net(const ModelSpec& spec, int rows_in, uint64_t seed) : rows(rows_in) {
    mlp = std::make_unique<Mlp>(compute.get(), spec, rows);
    w.resize(mlp->num_params());
    g.resize(mlp->num_params());
    mlp->Bind(w.data(), g.data());
    mlp->Init(seed);
    uint64_t s = seed * 7919 + 17;
    x.resize(static_cast<size_t>(rows) * spec.inputs);
    for (float& v : x) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      v = static_cast<float>((s >> 40) % 2001) / 1000.0f - 1.0f;
    }
    for (int r = 0; r < rows; ++r) labels.push_back(static_cast<uint8_t>(r % spec.classes));
    // Biases away from zero so that few ReLU inputs sit near their kink.
    for (const ParamInfo& p : mlp->params()) {
      if (p.name.find("fc") == 0 && p.name.find(".bias") != std::string::npos) {
        for (size_t i = 0; i < p.count; ++i) w[p.offset + i] = 0.1f * ((i % 3) - 1.0f);
      }
    }
  }

  // Mean loss in double; writes the gradient when `backward`.
  double Loss(bool backward, bool accumulate = false, const StatsReducer* sync = nullptr) {
    EXPECT_TRUE(mlp->Forward(x.data(), rows, true, sync).ok());
    std::vector<float> d(static_cast<size_t>(rows) * mlp->spec().classes);
    compute->SoftmaxCrossEntropy(rows, mlp->spec().classes, mlp->logits(), labels.data(), 1.0f / rows, d.data());
    double loss = 0;
    int64_t correct = 0;
    compute->TakeMetrics(&loss, &correct);
    if (backward) {
      EXPECT_TRUE(mlp->Backward(x.data(), d.data(), rows, accumulate, sync, [](int) {}).ok());
    }
    return loss / rows;
  }
};

// Central differences in float parameters: step h = 1e-3, the loss in
// double. Tolerance: the truncation error O(h^2 |f'''|) (about 1e-6 of the
// gradient here) plus the forward pass's float rounding (about 1e-7 of a
// loss near 1.4, divided by 2h: 7e-5) -> 2e-4 absolute and 2e-3 relative.
// A step small enough that no ReLU input crosses its kink.
void CheckAll(Net& net, const char* what) {
  net.Loss(true);
  const std::vector<float> analytic = net.g;
  int checked = 0, bad = 0;
  for (const ParamInfo& p : net.mlp->params()) {
    for (size_t i = 0; i < p.count; ++i) {
      float& wi = net.w[p.offset + i];
      const float saved = wi;
      const float h = 1e-3f;
      wi = saved + h;
      const double up = net.Loss(false);
      wi = saved - h;
      const double down = net.Loss(false);
      wi = saved;
      const double numeric = (up - down) / (static_cast<double>(saved + h) - (saved - h));
      const double a = analytic[p.offset + i];
      ++checked;
      if (std::fabs(numeric - a) > 2e-4 + 2e-3 * std::fabs(a) + 2e-3 * std::fabs(numeric)) {
        if (++bad <= 10) {
          ADD_FAILURE() << what << ": " << p.name << "[" << i << "] analytic " << a << " numeric "
                        << numeric;
        }
      }
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << checked << " gradients differ";
  EXPECT_GT(checked, 20);
}

TEST(GradientCheck, LinearReluSoftmax) {
  Net net(ModelSpec{6, 5, 2, 4, false}, 7, 3);
  CheckAll(net, "linear+relu");
}

TEST(GradientCheck, LinearOnly) {
  Net net(ModelSpec{6, 5, 0, 4, false}, 5, 4);
  CheckAll(net, "linear (no hidden layer)");
}

TEST(GradientCheck, BatchNorm) {
  Net net(ModelSpec{6, 5, 2, 4, true}, 8, 5);
  CheckAll(net, "linear+bn+relu");
}

TEST(GradientCheck, AccumulationAddsGradients) {
  Net net(ModelSpec{6, 5, 2, 4, true}, 8, 6);
  net.Loss(true);
  const std::vector<float> once = net.g;
  net.Loss(true, /*accumulate=*/true);
  for (size_t i = 0; i < once.size(); ++i) {
    ASSERT_NEAR(net.g[i], 2 * once[i], 1e-6 + 1e-6 * std::fabs(once[i])) << i;
  }
}

// SyncBatchNorm with a reducer standing for two identical ranks: the
// statistics (sums and counts) double, so means and the input gradient are
// unchanged; the parameters' own gradients stay this rank's.
TEST(GradientCheck, SyncReducerOfIdenticalRanksChangesNothing) {
  Net net(ModelSpec{6, 5, 2, 4, true}, 8, 7);
  net.Loss(true);
  const std::vector<float> local = net.g;
  int calls = 0;
  StatsReducer twice = [&](double* data, size_t count) {
    ++calls;
    for (size_t i = 0; i < count; ++i) data[i] *= 2;
    return base::OkStatus();
  };
  net.Loss(true, false, &twice);
  EXPECT_EQ(calls, 4);  // two BN layers, forward and backward
  for (size_t i = 0; i < local.size(); ++i) {
    ASSERT_NEAR(net.g[i], local[i], 1e-6 + 1e-5 * std::fabs(local[i])) << i;
  }
}

TEST(GradientCheck, ParamsInBackwardOrder) {
  auto compute = MakeCpuCompute(1);
  Mlp mlp(compute.get(), ModelSpec{784, 32, 3, 10, true}, 4);
  const auto& p = mlp.params();
  ASSERT_EQ(p.front().name, "fc3.weight");
  EXPECT_EQ(p[2].name, "bn2.weight");
  EXPECT_EQ(p.back().name, "fc0.bias");
  size_t offset = 0;
  std::vector<int> order;
  for (const ParamInfo& q : p) {
    EXPECT_EQ(q.offset, offset);
    offset += q.count;
  }
  EXPECT_EQ(offset, mlp.num_params());
  EXPECT_EQ(mlp.num_params(), size_t{784 * 32 + 32 + 3 * 64 + 2 * (32 * 32 + 32) + 32 * 10 + 10});
  // The backward pass reports each parameter once, in this order.
  std::vector<float> w(mlp.num_params()), g(mlp.num_params());
  mlp.Bind(w.data(), g.data());
  mlp.Init(1);
  std::vector<float> x(4 * 784, 0.5f), d(4 * 10, 0.1f);
  ASSERT_TRUE(mlp.Forward(x.data(), 4, true, nullptr).ok());
  ASSERT_TRUE(
      mlp.Backward(x.data(), d.data(), 4, false, nullptr, [&](int i) { order.push_back(i); }).ok());
  ASSERT_EQ(order.size(), p.size());
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], static_cast<int>(i));
}

}  // namespace
}  // namespace ringo::train
