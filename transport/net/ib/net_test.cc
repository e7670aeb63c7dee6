// The verbs transport beyond the shared conformance suite: RINGO_IB_HCA's
// syntax, an unusable machine (no library, no device or no port) said
// plainly, and, where a port is active (the SoftRoCE guest of tests/rdma/),
// faults: a queue pair forced into the error state, and a receiver that
// deregisters the memory it offered, each a named error on both ends.
#include "transport/net/ib/net.h"

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace ringo::transport::net {
namespace {

using base::Status;

TEST(HcaSelected, PrefixesExclusionsExactNamesAndPorts) {
  EXPECT_TRUE(HcaSelected("", "mlx5_0", 1));
  EXPECT_TRUE(HcaSelected("mlx5", "mlx5_3", 1));
  EXPECT_FALSE(HcaSelected("mlx4", "mlx5_3", 1));
  EXPECT_TRUE(HcaSelected("mlx5_0:1,mlx5_1:1", "mlx5_1", 1));
  EXPECT_FALSE(HcaSelected("mlx5_0:1,mlx5_1:1", "mlx5_1", 2));
  EXPECT_FALSE(HcaSelected("^mlx5_1", "mlx5_1", 1));
  EXPECT_TRUE(HcaSelected("^mlx5_1", "mlx5_0", 1));
  EXPECT_TRUE(HcaSelected("=mlx5_1", "mlx5_1", 1));
  EXPECT_FALSE(HcaSelected("=mlx5_1", "mlx5_10", 1));
  EXPECT_TRUE(HcaSelected("mlx5_1", "mlx5_10", 1));  // a prefix
  EXPECT_FALSE(HcaSelected("^=rxe0:1", "rxe0", 1));
  EXPECT_TRUE(HcaSelected("^=rxe0:1", "rxe0", 2));
}

TEST(IbNet, NoPortSelectedSaysWhy) {
  IbNetOptions o;
  o.hca_spec = "=no_such_hca";
  auto n = MakeIbNet(o);
  ASSERT_FALSE(n.ok());
  const std::string m = n.status().message();
  EXPECT_NE(m.find("verbs:"), std::string::npos) << m;
  // Whichever applies here: no library, no device, or no port this setting selects.
  EXPECT_TRUE(m.find("libibverbs") != std::string::npos || m.find("no RDMA device") != std::string::npos ||
              m.find("no_such_hca") != std::string::npos)
      << m;
}

class IbFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    IbNetOptions o;
    o.timeout_ms = 10000;
    o.ifname_spec = "lo";
    o.timeout = 14;  // ~67 ms per try: a dead peer fails in about half a second
    o.retry_cnt = 7;
    auto n = MakeIbNet(o);
    if (!n.ok()) {
      const char* require = std::getenv("RINGO_TEST_REQUIRE_IB");
      if (require != nullptr && std::string(require) == "1") FAIL() << n.status().ToString();
      GTEST_SKIP() << "no usable verbs port here: " << n.status().ToString();
    }
    net_ = std::move(n).value();
    NetHandle handle;
    auto listener = net_->Listen(0, ConnectOptions{0, 1, 9}, &handle);
    ASSERT_TRUE(listener.ok()) << listener.status().ToString();
    Status accept_st;
    std::thread acceptor([&] {
      auto r = (*listener)->Accept(1, DeadlineAfterMs(5000));
      if (r.ok()) recv_ = std::move(r).value();
      else accept_st = r.status();
    });
    auto s = net_->Connect(0, handle, ConnectOptions{1, 0, 9}, DeadlineAfterMs(5000));
    acceptor.join();
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_TRUE(accept_st.ok()) << accept_st.ToString();
    send_ = std::move(s).value();
    out_.assign(1 << 16, 'o');
    in_.assign(1 << 16, 'i');
    auto a = send_->Register(out_.data(), out_.size(), MemoryKind::kHost);
    auto b = recv_->Register(in_.data(), in_.size(), MemoryKind::kHost);
    ASSERT_TRUE(a.ok() && b.ok());
    out_region_ = std::move(a).value();
    in_region_ = std::move(b).value();
  }

  // Tests `r` on `c` until done or an error, at most `ms`.
  static Status Finish(Connection& c, Request* r, int64_t ms = 5000) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < until) {
      bool done = false;
      size_t bytes = 0;
      Status st = c.Test(r, &done, &bytes);
      if (!st.ok()) return st;
      if (done) return Status();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return base::Timeout("not done in time");
  }

  std::unique_ptr<Net> net_;
  std::unique_ptr<SendConnection> send_;
  std::unique_ptr<RecvConnection> recv_;
  std::vector<char> out_, in_;
  std::unique_ptr<MemoryRegion> out_region_, in_region_;
};

TEST_F(IbFaults, MessagesFlowThenAQueuePairInErrorIsANamedError) {
  // One message goes through first.
  auto r = recv_->Irecv(in_.data(), in_.size(), in_region_.get());
  auto s = send_->Isend(out_.data(), 1000, out_region_.get());
  ASSERT_TRUE(r.ok() && *r != nullptr && s.ok() && *s != nullptr);
  std::thread pump([&] { EXPECT_TRUE(Finish(*send_, *s).ok()); });
  ASSERT_TRUE(Finish(*recv_, *r).ok());
  pump.join();
  EXPECT_EQ(in_[999], 'o');
  // Then the sender's queue pairs fail.
  ASSERT_TRUE(ForceQpErrorForTesting(*send_).ok());
  r = recv_->Irecv(in_.data(), in_.size(), in_region_.get());
  ASSERT_TRUE(r.ok() && *r != nullptr);
  s = send_->Isend(out_.data(), 1000, out_region_.get());
  Status st = s.ok() && *s != nullptr ? Finish(*send_, *s) : s.status();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("queue pair"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("rank 0"), std::string::npos) << st.ToString();
  // The failed side tells the other why (as the proxy does).
  send_->Abort(st, 1, 2);
  Status rst = Finish(*recv_, *r);
  ASSERT_FALSE(rst.ok());
  EXPECT_EQ(rst.origin(), 1) << rst.ToString();
}

TEST_F(IbFaults, AReceiverThatDeregistersItsMemoryIsANamedError) {
  auto r = recv_->Irecv(in_.data(), in_.size(), in_region_.get());
  ASSERT_TRUE(r.ok() && *r != nullptr);
  in_region_.reset();  // the offer stands, its memory is gone
  auto s = send_->Isend(out_.data(), 4096, out_region_.get());
  ASSERT_TRUE(s.ok() && *s != nullptr);
  Status st = Finish(*send_, *s);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), base::Code::kRemoteError) << st.ToString();
  EXPECT_NE(st.message().find("queue pair 0"), std::string::npos) << st.ToString();
  EXPECT_EQ(st.origin(), 0) << st.ToString();
  Status rst = Finish(*recv_, *r);
  EXPECT_FALSE(rst.ok());
}

TEST_F(IbFaults, MemoryOutsideARegionIsRefused) {
  std::vector<char> other(100);
  auto s = send_->Isend(other.data(), other.size(), out_region_.get());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("registered"), std::string::npos) << s.status().ToString();
  auto g = send_->Register(other.data(), other.size(), MemoryKind::kCuda);
  ASSERT_FALSE(g.ok());
  // GPU memory (GPUDirect RDMA) must be GPU memory: host memory said to be
  // is refused, not registered as host memory behind the caller's back.
  EXPECT_NE(g.status().message().find("not GPU memory"), std::string::npos) << g.status().ToString();
}

}  // namespace
}  // namespace ringo::transport::net
