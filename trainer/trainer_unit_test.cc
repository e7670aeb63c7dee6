// The trainer's pieces that need no communicator: 16-bit conversions,
// buckets, the sampler and shards, IDX parsing, the ring model fit, the
// what-if model, the learning-rate schedule and the options.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "trainer/data.h"
#include "trainer/grad_sync.h"
#include "trainer/half.h"
#include "trainer/options.h"
#include "trainer/predict.h"
#include "trainer/ring_model.h"
#include "trainer/trainer.h"

namespace ringo::train {
namespace {

TEST(Half, Bf16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(3.140625f)), 3.140625f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to even (1).
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::nanf("")))));
  for (float v : {1e-3f, -0.37f, 12345.0f, 1e-30f}) {
    EXPECT_NEAR(Bf16ToFloat(FloatToBf16(v)), v, std::fabs(v) / 256) << v;
  }
}

TEST(Half, Fp16RoundTripsAndRounds) {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.9604645e-08f, 0.1f, -1e-6f}) {
    const float back = Fp16ToFloat(FloatToFp16(v));
    EXPECT_NEAR(back, v, std::fabs(v) / 2048 + 3e-8) << v;
  }
  EXPECT_EQ(FloatToFp16(1.0f), 0x3c00);
  EXPECT_EQ(FloatToFp16(65520.0f), 0x7c00);            // rounds to infinity
  EXPECT_EQ(FloatToFp16(1.0f + 1.0f / 2048), 0x3c00);  // halfway: to even
  EXPECT_EQ(FloatToFp16(1.0f + 3.0f / 2048), 0x3c02);
  EXPECT_EQ(FloatToFp16(-0.0f), 0x8000);
  // Every fp16 value converts to float and back unchanged.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;  // NaNs
    ASSERT_EQ(FloatToFp16(Fp16ToFloat(static_cast<uint16_t>(h))), h) << h;
  }
}

std::vector<ParamInfo> Params(const std::vector<size_t>& counts) {
  std::vector<ParamInfo> p;
  size_t offset = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    p.push_back(ParamInfo{"p" + std::to_string(i), offset, counts[i], 0});
    offset += counts[i];
  }
  return p;
}

TEST(Buckets, DdpRuleClosesABucketOnceItReachesTheCap) {
  // 100-float cap = 400 bytes.
  const auto b = MakeBuckets(Params({10, 50, 60, 200, 5, 5}), 400);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].count, 120u);  // 10 + 50 + 60: reached 100 with the third
  EXPECT_EQ(b[1].count, 200u);  // alone over the cap
  EXPECT_EQ(b[2].count, 10u);
  EXPECT_EQ(b[2].offset, 320u);
  EXPECT_EQ(b[0].layers, "p0..p2");
  EXPECT_EQ(b[1].layers, "p3");
  EXPECT_EQ(MakeBuckets(Params({10, 10}), size_t{1} << 30).size(), 1u);
  EXPECT_EQ(MakeBuckets(Params({10, 10}), 0).size(), 2u);  // cap 0: one per parameter
}

TEST(Buckets, TheFirstBucketClosesAtItsOwnSmallerCap) {
  // Caps of 100 floats, the first 20 (DDP: 25 MiB and 1 MiB).
  const auto b = MakeBuckets(Params({10, 50, 60, 200, 5, 5}), 400, 80);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].count, 60u);   // 10 + 50: reached 20 with the second
  EXPECT_EQ(b[1].count, 260u);  // 60 + 200
  EXPECT_EQ(b[2].count, 10u);
  // A first cap above the cap changes nothing.
  EXPECT_EQ(MakeBuckets(Params({10, 50, 60, 200, 5, 5}), 400, 4000)[0].count, 120u);
}

TEST(Sampler, SamePermutationEverywhereAndEpochsDiffer) {
  const auto a = EpochPermutation(1000, 7, 0);
  EXPECT_EQ(a, EpochPermutation(1000, 7, 0));
  EXPECT_NE(a, EpochPermutation(1000, 7, 1));
  EXPECT_NE(a, EpochPermutation(1000, 8, 0));
  EXPECT_EQ(std::set<int>(a.begin(), a.end()).size(), 1000u);
  const auto zero = EpochPermutation(100, 0, 0);
  int moved = 0;
  for (int i = 0; i < 100; ++i) moved += zero[i] != i;
  EXPECT_GT(moved, 50);
}

