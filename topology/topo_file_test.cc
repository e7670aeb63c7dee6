// Dump and load: byte-identical round trips of every fixture and of this
// machine, file I/O, errors, and the RINGO_TOPO_FILE / RINGO_TOPO_DUMP_FILE
// entry points.
#include "topology/topo_file.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "base/config.h"
#include "topology/discovery.h"
#include "topology/test_fixtures.h"
#include "topology/topology.h"

namespace ringo::topology {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void ExpectRoundTrip(const Graph& g, const std::string& what) {
  PathMatrix paths(g);
  std::vector<Ring> rings;
  if (g.num_gpus() > 0) {
    auto found = SearchRings(g, paths, {});
    ASSERT_TRUE(found.ok()) << what;
    rings = *found;
  }
  std::string text = DumpTopology(g, rings);
  auto loaded = ParseTopology(text, what);
  ASSERT_TRUE(loaded.ok()) << what << ": " << loaded.status().ToString();
  EXPECT_TRUE(loaded->graph == g) << what;
  EXPECT_EQ(loaded->rings, rings) << what;
  EXPECT_EQ(DumpTopology(loaded->graph, loaded->rings), text) << what;
  // And what is computed from it is the same.
  PathMatrix again(loaded->graph);
  for (int a : g.gpus()) {
    for (int b : g.gpus()) EXPECT_EQ(again.Get(a, b).Label(), paths.Get(a, b).Label()) << what;
  }
}

TEST(TopoFile, FixturesRoundTrip) {
  for (const std::string& name : testing::FixtureNames()) {
    ExpectRoundTrip(testing::LoadFixture(name), name);
  }
}

TEST(TopoFile, ThisMachineRoundTrips) {
  auto g = DiscoverTopology(DiscoveryOptions{});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ExpectRoundTrip(*g, "this machine");
}

TEST(TopoFile, MultiHostRingsRoundTrip) {
  Graph g = testing::LoadFixture("dgx_a100");
  PathMatrix paths(g);
  RingSearchOptions options;
  options.multi_host = true;
  auto rings = SearchRings(g, paths, options);
  ASSERT_TRUE(rings.ok());
  auto loaded = ParseTopology(DumpTopology(g, *rings), "a100");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->rings, *rings);
  EXPECT_GE(loaded->rings[0].nic_in, 0);
}

TEST(TopoFile, WriteAndReadFiles) {
  Graph g = testing::LoadFixture("nvlink_bridge_4gpu");
  std::string path = ::testing::TempDir() + "/ringo_topo_file_test.topo";
  ASSERT_TRUE(WriteTopologyFile(path, g, {}).ok());
  auto file = ReadTopologyFile(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_TRUE(file->graph == g);
  EXPECT_TRUE(file->rings.empty());
  EXPECT_TRUE(LooksLikeTopologyDump(ReadAll(path)));
  // LoadTopology tells a dump from an hwloc XML file by content.
  TopologySource source;
  source.file = path;
  auto topo = LoadTopology(source);
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  EXPECT_TRUE(topo->graph == g);
  EXPECT_EQ(topo->origin, "dump " + path);
  source.file = testing::FixtureXml("nvlink_bridge_4gpu");
  source.nvlink_file = testing::FixtureNvlink("nvlink_bridge_4gpu");
  topo = LoadTopology(source);
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  EXPECT_TRUE(topo->graph == g);
  EXPECT_EQ(topo->origin, "hwloc XML " + source.file);
  std::remove(path.c_str());
  EXPECT_FALSE(ReadTopologyFile(path).ok());
}

TEST(TopoFile, ConfigEntryPoints) {
  Graph g = testing::LoadFixture("two_socket_2gpu");
  std::string dir = ::testing::TempDir();
  setenv("RINGO_TOPO_DUMP_FILE", (dir + "/dump-%h.topo").c_str(), 1);
  setenv("RINGO_TOPO_FILE", testing::FixtureXml("dgx_h100").c_str(), 1);
  setenv("RINGO_NVLINK_FILE", testing::FixtureNvlink("dgx_h100").c_str(), 1);
  base::ReloadConfigForTesting();
  ASSERT_TRUE(DumpTopologyIfRequested(base::GetConfig(), g, {}).ok());
  auto file = ReadTopologyFile(dir + "/dump-two-socket.topo");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_TRUE(file->graph == g);
  auto topo = LoadTopology(SourceFromConfig(base::GetConfig()));
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  EXPECT_EQ(topo->graph.num_gpus(), 8);
  EXPECT_EQ(PathMatrix(topo->graph).Gpu(0, 1).Label(), "NV18");
  unsetenv("RINGO_TOPO_DUMP_FILE");
  unsetenv("RINGO_TOPO_FILE");
  unsetenv("RINGO_NVLINK_FILE");
  base::ReloadConfigForTesting();
  EXPECT_TRUE(DumpTopologyIfRequested(base::GetConfig(), g, {}).ok());  // nothing to do
}

TEST(TopoFile, RejectsBadDumps) {
  Graph g = testing::LoadFixture("two_socket_2gpu");
  std::string good = DumpTopology(g, {Ring{{0, 1}, -1, -1, 22.0}});
  ASSERT_TRUE(ParseTopology(good, "good").ok());
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? s : s.replace(at, from.size(), to);
  };
  const std::string bad[] = {
      "",                                            // empty
      good.substr(0, good.size() - 4),               // no end
      replace("# ringo topology 1", "# something"),  // header
      replace("kind=gpu", "kind=tpu"),               // unknown kind
      replace("node 1 ", "node 7 "),                 // index out of sequence
      replace(" numa=0", " numa=zero"),              // not a number
      replace(" gbps=22.000", " gbps=-1"),           // negative bandwidth
      replace(" parent=-1", " parent=3"),            // a CPU with a parent
      replace("gpus=0,1", "gpus=0,5"),               // no GPU 5
      replace("gpus=0,1", "gpus=0,,1"),              // empty item
      replace(" cpuset=", " "),                      // missing field
      good + "node 99 kind=cpu\n",                   // after end
      replace("link 0 ", "bogus 0 "),                // unknown line
  };
  for (const std::string& text : bad) {
    EXPECT_FALSE(ParseTopology(text, "bad").ok()) << text;
  }
}

}  // namespace
}  // namespace ringo::topology
