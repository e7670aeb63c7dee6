// ringoCommSplit: every color/key pattern on 1 to 8 ranks (one color, two
// by parity, blocks of two, RINGO_SPLIT_NOCOLOR on some ranks, keys that
// reverse the order, equal keys, a color per rank), the children's ranks and
// sizes, and collectives and point-to-point on the children while the
// parent runs its own on other threads; ranks as threads (split inside a
// group from one thread, and from one thread per rank) and as forked
// processes (over the control mesh, no new unique id); a split of a split;
// a child that outlives its parent.
#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "ringo/ringo.h"
#include "tests/harness.h"

namespace ringo::tests {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kDeadline{120000};

struct Pattern {
  const char* name;
  int (*color)(int rank, int n);
  int (*key)(int rank, int n);
};

const Pattern kPatterns[] = {
    {"one_color", [](int, int) { return 0; }, [](int r, int) { return r; }},
    {"parity", [](int r, int) { return r % 2; }, [](int r, int) { return r; }},
    {"blocks_of_two_reversed", [](int r, int) { return r / 2; }, [](int r, int) { return -r; }},
    {"some_nocolor", [](int r, int) { return r % 3 == 0 ? RINGO_SPLIT_NOCOLOR : 7; }, [](int, int) { return 0; }},
    {"equal_keys", [](int r, int) { return r % 3; }, [](int, int) { return 5; }},
    {"color_per_rank", [](int r, int) { return r; }, [](int, int) { return 0; }},
    {"keys_rotate", [](int, int) { return 1; }, [](int r, int n) { return (r + 2) % n; }},
};

// The child `rank` should be in: its members (parent ranks) in order.
std::vector<int> Members(const Pattern& p, int rank, int n) {
  const int color = p.color(rank, n);
  std::vector<int> m;
  if (color < 0) return m;
  for (int r = 0; r < n; ++r) {
    if (p.color(r, n) == color) m.push_back(r);
  }
  std::stable_sort(m.begin(), m.end(), [&](int a, int b) { return p.key(a, n) < p.key(b, n); });
  return m;
}

// Checks the child's place, then runs an all-reduce of parent ranks and a
// send/recv ring on it.
std::string UseChild(const Pattern& p, int rank, int n, ringoComm_t child) {
  const std::vector<int> members = Members(p, rank, n);
  if (members.empty()) return child == nullptr ? "" : std::string(p.name) + ": a child for a rank without color";
  if (child == nullptr) return std::string(p.name) + ": no child";
  int size = 0, crank = -1;
  ringoCommCount(child, &size);
  ringoCommUserRank(child, &crank);
  const int want = static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
  if (size != static_cast<int>(members.size()) || crank != want) {
    return std::string(p.name) + ": child rank " + std::to_string(crank) + " of " + std::to_string(size) +
           ", expected " + std::to_string(want) + " of " + std::to_string(members.size());
  }
  for (int iter = 0; iter < 3; ++iter) {
    int64_t mine = rank + 1, sum = 0;
    if (ringoAllReduce(&mine, &sum, 1, ringoInt64, ringoSum, child, nullptr) != ringoSuccess) {
      return std::string(p.name) + ": child all-reduce: " + ringoGetLastError(child);
    }
    int64_t want_sum = 0;
    for (int m : members) want_sum += m + 1;
    if (sum != want_sum) return std::string(p.name) + ": child all-reduce " + std::to_string(sum);
    int token = rank, got = -1;
    ringoGroupStart();
    ringoSend(&token, 1, ringoInt32, (crank + 1) % size, child, nullptr);
    ringoRecv(&got, 1, ringoInt32, (crank + size - 1) % size, child, nullptr);
    if (ringoGroupEnd() != ringoSuccess) return std::string(p.name) + ": child ring: " + ringoGetLastError(child);
    if (got != members[(crank + size - 1) % size]) return std::string(p.name) + ": child ring got " + std::to_string(got);
  }
  return "";
}

// Parent all-reduces on this thread while `work` runs on another.
std::string WithParentBusy(ringoComm_t parent, int n, const std::function<std::string()>& work) {
  std::string child_result;
  std::thread t([&] { child_result = work(); });
  std::string parent_result;
  for (int iter = 0; iter < 20 && parent_result.empty(); ++iter) {
    float one = 1.0f, sum = 0.0f;
    if (ringoAllReduce(&one, &sum, 1, ringoFloat32, ringoSum, parent, nullptr) != ringoSuccess) {
      parent_result = std::string("parent all-reduce: ") + ringoGetLastError(parent);
    } else if (sum != static_cast<float>(n)) {
      parent_result = "parent all-reduce: " + std::to_string(sum);
    }
  }
  t.join();
  return !child_result.empty() ? child_result : parent_result;
}

// Every pattern, one split after another, on this rank's parent.
std::string SplitAll(int rank, int n, ringoComm_t parent) {
  for (const Pattern& p : kPatterns) {
    ringoComm_t child = nullptr;
    if (ringoCommSplit(parent, p.color(rank, n), p.key(rank, n), &child, nullptr) != ringoSuccess) {
      return std::string(p.name) + ": ringoCommSplit: " + ringoGetLastError(parent);
    }
    std::string bad = WithParentBusy(parent, n, [&] { return UseChild(p, rank, n, child); });
    if (child != nullptr) ringoCommDestroy(child);
    if (!bad.empty()) return bad;
  }
  return "";
}

class ThreadRanks : public ::testing::TestWithParam<int> {};

TEST_P(ThreadRanks, EveryPatternWhileTheParentWorks) {
  const int n = GetParam();
  std::vector<ringoComm_t> comms(n, nullptr);
  ASSERT_EQ(ringoCommInitAll(comms.data(), n, nullptr), ringoSuccess) << ringoGetLastError(nullptr);
  HarnessOptions options;
  options.make_unique_id = false;
  auto results = RunRanks(
      n, RankMode::kThreads, kDeadline,
      [&](int rank, int nranks, const ringoUniqueId&) { return SplitAll(rank, nranks, comms[rank]); }, options);
  EXPECT_ALL_RANKS_OK(results);
  for (ringoComm_t c : comms) ringoCommDestroy(c);
}

INSTANTIATE_TEST_SUITE_P(Split, ThreadRanks, ::testing::Values(1, 2, 3, 4, 5, 8));

TEST(Split, OneThreadSplitsEveryRankInAGroup) {
  const int n = 4;
  std::vector<ringoComm_t> comms(n, nullptr), children(n, nullptr);
  ASSERT_EQ(ringoCommInitAll(comms.data(), n, nullptr), ringoSuccess);
  ASSERT_EQ(ringoGroupStart(), ringoSuccess);
  for (int r = 0; r < n; ++r) ASSERT_EQ(ringoCommSplit(comms[r], r % 2, -r, &children[r], nullptr), ringoSuccess);
  ASSERT_EQ(ringoGroupEnd(), ringoSuccess) << ringoGetLastError(nullptr);
  // Children {0, 2} and {1, 3}, ranked by -rank: rank 2 first.
  for (int r = 0; r < n; ++r) {
    int crank = -1;
    ASSERT_NE(children[r], nullptr);
    ringoCommUserRank(children[r], &crank);
    EXPECT_EQ(crank, r < 2 ? 1 : 0) << "rank " << r;
  }
  std::vector<float> in(n, 0), out(n, 0);
  ASSERT_EQ(ringoGroupStart(), ringoSuccess);
  for (int r = 0; r < n; ++r) {
    in[r] = static_cast<float>(r);
    ringoAllReduce(&in[r], &out[r], 1, ringoFloat32, ringoSum, children[r], nullptr);
  }
  ASSERT_EQ(ringoGroupEnd(), ringoSuccess) << ringoGetLastError(nullptr);
  for (int r = 0; r < n; ++r) EXPECT_EQ(out[r], r % 2 == 0 ? 2.0f : 4.0f);
  for (ringoComm_t c : comms) ringoCommDestroy(c);
  // The children outlive their parents.
  ASSERT_EQ(ringoGroupStart(), ringoSuccess);
  for (int r = 0; r < n; ++r) ringoAllReduce(&in[r], &out[r], 1, ringoFloat32, ringoMax, children[r], nullptr);
  ASSERT_EQ(ringoGroupEnd(), ringoSuccess) << ringoGetLastError(nullptr);
  for (int r = 0; r < n; ++r) EXPECT_EQ(out[r], r % 2 == 0 ? 2.0f : 3.0f);
  for (ringoComm_t c : children) ringoCommDestroy(c);
}

class ProcessRanks : public ::testing::TestWithParam<int> {};

TEST_P(ProcessRanks, EveryPatternAndASplitOfASplit) {
  const int n = GetParam();
  auto results = RunRanks(n, RankMode::kProcesses, kDeadline,
                          [&](int rank, int nranks, const ringoUniqueId& id) -> std::string {
                            ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
                            config.device_kind = RINGO_DEVICE_HOST;
                            ringoComm_t comm = nullptr;
                            if (ringoCommInitRankConfig(&comm, nranks, id, rank, &config) != ringoSuccess) {
                              return std::string("init: ") + ringoGetLastError(nullptr);
                            }
                            std::string problem = SplitAll(rank, nranks, comm);
                            // A split of a split: halves, then each half by parity.
                            ringoComm_t half = nullptr, quarter = nullptr;
                            if (problem.empty() &&
                                ringoCommSplit(comm, rank < nranks / 2, rank, &half, nullptr) != ringoSuccess) {
                              problem = std::string("first split: ") + ringoGetLastError(comm);
                            }
                            int hrank = 0;
                            if (problem.empty()) ringoCommUserRank(half, &hrank);
                            if (problem.empty() &&
                                ringoCommSplit(half, hrank % 2, 0, &quarter, nullptr) != ringoSuccess) {
                              problem = std::string("second split: ") + ringoGetLastError(half);
                            }
                            ringoCommDestroy(comm);  // the grandchild outlives both
                            if (problem.empty()) {
                              int size = 0;
                              ringoCommCount(quarter, &size);
                              float one = 1.0f, sum = 0.0f;
                              if (ringoAllReduce(&one, &sum, 1, ringoFloat32, ringoSum, quarter, nullptr) !=
                                      ringoSuccess ||
                                  sum != static_cast<float>(size)) {
                                problem = std::string("grandchild all-reduce: ") + ringoGetLastError(quarter);
                              }
                            }
                            if (quarter != nullptr) ringoCommDestroy(quarter);
                            if (half != nullptr) ringoCommDestroy(half);
                            return problem;
                          });
  EXPECT_ALL_RANKS_OK(results);
}

INSTANTIATE_TEST_SUITE_P(Split, ProcessRanks, ::testing::Values(2, 3, 4));

}  // namespace
}  // namespace ringo::tests