// Equal shares (48 over 1-4 ranks) and the unequal ones an elastic shrink
// leaves (48 over 5 and 7 ranks, 48/2 over 5): every sample of every global
// batch once, shares differing by at most one row, the larger ones first.
TEST(Sampler, ShardsCoverEachGlobalBatchOnce) {
  for (int ranks : {1, 2, 3, 4, 5, 7}) {
    for (int accum : {1, 2}) {
      ShardPlan plan{48, accum, ranks};
      std::vector<int> seen(3 * 48, 0);
      for (int64_t step = 0; step < 3; ++step) {
        for (int m = 0; m < accum; ++m) {
          for (int r = 0; r < ranks; ++r) {
            for (int i = 0; i < plan.micro(r); ++i) ++seen[plan.First(step, m, r) + i];
          }
        }
      }
      for (int v : seen) ASSERT_EQ(v, 1) << ranks << " ranks, accum " << accum;
      EXPECT_LE(plan.max_micro() - plan.micro(ranks - 1), 1);
      for (int r = 1; r < ranks; ++r) EXPECT_LE(plan.micro(r), plan.micro(r - 1));
      if ((48 / accum) % ranks == 0) EXPECT_EQ(plan.micro(ranks - 1), 48 / accum / ranks);
    }
  }
}

std::vector<uint8_t> Header(uint32_t magic, std::vector<uint32_t> dims) {
  std::vector<uint8_t> out;
  auto put = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
  };
  put(magic);
  for (uint32_t d : dims) put(d);
  return out;
}

TEST(Idx, ParsesAndRejects) {
  auto images = Header(0x803, {2, 2, 3});
  for (int i = 0; i < 12; ++i) images.push_back(static_cast<uint8_t>(i * 20));
  auto labels = Header(0x801, {2});
  labels.push_back(3);
  labels.push_back(9);
  auto d = ParseIdx(images, labels, "test");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->count, 2);
  EXPECT_EQ(d->features, 6);
  std::vector<float> x(6);
  uint8_t l = 0;
  GatherRange(*d, 1, 1, x.data(), &l);
  EXPECT_EQ(l, 9);
  EXPECT_NEAR(x[0], (120 / 255.0f - kPixelMean) / kPixelStd, 1e-6);
  auto short_images = images;
  short_images.pop_back();
  EXPECT_FALSE(ParseIdx(short_images, labels, "t").ok());
  auto bad_label = labels;
  bad_label.back() = 10;
  EXPECT_FALSE(ParseIdx(images, bad_label, "t").ok());
  EXPECT_FALSE(ParseIdx(labels, labels, "t").ok());
  EXPECT_FALSE(LoadIdx("/nonexistent", "train").ok());
}

TEST(RingModel, FitRecoversAlphaAndBeta) {
  RingModel truth{20.0, 8.0, true};
  for (int n : {2, 3, 4}) {
    std::vector<CalibrationPoint> pts;
    for (double s : {1 << 20, 4 << 20, 16 << 20}) pts.push_back({s, truth.PredictMs(s, n)});
    const RingModel fit = FitRingModel(pts, n);
    ASSERT_TRUE(fit.valid);
    EXPECT_NEAR(fit.alpha_us, 20.0, 1e-6);
    EXPECT_NEAR(fit.beta_gbs, 8.0, 1e-9);
    EXPECT_LT(MaxFitError(fit, pts, n), 1e-9);
  }
  // t = 2(N-1)(alpha + S/(N beta)): 2 ranks, 1 MB at 1 GB/s, alpha 0: 1 ms.
  EXPECT_NEAR((RingModel{0, 1, true}).PredictMs(1e6, 2), 1.0, 1e-12);
  EXPECT_EQ((RingModel{0, 1, true}).PredictMs(1e6, 1), 0.0);
  // Recursive doubling: 8 ranks, 3 steps of alpha + S / beta; 6 ranks, 2 + 2;
  // 8 B over 16 ranks, 4 alphas against the ring's 30.
  EXPECT_NEAR((RingModel{10, 1, true}).PredictDoublingMs(1e6, 8), 3 * (0.01 + 1.0), 1e-12);
  EXPECT_NEAR((RingModel{10, 1, true}).PredictDoublingMs(1e6, 6), 4 * (0.01 + 1.0), 1e-12);
  EXPECT_NEAR((RingModel{5, 12.5, true}).PredictMs(8, 16) / (RingModel{5, 12.5, true}).PredictDoublingMs(8, 16), 7.5,
              0.01);
  EXPECT_FALSE(FitRingModel({{1e6, 1.0}}, 2).valid);
  const auto sizes = CalibrationSizes({size_t{30} << 20, 7000000, 4, 100}, 4);
  EXPECT_EQ(sizes,
            (std::vector<size_t>{size_t{256} << 10, size_t{1} << 20, size_t{4} << 20, 7000000,
                                 size_t{16} << 20, size_t{30} << 20, size_t{64} << 20}));
  // The fit keeps to the buckets' range (7 MB..30 MiB: 7 MB, 16 MiB, 30 MiB).
  std::vector<CalibrationPoint> pts;
  for (size_t s : sizes) pts.push_back({static_cast<double>(s), 1.0});
  double lo = 0, hi = 0;
  auto fit = SelectFitPoints(pts, {size_t{30} << 20, 7000000, 4}, &lo, &hi);
  ASSERT_EQ(fit.size(), 3u);
  EXPECT_EQ(lo, 7000000);
  EXPECT_EQ(hi, 30 << 20);
  // One bucket of 30 MiB: a quarter below to four times above (16, 30, 64 MiB).
  fit = SelectFitPoints(pts, {size_t{30} << 20}, &lo, &hi);
  EXPECT_EQ(fit.size(), 3u);
  EXPECT_EQ(lo, 16 << 20);
  // No bucket of 1 MiB: every size from 1 MiB.
  fit = SelectFitPoints(pts, {1000}, &lo, &hi);
  EXPECT_EQ(fit.size(), 6u);
  EXPECT_EQ(lo, 1 << 20);
}

