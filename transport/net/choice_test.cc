// The choice of transport per edge: verbs only where both ends have a port
// on one fabric, sockets otherwise, RINGO_NET=ib an error where verbs cannot
// join the two; and on a machine with no usable verbs port (this one, unless
// it has an RDMA device) the fabric is 0, so TCP carries every edge.
#include "transport/net/choice.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ringo::transport::net {
namespace {

TEST(ChooseNet, VerbsWhereBothEndsShareAFabric) {
  base::Config config;
  EXPECT_EQ(ChooseNet(config, 7, 7, 0, 1).value(), NetKind::kIb);
  EXPECT_EQ(ChooseNet(config, 7, 9, 0, 1).value(), NetKind::kSocket);
  EXPECT_EQ(ChooseNet(config, 0, 7, 0, 1).value(), NetKind::kSocket);
  EXPECT_EQ(ChooseNet(config, 7, 0, 0, 1).value(), NetKind::kSocket);
  EXPECT_EQ(ChooseNet(config, 0, 0, 0, 1).value(), NetKind::kSocket);
  config.net = "socket";  // such a rank publishes fabric 0 (VerbsFabric)
  EXPECT_EQ(ChooseNet(config, 0, 7, 0, 1).value(), NetKind::kSocket);
}

TEST(ChooseNet, ForcedVerbsThatCannotJoinTheEndsIsAnError) {
  base::Config config;
  config.net = "ib";
  EXPECT_EQ(ChooseNet(config, 7, 7, 0, 1).value(), NetKind::kIb);
  auto theirs = ChooseNet(config, 7, 0, 2, 3);
  ASSERT_FALSE(theirs.ok());
  EXPECT_EQ(theirs.status().code(), base::Code::kInvalidUsage);
  EXPECT_NE(theirs.status().message().find("rank 3 has no usable verbs port"), std::string::npos)
      << theirs.status().ToString();
  auto mine = ChooseNet(config, 0, 7, 2, 3);
  ASSERT_FALSE(mine.ok());
  EXPECT_NE(mine.status().message().find("this rank has no usable verbs port"), std::string::npos);
  EXPECT_FALSE(ChooseNet(config, 7, 9, 2, 3).ok());
}

TEST(VerbsFabric, ZeroWhenVerbsIsOffOrUnusable) {
  base::Config config;
  config.net = "socket";
  EXPECT_EQ(VerbsFabric(config), 0u);
  config.net = "auto";
  config.ib_disable = true;
  EXPECT_EQ(VerbsFabric(config), 0u);
  config.ib_disable = false;
  auto ib = ProcessNet(config, NetKind::kIb);
  if (ib.ok()) {
    EXPECT_NE(VerbsFabric(config), 0u);  // a machine with an active RDMA port
  } else {
    EXPECT_EQ(VerbsFabric(config), 0u) << ib.status().ToString();
    EXPECT_NE(ib.status().message().find("verbs:"), std::string::npos);
  }
  auto tcp = ProcessNet(config, NetKind::kSocket);
  ASSERT_TRUE(tcp.ok()) << tcp.status().ToString();
  EXPECT_STREQ((*tcp)->name(), "socket");
}

// A Net of named devices with sysfs paths and nothing else, for the order
// ring channels take them in.
class PathsNet : public Net {
 public:
  explicit PathsNet(std::vector<std::string> paths, std::vector<uint64_t> fabrics = {})
      : paths_(std::move(paths)), fabrics_(std::move(fabrics)) {}
  const char* name() const override { return "paths"; }
  int DeviceCount() const override { return static_cast<int>(paths_.size()); }
  base::StatusOr<NetProperties> Properties(int device) const override {
    NetProperties p;
    p.name = "dev" + std::to_string(device);
    p.pci_path = paths_[device];
    p.fabric = device < static_cast<int>(fabrics_.size()) ? fabrics_[device] : 0;
    return p;
  }
  base::StatusOr<std::unique_ptr<Listener>> Listen(int, const ConnectOptions&, NetHandle*) override {
    return base::Internal("not here");
  }
  base::StatusOr<std::unique_ptr<SendConnection>> Connect(int, const NetHandle&, const ConnectOptions&,
                                                          Deadline) override {
    return base::Internal("not here");
  }

 private:
  std::vector<std::string> paths_;
  std::vector<uint64_t> fabrics_;
};

TEST(DevicesNearFirst, NearDevicesFirstThenFarThenUnknown) {
  // /n0 and /n1: NUMA nodes 0 and 1; "" a virtual device (no node: a
  // bridge or a VPN interface comes last).
  PathsNet net({"/n1", "", "/n0", "/n1", "/n0"});
  auto node = [](const std::string& path) { return path == "/n0" ? 0 : path == "/n1" ? 1 : -1; };
  EXPECT_EQ(DevicesNearFirst(net, 0, node), (std::vector<int>{2, 4, 0, 3, 1}));
  EXPECT_EQ(DevicesNearFirst(net, 1, node), (std::vector<int>{0, 3, 2, 4, 1}));
  // A rank whose node is unknown keeps the transport's order.
  EXPECT_EQ(DevicesNearFirst(net, -1, node), (std::vector<int>{0, 1, 2, 3, 4}));
  PathsNet virtual_only({"", ""});
  EXPECT_EQ(DevicesNearFirst(virtual_only, 0, node), (std::vector<int>{0, 1}));
}

TEST(DevicesNearFirst, OnlyDevicesOnDeviceZerosFabric) {
  // Verbs ports on two fabrics (rails of their own): channels stay on
  // port 0's, near ones first; fabric 0 (sockets) reaches everything.
  auto node = [](const std::string& path) { return path == "/n0" ? 0 : path == "/n1" ? 1 : -1; };
  PathsNet rails({"/n1", "/n0", "/n0", "/n1"}, {7, 9, 7, 7});
  EXPECT_EQ(DevicesNearFirst(rails, 0, node), (std::vector<int>{2, 0, 3}));
  PathsNet sockets({"/n1", "/n0"}, {0, 0});
  EXPECT_EQ(DevicesNearFirst(sockets, 0, node), (std::vector<int>{1, 0}));
}

}  // namespace
}  // namespace ringo::transport::net
