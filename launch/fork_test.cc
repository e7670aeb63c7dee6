// -np's fork: every rank runs, a failing rank's status comes back, and
// --bind-to core puts each rank on a CPU of its own.
#include "launch/fork.h"

#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace ringo::launch {
namespace {

int AllowedCpuCount() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  return CPU_COUNT(&set);
}

TEST(RunForkedRanks, EveryRankRunsAndAFailureComesBack) {
  EXPECT_EQ(RunForkedRanks("fork_test", 3, [](int) { return 0; }), 0);
  EXPECT_EQ(RunForkedRanks("fork_test", 3, [](int rank) { return rank == 1 ? 7 : 0; }), 7);
}

TEST(RunForkedRanks, BindToCorePutsEachRankOnACpuOfItsOwn) {
  const int cpus = AllowedCpuCount();
  if (cpus < 2) GTEST_SKIP() << "one CPU: nothing to tell ranks apart by";
  // Each rank writes the one CPU it may run on to a file; exit 1 when it
  // may run on more than one.
  char dir[] = "/tmp/ringo-fork-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string base = dir;
  const int rc = RunForkedRanks(
      "fork_test", 2,
      [&](int rank) {
        cpu_set_t set;
        CPU_ZERO(&set);
        if (sched_getaffinity(0, sizeof(set), &set) != 0 || CPU_COUNT(&set) != 1) return 1;
        int cpu = -1;
        for (int c = 0; c < CPU_SETSIZE && cpu < 0; ++c) {
          if (CPU_ISSET(c, &set)) cpu = c;
        }
        FILE* f = std::fopen((base + "/" + std::to_string(rank)).c_str(), "w");
        if (f == nullptr) return 2;
        std::fprintf(f, "%d", cpu);
        std::fclose(f);
        return 0;
      },
      /*bind_to_core=*/true);
  ASSERT_EQ(rc, 0);
  int cpu[2] = {-1, -1};
  for (int r = 0; r < 2; ++r) {
    FILE* f = std::fopen((base + "/" + std::to_string(r)).c_str(), "r");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fscanf(f, "%d", &cpu[r]), 1);
    std::fclose(f);
    std::remove((base + "/" + std::to_string(r)).c_str());
  }
  rmdir(dir);
  EXPECT_NE(cpu[0], cpu[1]);
  // More ranks than CPUs: unbound (each may run anywhere it could before).
  const int unbound = RunForkedRanks(
      "fork_test", cpus + 1,
      [&](int) {
        cpu_set_t set;
        CPU_ZERO(&set);
        return sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) == cpus ? 0 : 1;
      },
      /*bind_to_core=*/true);
  EXPECT_EQ(unbound, 0);
}

}  // namespace
}  // namespace ringo::launch