TEST(Predict, OverlapHidesAllButTheLastBucket) {
  PredictInput in;
  in.fwd_ms_per_sample = 0.01;
  in.bwd_ms_per_sample = 0.02;  // 128 samples: 1.28 + 2.56 ms
  in.bucket_bytes = {30e6, 3e6};
  in.intra = RingModel{0, 100, true};  // 2 ranks: 30 MB -> 0.3 ms, 3 MB -> 0.03 ms
  in.inter = in.intra;
  const PredictRow one = PredictStep(in, 1);
  EXPECT_EQ(one.exposed_ms, 0);
  EXPECT_DOUBLE_EQ(one.efficiency, 1);
  const PredictRow two = PredictStep(in, 2);
  EXPECT_NEAR(two.comm_ms, 0.33, 1e-9);
  // Bucket 0 is ready at 30/33 of the 2.56 ms backward pass and takes 0.3 ms,
  // so it ends after the pass; bucket 1 follows it.
  EXPECT_NEAR(two.exposed_ms, 2.56 * 30 / 33 + 0.33 - 2.56, 1e-9);
  in.bucket_bytes = {3e6, 30e6};  // the small bucket first: only the last one shows
  EXPECT_NEAR(PredictStep(in, 2).exposed_ms, 0.3, 1e-9);
  in.bucket_bytes = {30e6, 3e6};
  in.overlap = false;
  EXPECT_NEAR(PredictStep(in, 2).exposed_ms, 0.33, 1e-9);
  in.gpus_per_host = 2;
  in.inter = RingModel{0, 10, true};
  EXPECT_EQ(PredictStep(in, 4).hosts, 2);
  EXPECT_NEAR(PredictStep(in, 4).comm_ms, 2 * 3 * 33e6 / (4 * 10e9) * 1e3, 1e-9);
  EXPECT_EQ(PowersOfTwo(1024).size(), 11u);
}

TEST(Schedule, LinearScalingWarmupAndCosine) {
  Options o;
  o.lr = 0.1;
  o.base_batch = 256;
  EXPECT_DOUBLE_EQ(LearningRate(o, 256, 0, 100, 10), 0.1);      // no scaling, no warm-up
  EXPECT_NEAR(LearningRate(o, 256, 50, 100, 10), 0.05, 1e-12);  // cosine half way
  // 4x the batch: 0.4 after one epoch of warm-up from 0.1.
  EXPECT_DOUBLE_EQ(LearningRate(o, 1024, 0, 100, 10), 0.1);
  EXPECT_NEAR(LearningRate(o, 1024, 5, 100, 10), 0.25, 1e-12);
  EXPECT_NEAR(LearningRate(o, 1024, 10, 100, 10), 0.4, 1e-12);
  o.lr_scale_linear = false;
  o.cosine = false;
  EXPECT_DOUBLE_EQ(LearningRate(o, 1024, 10, 100, 10), 0.1);
}

TEST(Options, ParseAndRefuse) {
  const char* argv[] = {"ringo-train",  "-np",          "2",    "--width=64",  "--sync-bn",
                        "--no-overlap", "--grad-dtype", "bf16", "--bucket-mb", "0.5"};
  auto o = ParseOptions(10, const_cast<char**>(argv));
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->num_procs, 2);
  EXPECT_EQ(o->model.width, 64);
  EXPECT_TRUE(o->model.batch_norm);  // implied by --sync-bn
  EXPECT_FALSE(o->overlap);
  EXPECT_EQ(o->grad_dtype, GradDtype::kBf16);
  EXPECT_DOUBLE_EQ(o->bucket_mb, 0.5);
  const char* bad[] = {"ringo-train", "--grad-dtype", "int8"};
  EXPECT_FALSE(ParseOptions(3, const_cast<char**>(bad)).ok());
  const char* unknown[] = {"ringo-train", "--frobnicate"};
  EXPECT_FALSE(ParseOptions(2, const_cast<char**>(unknown)).ok());
  const char* missing[] = {"ringo-train", "--batch"};
  EXPECT_FALSE(ParseOptions(2, const_cast<char**>(missing)).ok());
}

}  // namespace
}  // namespace ringo::train
