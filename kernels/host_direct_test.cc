#include "kernels/host_direct.h"

#include <vector>

#include "gtest/gtest.h"

namespace ringo::kernels {
namespace {

CollArgs AllReduce(base::DataType dtype, int64_t count) {
  CollArgs a;
  a.coll = Coll::kAllReduce;
  a.dtype = dtype;
  a.count = count;
  return a;
}

// The parts tile [0, count) in rank order and start on 64-byte boundaries.
TEST(DirectPartTest, PartsTileTheElements) {
  for (base::DataType dt : {base::DataType::kInt8, base::DataType::kFloat16, base::DataType::kFloat32,
                            base::DataType::kFloat64}) {
    const int64_t unit = 64 / static_cast<int64_t>(base::DataTypeSize(dt));
    for (int nranks : {1, 2, 3, 7, 8}) {
      for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{17}, int64_t{1000}, int64_t{1} << 20}) {
        int64_t next = 0;
        for (int r = 0; r < nranks; ++r) {
          const Range p = DirectPart(AllReduce(dt, count), r, nranks);
          EXPECT_EQ(p.lo, next) << "rank " << r << " of " << nranks << ", count " << count;
          EXPECT_LE(p.lo, p.hi);
          if (p.lo < count) {
            EXPECT_EQ(p.lo % unit, 0) << "rank " << r;
          }
          next = p.hi;
        }
        EXPECT_EQ(next, count) << nranks << " ranks, count " << count;
      }
    }
  }
}

// Each rank's call writes its part into every output; after all have run,
// every output holds the full reduction (here run one rank after another).
TEST(RunHostDirectTest, EveryRankWritesItsPartEverywhere) {
  const int nranks = 3;
  const int64_t count = 1001;
  std::vector<std::vector<int32_t>> send(nranks, std::vector<int32_t>(count));
  std::vector<std::vector<int32_t>> recv(nranks, std::vector<int32_t>(count, -1));
  std::vector<const void*> sends;
  std::vector<void*> recvs;
  for (int r = 0; r < nranks; ++r) {
    for (int64_t i = 0; i < count; ++i) send[r][i] = static_cast<int32_t>((r + 1) * 1000 + i);
    sends.push_back(send[r].data());
    recvs.push_back(recv[r].data());
  }
  CollArgs a = AllReduce(base::DataType::kInt32, count);
  a.op = base::RedOp::kMax;
  for (int r = 0; r < nranks; ++r) {
    ASSERT_TRUE(RunHostDirect(a, r, nranks, sends.data(), recvs.data(), /*stream=*/r == 1).ok());
  }
  for (int r = 0; r < nranks; ++r) {
    for (int64_t i = 0; i < count; ++i) ASSERT_EQ(recv[r][i], nranks * 1000 + i) << "rank " << r << " i " << i;
  }
}

// Broadcast: each rank pulls the root's input into its own output; only the
// root's send buffer is read by others.
TEST(RunHostDirectTest, BroadcastPullsFromTheRoot) {
  const int nranks = 3;
  const int64_t count = 777;
  std::vector<uint16_t> root_send(count);
  for (int64_t i = 0; i < count; ++i) root_send[i] = static_cast<uint16_t>(i * 3 + 1);
  std::vector<std::vector<uint16_t>> recv(nranks, std::vector<uint16_t>(count, 0));
  std::vector<const void*> sends(nranks, nullptr);  // non-roots' inputs are never read
  std::vector<void*> recvs;
  for (int r = 0; r < nranks; ++r) recvs.push_back(recv[r].data());
  CollArgs a = AllReduce(base::DataType::kFloat16, count);
  a.coll = Coll::kBroadcast;
  a.root = 1;
  sends[1] = root_send.data();
  for (int r = 0; r < nranks; ++r) ASSERT_TRUE(RunHostDirect(a, r, nranks, sends.data(), recvs.data(), false).ok());
  for (int r = 0; r < nranks; ++r) EXPECT_EQ(recv[r], root_send) << "rank " << r;
  const DirectNeeds root = DirectBuffersNeeded(a, 1, nranks);
  const DirectNeeds other = DirectBuffersNeeded(a, 0, nranks);
  EXPECT_EQ(root.send_bytes, count * 2);
  EXPECT_EQ(other.send_bytes, 0);
  EXPECT_EQ(other.recv_bytes, 0);
}

}  // namespace
}  // namespace ringo::kernels
