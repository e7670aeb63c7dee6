// Recursive doubling's steps (doubling_plan.h) for every rank count from 1
// to 70, run symbolically: every rank's steps in turn, messages queued per
// ordered pair as the point-to-point engine matches them (the k-th send
// from s to r meets the k-th receive r posts from s), a step's send posted
// before its receive waits, each partial result an expression over the
// ranks' inputs. Every rank must end, with every input exactly once and the
// same expression (so the same bits) as every other rank.
#include "collectives/engines/doubling_plan.h"

#include <algorithm>
#include <deque>
#include <map>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace ringo::collectives {
namespace {

TEST(DoublingPlan, EveryRankCountEndsWithTheSameSumOfEveryInput) {
  for (int n = 1; n <= 70; ++n) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    std::vector<std::vector<DoublingStep>> plan(n);
    std::vector<std::string> value(n);
    std::vector<size_t> at(n, 0);
    std::vector<bool> sent(n, false);  // the current step's send is out
    for (int r = 0; r < n; ++r) {
      plan[r] = DoublingSteps(r, n);
      value[r] = "x" + std::to_string(r);
    }
    std::map<std::pair<int, int>, std::deque<std::string>> wire;  // (from, to) -> messages in order
    bool progress = true;
    while (progress) {
      progress = false;
      for (int r = 0; r < n; ++r) {
        if (at[r] >= plan[r].size()) continue;
        const DoublingStep& s = plan[r][at[r]];
        ASSERT_TRUE(s.peer >= 0 && s.peer < n && s.peer != r) << "rank " << r << " step " << at[r];
        ASSERT_TRUE(s.send || s.recv);
        ASSERT_FALSE(s.combine && s.take);
        ASSERT_TRUE(s.recv || (!s.combine && !s.take));
        if (s.send && !sent[r]) {
          wire[{r, s.peer}].push_back(value[r]);
          sent[r] = true;
          progress = true;
        }
        std::string theirs;
        if (s.recv) {
          auto& in = wire[{s.peer, r}];
          if (in.empty()) continue;  // waits
          theirs = in.front();
          in.pop_front();
        }
        if (s.combine) value[r] = s.peer < r ? "(" + theirs + "+" + value[r] + ")" : "(" + value[r] + "+" + theirs + ")";
        if (s.take) value[r] = theirs;
        ++at[r];
        sent[r] = false;
        progress = true;
      }
    }
    for (int r = 0; r < n; ++r) ASSERT_EQ(at[r], plan[r].size()) << "rank " << r << " waits forever";
    for (const auto& [pair, left] : wire) ASSERT_TRUE(left.empty()) << pair.first << " -> " << pair.second << " unread";
    for (int r = 1; r < n; ++r) ASSERT_EQ(value[r], value[0]) << "rank " << r;
    std::map<int, int> seen;
    const std::regex token("x([0-9]+)");
    for (auto it = std::sregex_iterator(value[0].begin(), value[0].end(), token); it != std::sregex_iterator(); ++it) {
      ++seen[std::stoi((*it)[1])];
    }
    ASSERT_EQ(static_cast<int>(seen.size()), n);
    for (const auto& [rank, times] : seen) ASSERT_EQ(times, 1) << "x" << rank;
    // ceil(log2 N) rounds for the remaining ranks, two more where N is not a power of two.
    const int p = 1 << topology::DoublingRounds(n);
    size_t longest = 0;
    for (const auto& steps : plan) longest = std::max(longest, steps.size());
    EXPECT_EQ(static_cast<int>(longest), n == 1 ? 0 : topology::DoublingRounds(n) + (p != n ? 2 : 0));
  }
}

}  // namespace
}  // namespace ringo::collectives
