// Discovery from the hwloc XML fixtures and from this machine; the path
// matrix of every fixture, in nvidia-smi's notation; NVLink overlays; graph
// invariants.
#include "topology/discovery.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "topology/nvlink.h"
#include "topology/paths.h"
#include "topology/test_fixtures.h"
#include "topology/topology.h"

namespace ringo::topology {
namespace {

using testing::LoadFixture;

int CountKind(const Graph& g, NodeKind kind) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.kind == kind;
  return n;
}

// The GPU rows of the path matrix (GPU then NIC columns), cells separated by spaces.
std::vector<std::string> MatrixRows(const Graph& g) {
  PathMatrix paths(g);
  std::vector<int> cols = g.gpus();
  cols.insert(cols.end(), g.nics().begin(), g.nics().end());
  std::vector<std::string> rows;
  for (int gpu : g.gpus()) {
    std::string row;
    for (int c : cols) row += (row.empty() ? "" : " ") + paths.Get(gpu, c).Label();
    rows.push_back(row);
  }
  return rows;
}

TEST(Discovery, DgxH100Structure) {
  Graph g = LoadFixture("dgx_h100");
  EXPECT_EQ(g.host, "dgx-h100");
  EXPECT_EQ(g.num_gpus(), 8);
  EXPECT_EQ(g.num_nics(), 8);
  EXPECT_EQ(g.cpus().size(), 2u);
  EXPECT_EQ(CountKind(g, NodeKind::kHostBridge), 8);
  EXPECT_EQ(CountKind(g, NodeKind::kPciSwitch), 8);  // root and downstream ports merged
  EXPECT_EQ(CountKind(g, NodeKind::kNvSwitch), 1);
  const Node& gpu0 = g.node(g.gpus()[0]);
  EXPECT_EQ(gpu0.name, "GPU0");
  EXPECT_EQ(gpu0.bus_id, "0000:19:00.0");
  EXPECT_EQ(gpu0.pci_vendor, 0x10deu);
  EXPECT_EQ(gpu0.pci_device, 0x2330u);
  EXPECT_EQ(gpu0.numa, 0);
  EXPECT_EQ(g.node(g.gpus()[7]).numa, 1);
  const Node& nic0 = g.node(g.nics()[0]);
  EXPECT_EQ(nic0.name, "mlx5_0");
  EXPECT_EQ(nic0.netdev, "ibp24s0");
  EXPECT_EQ(g.node(g.nics()[7]).name, "mlx5_11");
  const Node& cpu1 = g.node(g.cpus()[1]);
  EXPECT_EQ(cpu1.package, 1);
  EXPECT_EQ(cpu1.cpu_vendor, "GenuineIntel");
  EXPECT_EQ(cpu1.cpuset, "4-7");
  // PCIe Gen5 x16 (hwloc: 63.015 GB/s raw) at 80%.
  EXPECT_DOUBLE_EQ(g.link(g.Uplink(g.gpus()[0])).gbps, 50.412);
}

TEST(Discovery, DgxA100HasEightNumaNodesInTwoPackages) {
  Graph g = LoadFixture("dgx_a100");
  EXPECT_EQ(g.num_gpus(), 8);
  EXPECT_EQ(g.num_nics(), 8);
  ASSERT_EQ(g.cpus().size(), 8u);
  EXPECT_EQ(g.node(g.cpus()[3]).package, 0);
  EXPECT_EQ(g.node(g.cpus()[4]).package, 1);
  // GPU0-1 on NUMA node 3, GPU2-3 on 1, GPU4-5 on 7, GPU6-7 on 5, as on the real machine.
  std::vector<int> numa;
  for (int gpu : g.gpus()) numa.push_back(g.node(gpu).numa);
  EXPECT_EQ(numa, (std::vector<int>{3, 3, 1, 1, 7, 7, 5, 5}));
  // 28 SMP links join 8 NUMA nodes.
  int smp = 0;
  for (const Link& l : g.links()) smp += l.kind == LinkKind::kSmp;
  EXPECT_EQ(smp, 28);
}

TEST(Discovery, PathMatrixDgxH100) {
  std::vector<std::string> rows = MatrixRows(LoadFixture("dgx_h100"));
  ASSERT_EQ(rows.size(), 8u);
  EXPECT_EQ(rows[0], "X NV18 NV18 NV18 NV18 NV18 NV18 NV18 PIX NODE NODE NODE SYS SYS SYS SYS");
  EXPECT_EQ(rows[5], "NV18 NV18 NV18 NV18 NV18 X NV18 NV18 SYS SYS SYS SYS NODE PIX NODE NODE");
}

TEST(Discovery, PathMatrixDgxA100) {
  std::vector<std::string> rows = MatrixRows(LoadFixture("dgx_a100"));
  ASSERT_EQ(rows.size(), 8u);
  // The GPU and its NICs sit on different levels of one switch complex: PXB.
  EXPECT_EQ(rows[0], "X NV12 NV12 NV12 NV12 NV12 NV12 NV12 PXB PXB SYS SYS SYS SYS SYS SYS");
  EXPECT_EQ(rows[3], "NV12 NV12 NV12 X NV12 NV12 NV12 NV12 SYS SYS PXB PXB SYS SYS SYS SYS");
  EXPECT_EQ(rows[6], "NV12 NV12 NV12 NV12 NV12 NV12 X NV12 SYS SYS SYS SYS SYS SYS PXB PXB");
}

TEST(Discovery, PathMatrixPcie8Gpu) {
  std::vector<std::string> rows = MatrixRows(LoadFixture("pcie_8gpu"));
  std::vector<std::string> want = {
      "X PIX NODE NODE SYS SYS SYS SYS PIX SYS",  "PIX X NODE NODE SYS SYS SYS SYS PIX SYS",
      "NODE NODE X PIX SYS SYS SYS SYS NODE SYS", "NODE NODE PIX X SYS SYS SYS SYS NODE SYS",
      "SYS SYS SYS SYS X PIX NODE NODE SYS PIX",  "SYS SYS SYS SYS PIX X NODE NODE SYS PIX",
      "SYS SYS SYS SYS NODE NODE X PIX SYS NODE", "SYS SYS SYS SYS NODE NODE PIX X SYS NODE",
  };
  EXPECT_EQ(rows, want);
}

TEST(Discovery, PathMatrixNvlinkBridges) {
  std::vector<std::string> rows = MatrixRows(LoadFixture("nvlink_bridge_4gpu"));
  std::vector<std::string> want = {"X NV4 PHB PHB", "NV4 X PHB PHB", "PHB PHB X NV4",
                                   "PHB PHB NV4 X"};
  EXPECT_EQ(rows, want);
}

TEST(Discovery, PathMatrixTwoSockets) {
  std::vector<std::string> rows = MatrixRows(LoadFixture("two_socket_2gpu"));
  EXPECT_EQ(rows, (std::vector<std::string>{"X SYS", "SYS X"}));
}

TEST(Discovery, PathBandwidths) {
  Graph h100 = LoadFixture("dgx_h100");
  PathMatrix p(h100);
  EXPECT_DOUBLE_EQ(p.Gpu(0, 1).gbps, 360.0);  // 18 NVLink4 links x 25 GB/s x 0.8
  EXPECT_EQ(p.Gpu(0, 1).hops.size(), 2u);     // through the NVSwitch
  EXPECT_DOUBLE_EQ(p.GpuNic(0, 0).gbps, 50.412);
  Graph pcie = LoadFixture("pcie_8gpu");
  PathMatrix q(pcie);
  EXPECT_DOUBLE_EQ(q.Gpu(0, 1).gbps, 25.206);  // Gen4 x16 at 80%
  EXPECT_DOUBLE_EQ(q.Gpu(0, 4).gbps, 22.0);    // Intel UPI
  EXPECT_EQ(q.Gpu(0, 1).hops.size(), 2u);      // GPU up, GPU down
  Graph bridges = LoadFixture("nvlink_bridge_4gpu");
  PathMatrix r(bridges);
  EXPECT_DOUBLE_EQ(r.Gpu(0, 1).gbps, 80.0);  // 4 NVLink3 links
  EXPECT_EQ(r.Gpu(1, 0).nvlinks, 4);
  EXPECT_DOUBLE_EQ(r.Gpu(1, 2).gbps, 25.206);
  Graph two = LoadFixture("two_socket_2gpu");
  EXPECT_DOUBLE_EQ(PathMatrix(two).Gpu(0, 1).gbps, 22.0);
}

TEST(Discovery, ThisMachine) {
  DiscoveryOptions options;
  auto g = DiscoverTopology(options);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_GE(g->cpus().size(), 1u);
  PathMatrix paths(*g);  // whatever is there has paths
  for (int a : g->gpus()) {
    for (int b : g->gpus()) EXPECT_GT(paths.Get(a, b).gbps, 0);
  }
}

TEST(Discovery, NumaOfCpu) {
  Graph g = LoadFixture("dgx_a100");  // NUMA node n holds PUs 2n and 2n+1
  EXPECT_EQ(g.NumaOfCpu(0), 0);
  EXPECT_EQ(g.NumaOfCpu(7), 3);
  EXPECT_EQ(g.NumaOfCpu(15), 7);
  EXPECT_EQ(g.NumaOfCpu(16), -1);
  auto here = DiscoverTopology(DiscoveryOptions{});
  ASSERT_TRUE(here.ok());
  EXPECT_GE(CurrentNumaNode(*here), 0);
}

TEST(Discovery, GpusByCudaBusIds) {
  DiscoveryOptions options;
  options.xml_file = testing::FixtureXml("dgx_h100");
  options.use_nvml = false;
  // CUDA's order (here reversed), any case, 8-digit domain; one GPU hidden;
  // one bus id hwloc does not know.
  options.gpu_bus_ids = {"00000000:DB:00.0", "0000:cb:00.0", "0000:77:00.0"};
  auto g = DiscoverTopology(options);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->num_gpus(), 3);
  EXPECT_EQ(g->node(g->gpus()[0]).bus_id, "0000:db:00.0");
  EXPECT_EQ(g->node(g->gpus()[1]).bus_id, "0000:cb:00.0");
  EXPECT_EQ(g->node(g->gpus()[2]).parent, g->cpus()[0]);  // not in the tree: under CPU0
  EXPECT_EQ(g->FindGpuByBusId("db:00.0"), g->gpus()[0]);
  // The other H100s are still in the tree, as plain PCI devices.
  int displays = 0;
  for (const Node& n : g->nodes()) displays += n.kind == NodeKind::kPciDevice;
  EXPECT_EQ(displays, 6);
}

