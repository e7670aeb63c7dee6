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

// Runs every rank's steps (plan[r]); "" or what went wrong.
std::string Simulate(const std::vector<std::vector<DoublingStep>>& plan) {
  const int n = static_cast<int>(plan.size());
  std::vector<std::string> value(n);
  std::vector<size_t> at(n, 0);
  std::vector<bool> sent(n, false);  // the current step's send is out
  for (int r = 0; r < n; ++r) value[r] = "x" + std::to_string(r);
  std::map<std::pair<int, int>, std::deque<std::string>> wire;  // (from, to) -> messages in order
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < n; ++r) {
      if (at[r] >= plan[r].size()) continue;
      const DoublingStep& s = plan[r][at[r]];
      if (!(s.peer >= 0 && s.peer < n && s.peer != r)) return "rank " + std::to_string(r) + ": a bad peer";
      if (!(s.send || s.recv) || (s.combine && s.take) || (!s.recv && (s.combine || s.take))) {
        return "rank " + std::to_string(r) + ": a step that means nothing";
      }
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
  for (int r = 0; r < n; ++r) {
    if (at[r] != plan[r].size()) return "rank " + std::to_string(r) + " waits forever";
  }
  for (const auto& [pair, left] : wire) {
    if (!left.empty()) return std::to_string(pair.first) + " -> " + std::to_string(pair.second) + " unread";
  }
  for (int r = 1; r < n; ++r) {
    if (value[r] != value[0]) return "rank " + std::to_string(r) + " holds " + value[r] + ", rank 0 " + value[0];
  }
  std::map<int, int> seen;
  const std::regex token("x([0-9]+)");
  for (auto it = std::sregex_iterator(value[0].begin(), value[0].end(), token); it != std::sregex_iterator(); ++it) {
    ++seen[std::stoi((*it)[1])];
  }
  if (static_cast<int>(seen.size()) != n) return "the result holds " + std::to_string(seen.size()) + " inputs";
  for (const auto& [rank, times] : seen) {
    if (times != 1) return "x" + std::to_string(rank) + " counted " + std::to_string(times) + " times";
  }
  return "";
}

TEST(DoublingPlan, EveryRankCountEndsWithTheSameSumOfEveryInput) {
  for (int n = 1; n <= 70; ++n) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    std::vector<std::vector<DoublingStep>> plan(n);
    for (int r = 0; r < n; ++r) plan[r] = DoublingSteps(r, n);
    ASSERT_EQ(Simulate(plan), "");
    // ceil(log2 N) rounds for the remaining ranks, two more where N is not a power of two.
    const int p = 1 << topology::DoublingRounds(n);
    size_t longest = 0;
    for (const auto& steps : plan) longest = std::max(longest, steps.size());
    EXPECT_EQ(static_cast<int>(longest), n == 1 ? 0 : topology::DoublingRounds(n) + (p != n ? 2 : 0));
  }
}

// Hosts of one rank and of several, contiguous or interleaved, of unequal
// sizes: the same result everywhere, and the network carries only the
// leaders' doubling steps.
TEST(DoublingPlan, HierarchicalEveryLayout) {
  std::vector<std::vector<int>> layouts = {{0}, {0, 0}, {0, 1}, {0, 0, 1, 1}, {0, 0, 0, 1, 1, 1, 2, 2, 2},
                                           {5, 7, 5, 7, 5, 7}, {0, 1, 1, 1, 2}, {3, 3, 3, 3, 3}};
  for (int hosts = 1; hosts <= 9; ++hosts) {
    for (int per = 1; per <= 4; ++per) {
      std::vector<int> h;
      for (int k = 0; k < hosts; ++k) {
        for (int j = 0; j < per; ++j) h.push_back(k);
      }
      layouts.push_back(h);
    }
  }
  for (const auto& host : layouts) {
    const int n = static_cast<int>(host.size());
    std::string name;
    for (int x : host) name += std::to_string(x) + ",";
    SCOPED_TRACE("hosts " + name);
    std::vector<std::vector<DoublingStep>> plan(n);
    for (int r = 0; r < n; ++r) plan[r] = HierarchicalSteps(r, host);
    ASSERT_EQ(Simulate(plan), "");
    int crossing = 0;  // the most steps any rank takes across hosts
    for (int r = 0; r < n; ++r) {
      int c = 0;
      for (const DoublingStep& s : plan[r]) c += host[s.peer] != host[r] ? 1 : 0;
      crossing = std::max(crossing, c);
    }
    std::vector<int> distinct(host);
    std::sort(distinct.begin(), distinct.end());
    const int hosts = static_cast<int>(std::unique(distinct.begin(), distinct.end()) - distinct.begin());
    const int p = 1 << topology::DoublingRounds(std::max(hosts, 1));
    EXPECT_EQ(crossing, hosts == 1 ? 0 : topology::DoublingRounds(hosts) + (p != hosts ? 2 : 0));
  }
}

}  // namespace
}  // namespace ringo::collectives
