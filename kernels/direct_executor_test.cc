#include "kernels/direct_executor.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <thread>
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

// Owner and thieves claiming from both ends of one word at once: every chunk
// goes to exactly one of them, and both ends stop when they meet.
TEST(DirectShareTest, ConcurrentClaimsTakeEveryChunkOnce) {
  for (int round = 0; round < 50; ++round) {
    const int64_t chunks = 1 + round * 7;
    std::atomic<uint64_t> word{static_cast<uint64_t>(chunks) << 32};
    std::vector<std::vector<int64_t>> got(4);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int64_t c; (c = t == 0 ? DirectClaimFront(word) : DirectClaimBack(word)) >= 0;) got[t].push_back(c);
      });
    }
    for (auto& th : threads) th.join();
    std::vector<int64_t> all;
    for (const auto& g : got) all.insert(all.end(), g.begin(), g.end());
    std::sort(all.begin(), all.end());
    ASSERT_EQ(static_cast<int64_t>(all.size()), chunks) << "round " << round;
    for (int64_t i = 0; i < chunks; ++i) ASSERT_EQ(all[i], i) << "round " << round;
    EXPECT_TRUE(std::is_sorted(got[0].begin(), got[0].end()));  // the owner goes forward
    EXPECT_EQ(DirectClaimFront(word), -1);
    EXPECT_EQ(DirectClaimBack(word), -1);
  }
}

TEST(DirectShareTest, WordsCoverEveryChunkOfThePart) {
  for (int nranks : {1, 2, 3, 4, 8}) {
    for (int64_t count : {int64_t{0}, int64_t{5}, int64_t{4096}, int64_t{1} << 22, (int64_t{1} << 22) + 3}) {
      CollArgs a = AllReduce(base::DataType::kFloat32, count);
      const int64_t chunk = DirectChunkElems(a, nranks);
      EXPECT_EQ(chunk % 16, 0) << "chunks start on 64-byte boundaries";
      for (int r = 0; r < nranks; ++r) {
        const Range part = DirectPart(a, r, nranks);
        const uint64_t word = DirectShareWord(a, r, nranks);
        EXPECT_EQ(word & 0xffffffffu, 0u);
        const int64_t chunks = static_cast<int64_t>(word >> 32);
        EXPECT_GE(chunks * chunk, part.hi - part.lo);
        EXPECT_LT((chunks - 1) * chunk, std::max<int64_t>(part.hi - part.lo, 1));
      }
    }
  }
}

// Sharing, run one rank after another: the first rank may take every part
// (no core information), the others find nothing left, and every output holds
// the whole reduction; with the ranks on cores of their own it takes only its
// part and each rank reduces its own.
TEST(DirectShareTest, FirstRankTakesWhatItMayAndOutputsAreComplete) {
  const int nranks = 3;
  const int64_t count = (int64_t{1} << 16) + 5;  // several chunks per part, and a tail
  for (bool with_cpus : {false, true}) {
    std::vector<std::vector<float>> send(nranks, std::vector<float>(count));
    std::vector<std::vector<float>> recv(nranks, std::vector<float>(count, -1.0f));
    std::vector<const void*> sends;
    std::vector<void*> recvs;
    for (int r = 0; r < nranks; ++r) {
      for (int64_t i = 0; i < count; ++i) send[r][i] = static_cast<float>((r + 1) * (i % 100));
      sends.push_back(send[r].data());
      recvs.push_back(recv[r].data());
    }
    CollArgs a = AllReduce(base::DataType::kFloat32, count);
    std::vector<std::atomic<uint64_t>> words(nranks);
    std::vector<std::atomic<int32_t>> cpus(nranks);
    std::vector<std::atomic<uint64_t>*> word_ptrs;
    std::vector<const std::atomic<int32_t>*> cpu_ptrs;
    for (int r = 0; r < nranks; ++r) {
      words[r] = DirectShareWord(a, r, nranks);
      cpus[r] = r == 0 ? sched_getcpu() : 1000 + r;  // one rank per core
      word_ptrs.push_back(&words[r]);
      cpu_ptrs.push_back(&cpus[r]);
    }
    DirectShare share;
    share.words = word_ptrs.data();
    share.cpus = with_cpus ? cpu_ptrs.data() : nullptr;
    ASSERT_TRUE(RunHostDirect(a, 0, nranks, sends.data(), recvs.data(), false, share).ok());
    for (int r = 1; r < nranks; ++r) {
      const bool taken = (words[r].load() & 0xffffffffu) >= (words[r].load() >> 32);
      EXPECT_EQ(taken, !with_cpus) << "rank " << r << "'s part";
    }
    for (int r = 1; r < nranks; ++r) {
      ASSERT_TRUE(RunHostDirect(a, r, nranks, sends.data(), recvs.data(), false, share).ok());
    }
    for (int r = 0; r < nranks; ++r) {
      for (int64_t i = 0; i < count; ++i) {
        ASSERT_EQ(recv[r][i], static_cast<float>(6 * (i % 100))) << "rank " << r << " i " << i;
      }
    }
  }
}

// Ranks as threads reducing at once with sharing (as many ranks as the
// machine has cores and more): every output complete, every time.
TEST(DirectShareTest, ConcurrentRanksProduceTheFullReduction) {
  for (int nranks : {2, 3, 4}) {
    const int64_t count = (int64_t{1} << 18) + 17;
    std::vector<std::vector<int32_t>> send(nranks, std::vector<int32_t>(count));
    std::vector<std::vector<int32_t>> recv(nranks, std::vector<int32_t>(count));
    std::vector<const void*> sends;
    std::vector<void*> recvs;
    for (int r = 0; r < nranks; ++r) {
      for (int64_t i = 0; i < count; ++i) send[r][i] = static_cast<int32_t>(r * 7 + i % 1000);
      sends.push_back(send[r].data());
      recvs.push_back(recv[r].data());
    }
    CollArgs a = AllReduce(base::DataType::kInt32, count);
    std::vector<std::atomic<uint64_t>> words(nranks);
    std::vector<std::atomic<uint64_t>*> word_ptrs;
    for (auto& w : words) word_ptrs.push_back(&w);
    for (int iter = 0; iter < 5; ++iter) {
      for (auto& row : recv) std::fill(row.begin(), row.end(), -1);
      for (int r = 0; r < nranks; ++r) words[r] = DirectShareWord(a, r, nranks);
      DirectShare share;
      share.words = word_ptrs.data();
      std::vector<std::thread> threads;
      std::atomic<int> failed{0};
      for (int r = 0; r < nranks; ++r) {
        threads.emplace_back([&, r] {
          if (!RunHostDirect(a, r, nranks, sends.data(), recvs.data(), iter % 2 == 1, share).ok()) ++failed;
        });
      }
      for (auto& t : threads) t.join();
      ASSERT_EQ(failed.load(), 0);
      const int32_t base = 7 * nranks * (nranks - 1) / 2;
      for (int r = 0; r < nranks; ++r) {
        for (int64_t i = 0; i < count; ++i) {
          ASSERT_EQ(recv[r][i], base + nranks * static_cast<int32_t>(i % 1000)) << nranks << " ranks, rank " << r;
        }
      }
    }
  }
}

}  // namespace
}  // namespace ringo::kernels
