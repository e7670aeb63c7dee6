// The choice of transport per edge: verbs only where both ends have a port
// on one fabric, sockets otherwise, RINGO_NET=ib an error where verbs cannot
// join the two; and on a machine with no usable verbs port (this one, unless
// it has an RDMA device) the fabric is 0, so TCP carries every edge.
#include "transport/net/choice.h"

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

}  // namespace
}  // namespace ringo::transport::net
