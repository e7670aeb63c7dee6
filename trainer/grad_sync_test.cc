// GradSync on two thread ranks of host communicators: the thread way and
// the stream way (what --device uses), the second against the CPU
// backend, whose streams do each call at once. The averages, the order in
// which buckets go out, the times from the backend's events, and what the
// stream way refuses.
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "ringo/ringo.h"
#include "trainer/compute.h"
#include "trainer/grad_sync.h"
#include "trainer/mlp.h"

namespace ringo::train {
namespace {

constexpr int kRanks = 2;

// Parameters of 3000, 10, 2100, 10, 500 floats: buckets of at least 8 KiB
// (2048 floats) close after the first parameter, the third, the fifth.
std::vector<ParamInfo> Params() {
  std::vector<ParamInfo> p;
  size_t offset = 0;
  int i = 0;
  for (size_t count : {3000, 10, 2100, 10, 500}) {
    p.push_back(ParamInfo{"p" + std::to_string(i++), offset, count, 0});
    offset += count;
  }
  return p;
}

struct Outcome {
  std::vector<float> grads;
  std::vector<BucketTiming> timings;
  double exposed_ms = -1;
  bool ok = false;
  std::string error;
};

// One step on every rank: rank r's gradient element i is r + i / 1000, each
// parameter reported ready in backward order.
std::vector<Outcome> Step(bool streams, bool overlap) {
  ringoUniqueId id;
  EXPECT_EQ(ringoGetUniqueId(&id), ringoSuccess);
  std::vector<Outcome> out(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      Outcome& o = out[r];
      ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
      config.device_kind = RINGO_DEVICE_HOST;
      ringoComm_t comm = nullptr;
      if (ringoCommInitRankConfig(&comm, kRanks, id, r, &config) != ringoSuccess) {
        o.error = "init failed";
        return;
      }
      auto compute = MakeCpuCompute(1);
      const std::vector<ParamInfo> params = Params();
      const size_t n = params.back().offset + params.back().count;
      float* grads = compute->Alloc(n);
      {
        GradStreams s;
        if (streams) s = GradStreams{compute.get(), compute->NewStream()};
        GradSync sync(comm, grads, MakeBuckets(params, 8192, 8192), GradDtype::kFp32, overlap, false, s);
        base::Status st = sync.Start();
        for (size_t i = 0; i < n && st.ok(); ++i) grads[i] = static_cast<float>(r) + static_cast<float>(i % 1000) / 1000;
        if (st.ok()) {
          sync.BeginStep();
          for (int p = 0; p < static_cast<int>(params.size()); ++p) sync.ParamReady(p);
          st = sync.Finish();
        }
        if (st.ok()) st = sync.Settle(&o.exposed_ms);
        o.ok = st.ok();
        o.error = st.message();
        o.timings = sync.timings();
      }
      o.grads.assign(grads, grads + n);
      compute->Free(grads);
      ringoCommDestroy(comm);
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

void ExpectAveraged(const Outcome& o) {
  ASSERT_TRUE(o.ok) << o.error;
  for (size_t i = 0; i < o.grads.size(); ++i) {
    // (0 + x) and (1 + x) averaged: 0.5 + x, exact for these binary fractions' sums up to rounding of x.
    const float x = static_cast<float>(i % 1000) / 1000;
    ASSERT_NEAR(o.grads[i], 0.5f + x, 1e-6f) << i;
  }
}

TEST(GradSync, ThreadAndStreamWaysAverageEveryBucket) {
  for (bool streams : {false, true}) {
    for (bool overlap : {true, false}) {
      SCOPED_TRACE(std::string(streams ? "streams" : "thread") + (overlap ? ", overlap" : ", no overlap"));
      for (const Outcome& o : Step(streams, overlap)) {
        ExpectAveraged(o);
        ASSERT_EQ(o.timings.size(), 3u);
        EXPECT_GE(o.exposed_ms, 0.0);
        for (const BucketTiming& t : o.timings) {
          EXPECT_GE(t.ready_ms, 0.0);
          EXPECT_GE(t.allreduce_ms, 0.0);
        }
      }
    }
  }
}

// The stream way takes its times from the backend's events: each bucket
// starts once it is ready and after the bucket before it has been
// all-reduced; without overlap none starts before the backward pass is done.
TEST(GradSync, StreamWayTimesFollowTheEvents) {
  for (bool overlap : {true, false}) {
    SCOPED_TRACE(overlap ? "overlap" : "no overlap");
    for (const Outcome& o : Step(/*streams=*/true, overlap)) {
      ASSERT_TRUE(o.ok) << o.error;
      for (size_t b = 0; b < o.timings.size(); ++b) {
        const BucketTiming& t = o.timings[b];
        EXPECT_GE(t.start_ms, t.ready_ms) << b;
        if (b > 0) {
          EXPECT_GE(t.start_ms, o.timings[b - 1].start_ms + o.timings[b - 1].allreduce_ms) << b;
          EXPECT_GE(t.ready_ms, o.timings[b - 1].ready_ms) << b;
        }
        if (!overlap) EXPECT_GE(t.start_ms, o.timings.back().ready_ms) << b;
      }
    }
  }
}

TEST(GradSync, StreamWayRefusesCompressedGradientsAndErrorFeedback) {
  auto compute = MakeCpuCompute(1);
  float* grads = compute->Alloc(16);
  const std::vector<Bucket> buckets = MakeBuckets({ParamInfo{"w", 0, 16, 0}}, 1024);
  GradStreams s{compute.get(), nullptr};
  GradSync bf16(nullptr, grads, buckets, GradDtype::kBf16, true, false, s);
  EXPECT_FALSE(bf16.Start().ok());
  GradSync feedback(nullptr, grads, buckets, GradDtype::kFp32, true, true, s);
  EXPECT_FALSE(feedback.Start().ok());
  compute->Free(grads);
}

}  // namespace
}  // namespace ringo::train
