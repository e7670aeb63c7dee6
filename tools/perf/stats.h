// Order statistics for the benchmark's timings. Pure functions.
#ifndef RINGO_TOOLS_PERF_STATS_H_
#define RINGO_TOOLS_PERF_STATS_H_

#include <vector>

namespace ringo::perf {

// The q-quantile (0 <= q <= 1) of ascending `sorted`, interpolating linearly
// between neighbours (q = 0.5 of an even count is the mean of the middle two);
// 0 for an empty vector.
double Quantile(const std::vector<double>& sorted, double q);

}  // namespace ringo::perf

#endif  // RINGO_TOOLS_PERF_STATS_H_
