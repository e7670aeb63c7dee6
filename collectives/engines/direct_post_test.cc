// The direct path's check of a peer's post: random posts (anything a peer
// could write) never pass unless they lie within their region and publish
// what the call touches, and every rejection names the peer.
#include <random>
#include <string>

#include "collectives/engines/direct_post.h"
#include "gtest/gtest.h"
#include "kernels/direct_executor.h"

namespace ringo::collectives::internal {
namespace {

TEST(DirectPost, RandomPostsAreCheckedAndTheirRankNamed) {
  std::mt19937_64 rng(99);
  int accepted = 0;
  for (int i = 0; i < 200000; ++i) {
    kernels::CollArgs args;
    args.coll = static_cast<kernels::Coll>(rng() % 5);
    args.dtype = static_cast<base::DataType>(rng() % base::kNumDataTypes);
    args.count = static_cast<int64_t>(rng() % 4096);
    args.root = static_cast<int>(rng() % 4);
    const int nranks = 4;
    const int q = 1 + static_cast<int>(rng() % 3);
    DirectPost p{};
    auto small = [&] { return rng() % 3 == 0 ? rng() : rng() % 65536; };
    p.send_bytes = small();
    p.recv_bytes = small();
    p.send_offset = small();
    p.recv_offset = small();
    p.send_region.fd = rng() % 4 == 0 ? -1 : 3;
    p.recv_region.fd = rng() % 4 == 0 ? -1 : 3;
    p.send_region.bytes = small();
    p.recv_region.bytes = small();
    const base::Status st = ValidateDirectPost(args, 0, q, nranks, p);
    const kernels::DirectNeeds need = kernels::DirectBuffersNeeded(args, q, nranks);
    const bool within = (p.send_region.fd < 0 || (p.send_offset <= p.send_region.bytes &&
                                                   p.send_bytes <= p.send_region.bytes - p.send_offset)) &&
                        (p.recv_region.fd < 0 || (p.recv_offset <= p.recv_region.bytes &&
                                                   p.recv_bytes <= p.recv_region.bytes - p.recv_offset));
    const bool enough = static_cast<uint64_t>(need.send_bytes) <= p.send_bytes &&
                        static_cast<uint64_t>(need.recv_bytes) <= p.recv_bytes;
    ASSERT_EQ(st.ok(), within && enough) << st.ToString();
    if (st.ok()) {
      ++accepted;
    } else {
      EXPECT_EQ(st.origin(), q);
      EXPECT_NE(st.message().find("rank " + std::to_string(q)), std::string::npos) << st.message();
    }
  }
  EXPECT_GT(accepted, 100);
}

}  // namespace
}  // namespace ringo::collectives::internal