TEST(Discovery, BadXmlFiles) {
  DiscoveryOptions options;
  options.xml_file = "tests/data/topo/no_such_file.xml";
  EXPECT_FALSE(DiscoverTopology(options).ok());
  options.xml_file = testing::FixtureNvlink("dgx_h100");  // not XML
  EXPECT_FALSE(DiscoverTopology(options).ok());
  options.xml_file = testing::FixtureXml("dgx_h100");
  options.nvlink_file = testing::FixtureNvlink("dgx_a100");  // other machine's GPUs
  EXPECT_FALSE(DiscoverTopology(options).ok());
}

TEST(Discovery, WithoutNvmlThereIsNoNvlink) {
  // No overlay: NVML is asked. Without the NVIDIA driver (here), or with real
  // GPUs whose bus ids are not the fixture's, no NVLink is added.
  DiscoveryOptions options;
  options.xml_file = testing::FixtureXml("dgx_h100");
  auto g = DiscoverTopology(options);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(CountKind(*g, NodeKind::kNvSwitch), 0);
  EXPECT_EQ(PathMatrix(*g).Gpu(0, 1).type, PathType::kNode);
  EXPECT_TRUE(QueryNvml({"0000:00:00.0"}).empty());
}

TEST(Nvlink, ParseOverlay) {
  auto groups = ParseNvlinkOverlay(
      "# comment\n\n0000:01:00.0 0000:02:00.0 4 3  # bridge\n07:00.0 nvswitch 12 3\n", "t");
  ASSERT_TRUE(groups.ok()) << groups.status().ToString();
  ASSERT_EQ(groups->size(), 2u);
  EXPECT_EQ((*groups)[0].peer_bus_id, "0000:02:00.0");
  EXPECT_EQ((*groups)[1].gpu_bus_id, "0000:07:00.0");
  EXPECT_EQ((*groups)[1].peer_bus_id, "");
  EXPECT_EQ((*groups)[1].count, 12);
  for (const char* bad : {"0000:01:00.0 nvswitch 12", "zz nvswitch 12 3", "01:00.0 x 1 3",
                          "01:00.0 nvswitch 0 3", "01:00.0 nvswitch 2 3 extra"}) {
    EXPECT_FALSE(ParseNvlinkOverlay(bad, "t").ok()) << bad;
  }
}

