#include "transport/shm/shared_region.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "gtest/gtest.h"

namespace ringo::transport {
namespace {

TEST(SharedRegionTest, AllocFindFree) {
  auto p = SharedAlloc(3 * 4096 + 5);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  char* base = static_cast<char*>(*p);
  RegionName name;
  uint64_t offset = 0;
  ASSERT_TRUE(FindSharedRegion(base + 100, 1000, &name, &offset));
  EXPECT_EQ(offset, 100u);
  EXPECT_EQ(name.pid, getpid());
  EXPECT_GE(name.fd, 0);
  EXPECT_EQ(name.bytes, 3u * 4096 + 5);
  EXPECT_TRUE(FindSharedRegion(base, 3 * 4096 + 5, &name, &offset)) << "the whole region";
  EXPECT_FALSE(FindSharedRegion(base + 100, 3 * 4096, &name, &offset)) << "runs past the end";
  int local = 0;
  EXPECT_FALSE(FindSharedRegion(&local, sizeof(local), &name, &offset)) << "stack memory";

  auto q = SharedAlloc(64);
  ASSERT_TRUE(q.ok());
  RegionName other;
  ASSERT_TRUE(FindSharedRegion(*q, 64, &other, &offset));
  EXPECT_NE(other.id, name.id) << "every region has its own id";

  EXPECT_TRUE(SharedFree(base).ok());
  EXPECT_FALSE(FindSharedRegion(base + 100, 10, &name, &offset)) << "freed";
  EXPECT_FALSE(SharedFree(base).ok()) << "double free";
  EXPECT_FALSE(SharedFree(&local).ok());
  EXPECT_FALSE(SharedAlloc(0).ok());
  EXPECT_TRUE(SharedFree(*q).ok());
}

TEST(SharedRegionTest, OwnRegionMapsToItself) {
  auto p = SharedAlloc(8192);
  ASSERT_TRUE(p.ok());
  RegionName name;
  uint64_t offset = 0;
  ASSERT_TRUE(FindSharedRegion(*p, 8192, &name, &offset));
  PeerRegions peers;
  auto mapped = peers.Map(name);
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  EXPECT_EQ(*mapped, static_cast<char*>(*p));
  EXPECT_TRUE(SharedFree(*p).ok());
}

// A child maps the parent's region through /proc/<pid>/fd and writes to it;
// the parent sees the bytes. The child also checks the cache and its bound.
TEST(SharedRegionTest, AnotherProcessMapsAndWrites) {
  auto p = SharedAlloc(1 << 20);
  ASSERT_TRUE(p.ok());
  auto small = SharedAlloc(4096);
  ASSERT_TRUE(small.ok());
  RegionName name, small_name;
  uint64_t offset = 0;
  ASSERT_TRUE(FindSharedRegion(*p, 1, &name, &offset));
  ASSERT_TRUE(FindSharedRegion(*small, 1, &small_name, &offset));
  std::memset(*p, 0, 1 << 20);
  static_cast<char*>(*p)[12345] = 7;
  // The child cannot be its parent: name the region as if from another pid
  // by forking and mapping from the child.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // In the child, getpid() differs from name.pid, so Map opens /proc/<parent>/fd/<fd>.
    PeerRegions peers(/*capacity=*/1);
    auto m = peers.Map(name);
    if (!m.ok()) _exit(10);
    if ((*m)[12345] != 7) _exit(11);
    std::memset(*m + 4096, 0x42, 4096);
    auto again = peers.Map(name);
    if (!again.ok() || *again != *m) _exit(12);  // cached
    auto s = peers.Map(small_name);              // evicts the first
    if (!s.ok() || peers.mapped() != 1) _exit(13);
    RegionName bogus = name;
    bogus.bytes += 4096;  // the fd now names a file of another size
    if (peers.Map(bogus).ok()) _exit(14);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "exit codes: 10 map failed, 11 wrong bytes, 12 not cached, "
                                       "13 not evicted, 14 a mismatched size was accepted";
  EXPECT_EQ(static_cast<unsigned char*>(*p)[4096], 0x42);
  EXPECT_EQ(static_cast<unsigned char*>(*p)[8191], 0x42);
  EXPECT_EQ(static_cast<unsigned char*>(*p)[8192], 0);
  EXPECT_TRUE(SharedFree(*p).ok());
  EXPECT_TRUE(SharedFree(*small).ok());
}

TEST(SharedRegionTest, UnknownPeerFailsWithTheReason) {
  RegionName name;
  name.pid = 0x7ffffff0;  // no such process
  name.fd = 3;
  name.id = 1;
  name.bytes = 4096;
  PeerRegions peers;
  auto m = peers.Map(name);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("/proc/"), std::string::npos) << m.status().ToString();
}

}  // namespace
}  // namespace ringo::transport
