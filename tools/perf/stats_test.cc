#include "tools/perf/stats.h"

#include <gtest/gtest.h>

namespace ringo::perf {
namespace {

TEST(Quantile, MedianOfOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ(Quantile({1, 2, 9}, 0.5), 2);
  EXPECT_DOUBLE_EQ(Quantile({1, 2, 4, 9}, 0.5), 3);
  EXPECT_DOUBLE_EQ(Quantile({7}, 0.5), 7);
}

TEST(Quantile, EndsAndInterpolation) {
  const std::vector<double> v = {0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100};
  EXPECT_DOUBLE_EQ(Quantile(v, 0.0), 0);
  EXPECT_DOUBLE_EQ(Quantile(v, 1.0), 100);
  EXPECT_DOUBLE_EQ(Quantile(v, 0.1), 10);
  EXPECT_DOUBLE_EQ(Quantile(v, 0.9), 90);
  EXPECT_DOUBLE_EQ(Quantile({0, 10}, 0.25), 2.5);
}

TEST(Quantile, EmptyAndOutOfRange) {
  EXPECT_DOUBLE_EQ(Quantile({}, 0.5), 0);
  EXPECT_DOUBLE_EQ(Quantile({1, 2}, -1), 1);
  EXPECT_DOUBLE_EQ(Quantile({1, 2}, 2), 2);
}

}  // namespace
}  // namespace ringo::perf