TEST(Nvlink, PairListedFromBothSidesCountsOnce) {
  Graph plain = LoadFixture("two_socket_2gpu");
  std::string overlay = ::testing::TempDir() + "/ringo_nvlink_overlay";
  {
    std::ofstream out(overlay);
    out << "0000:18:00.0 0000:99:00.0 2 3\n0000:99:00.0 0000:18:00.0 2 3\n";
  }
  DiscoveryOptions options;
  options.xml_file = testing::FixtureXml("two_socket_2gpu");
  options.nvlink_file = overlay;
  options.use_nvml = false;
  auto with = DiscoverTopology(options);
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  EXPECT_EQ(with->links().size(), plain.links().size() + 1);
  EXPECT_EQ(PathMatrix(*with).Gpu(0, 1).Label(), "NV2");
  EXPECT_DOUBLE_EQ(PathMatrix(*with).Gpu(1, 0).gbps, 40.0);
  std::remove(overlay.c_str());
}

TEST(Graph, NormalizeBusId) {
  EXPECT_EQ(NormalizeBusId("0000:1B:00.0"), "0000:1b:00.0");
  EXPECT_EQ(NormalizeBusId("00000000:1b:00.0"), "0000:1b:00.0");
  EXPECT_EQ(NormalizeBusId("1b:00.1"), "0000:1b:00.1");
  EXPECT_EQ(NormalizeBusId("0001:00:1f.7"), "0001:00:1f.7");
  EXPECT_FALSE(NormalizeBusId("1b:00"));
  EXPECT_FALSE(NormalizeBusId("0000:1b:20.0"));
  EXPECT_FALSE(NormalizeBusId("0000:1b:00.0x"));
}

TEST(Graph, FinalizeChecksInvariants) {
  Graph g;
  Node cpu;
  cpu.kind = NodeKind::kCpu;
  cpu.name = "CPU0";
  int c = g.AddNode(cpu);
  Node gpu;
  gpu.kind = NodeKind::kGpu;
  gpu.name = "GPU 0";  // whitespace becomes '_'
  gpu.parent = c;
  gpu.ordinal = 0;
  int x = g.AddNode(gpu);
  EXPECT_FALSE(g.Finalize().ok());  // the GPU has no uplink
  g.AddLink({LinkKind::kPcie, x, c, 1, 0, 25.20649});
  ASSERT_TRUE(g.Finalize().ok());
  EXPECT_EQ(g.node(x).name, "GPU_0");
  EXPECT_DOUBLE_EQ(g.link(0).gbps, 25.206);
  EXPECT_EQ(g.CpuOf(x), c);
  gpu.ordinal = 0;  // a second GPU 0
  int y = g.AddNode(gpu);
  g.AddLink({LinkKind::kPcie, y, c, 1, 0, 1.0});
  EXPECT_FALSE(g.Finalize().ok());
}

TEST(Paths, ParentWalkCopesWithUnevenDepths) {
  // CPU0 - HB0 - {GPU0 on a root port, SW0 - SW1 - GPU1}; HB1 - GPU2; CPU1 - HB2 - GPU3.
  Graph g;
  auto add = [&](NodeKind kind, int parent, int ordinal) {
    Node n;
    n.kind = kind;
    n.parent = parent;
    n.ordinal = ordinal;
    n.name = NodeKindName(kind);
    int i = g.AddNode(n);
    if (parent >= 0) g.AddLink({LinkKind::kPcie, i, parent, 1, 0, 25.0});
    return i;
  };
  int cpu0 = add(NodeKind::kCpu, -1, -1), cpu1 = add(NodeKind::kCpu, -1, -1);
  g.mutable_node(cpu1).numa = 1;
  g.AddLink({LinkKind::kSmp, cpu0, cpu1, 1, 0, 16.0});
  int hb0 = add(NodeKind::kHostBridge, cpu0, -1);
  int gpu0 = add(NodeKind::kGpu, hb0, 0);
  int sw0 = add(NodeKind::kPciSwitch, hb0, -1);
  int sw1 = add(NodeKind::kPciSwitch, sw0, -1);
  int gpu1 = add(NodeKind::kGpu, sw1, 1);
  int hb1 = add(NodeKind::kHostBridge, cpu0, -1);
  int gpu2 = add(NodeKind::kGpu, hb1, 2);
  int hb2 = add(NodeKind::kHostBridge, cpu1, -1);
  int gpu3 = add(NodeKind::kGpu, hb2, 3);
  int nic = add(NodeKind::kNic, sw0, 0);
  ASSERT_TRUE(g.Finalize().ok());
  EXPECT_EQ(ComputePath(g, gpu0, gpu1).type, PathType::kPhb);
  EXPECT_EQ(ComputePath(g, gpu1, gpu0).hops.size(), 4u);
  EXPECT_EQ(ComputePath(g, gpu1, nic).type, PathType::kPxb);
  EXPECT_EQ(ComputePath(g, nic, gpu1).type, PathType::kPxb);
  EXPECT_EQ(ComputePath(g, gpu1, gpu2).type, PathType::kNode);
  Path sys = ComputePath(g, gpu1, gpu3);
  EXPECT_EQ(sys.type, PathType::kSys);
  EXPECT_EQ(sys.hops.size(), 7u);  // 4 up (HB0 to CPU0 included), SMP, 2 down
  EXPECT_DOUBLE_EQ(sys.gbps, 16.0);
  // The reverse route uses the other direction of every link.
  Path back = ComputePath(g, gpu3, gpu1);
  ASSERT_EQ(back.hops.size(), sys.hops.size());
  for (size_t i = 0; i < sys.hops.size(); ++i) {
    EXPECT_EQ(back.hops[sys.hops.size() - 1 - i], sys.hops[i] ^ 1);
  }
}

}  // namespace
}  // namespace ringo::topology
