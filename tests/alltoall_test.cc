// ringoAllToAll, ringoGather and ringoScatter against a reference: 1 to 8
// ranks (threads of ringoCommInitAll; 2 and 4 forked processes), counts 0,
// 1, odd and several slots, every datatype for the all-to-all, every root,
// in place and out of place, also inside a group beside other operations.
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ringo/ringo.h"
#include "tests/harness.h"
#include "tests/reference.h"

namespace ringo::tests {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kDeadline{120000};

// Element e of the block that rank `src` holds for rank `dst`, as bytes.
unsigned char ByteOf(uint32_t seed, int src, int dst, size_t byte) {
  uint32_t x = seed * 2654435761u ^ static_cast<uint32_t>(src * 7919 + dst * 104729) ^ static_cast<uint32_t>(byte);
  x ^= x >> 15;
  x *= 2246822519u;
  x ^= x >> 13;
  return static_cast<unsigned char>(x);
}

void FillBlock(uint32_t seed, int src, int dst, unsigned char* out, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out[i] = ByteOf(seed, src, dst, i);
}

std::string CheckBlock(const char* what, uint32_t seed, int src, int dst, const unsigned char* got, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) {
    if (got[i] != ByteOf(seed, src, dst, i)) {
      return std::string(what) + ": block from rank " + std::to_string(src) + " to rank " + std::to_string(dst) +
             " differs at byte " + std::to_string(i);
    }
  }
  return "";
}

std::string Fail(const char* what, ringoResult_t rc, ringoComm_t comm) {
  return std::string(what) + " returned " + ResultName(rc) + ": " + ringoGetLastError(comm);
}

std::string AllToAll(int rank, int n, ringoComm_t comm, size_t count, ringoDataType_t dt, bool in_place,
                     uint32_t seed) {
  const size_t bytes = count * DataTypeSize(dt);
  std::vector<unsigned char> send(bytes * n + 1), recv(bytes * n + 1, 0xee);
  for (int p = 0; p < n; ++p) FillBlock(seed, rank, p, send.data() + p * bytes, bytes);
  unsigned char* out = in_place ? send.data() : recv.data();
  const ringoResult_t rc = ringoAllToAll(send.data(), out, count, dt, comm, nullptr);
  if (rc != ringoSuccess) return Fail("ringoAllToAll", rc, comm);
  for (int p = 0; p < n; ++p) {
    std::string bad = CheckBlock("ringoAllToAll", seed, p, rank, out + p * bytes, bytes);
    if (!bad.empty()) return bad + (in_place ? " (in place)" : "");
  }
  return "";
}

std::string Gather(int rank, int n, ringoComm_t comm, size_t count, int root, bool in_place, uint32_t seed) {
  const size_t bytes = count * 4;
  std::vector<unsigned char> send(bytes + 1), recv(bytes * n + 1, 0xee);
  unsigned char* in = send.data();
  if (in_place && rank == root) in = recv.data() + root * bytes;
  FillBlock(seed, rank, root, in, bytes);
  const ringoResult_t rc =
      ringoGather(in, rank == root ? recv.data() : nullptr, count, ringoFloat32, root, comm, nullptr);
  if (rc != ringoSuccess) return Fail("ringoGather", rc, comm);
  if (rank != root) return "";
  for (int r = 0; r < n; ++r) {
    std::string bad = CheckBlock("ringoGather", seed, r, root, recv.data() + r * bytes, bytes);
    if (!bad.empty()) return bad;
  }
  return "";
}

std::string Scatter(int rank, int n, ringoComm_t comm, size_t count, int root, bool in_place, uint32_t seed) {
  const size_t bytes = count * 8;
  std::vector<unsigned char> send(bytes * n + 1), recv(bytes + 1, 0xee);
  if (rank == root) {
    for (int r = 0; r < n; ++r) FillBlock(seed, root, r, send.data() + r * bytes, bytes);
  }
  unsigned char* out = in_place && rank == root ? send.data() + root * bytes : recv.data();
  const ringoResult_t rc =
      ringoScatter(rank == root ? send.data() : nullptr, out, count, ringoFloat64, root, comm, nullptr);
  if (rc != ringoSuccess) return Fail("ringoScatter", rc, comm);
  return CheckBlock("ringoScatter", seed, root, rank, out, bytes);
}

std::string RunSweep(int rank, int n, ringoComm_t comm, bool all_types) {
  const std::vector<size_t> counts = {0, 1, 7, 1000, 70001};
  uint32_t seed = 1;
  for (size_t count : counts) {
    for (bool in_place : {false, true}) {
      for (int t = 0; t < (all_types ? 12 : 1); ++t) {
        std::string bad = AllToAll(rank, n, comm, count, all_types ? kEveryDataType[t] : ringoUint8, in_place, ++seed);
        if (!bad.empty()) return bad + ", count " + std::to_string(count);
      }
      for (int root = 0; root < n; ++root) {
        std::string bad = Gather(rank, n, comm, count, root, in_place, ++seed);
        if (bad.empty()) bad = Scatter(rank, n, comm, count, root, in_place, ++seed);
        if (!bad.empty()) return bad + ", count " + std::to_string(count) + ", root " + std::to_string(root);
      }
    }
  }
  // In a group with an all-reduce and a send/recv ring: all run at ringoGroupEnd.
  std::vector<unsigned char> a(16 * n), b(16 * n);
  for (int p = 0; p < n; ++p) FillBlock(99, rank, p, a.data() + 16 * p, 16);
  float x = 1.0f, sum = 0.0f;
  int token = rank, got = -1;
  ringoGroupStart();
  ringoAllToAll(a.data(), b.data(), 16, ringoUint8, comm, nullptr);
  ringoAllReduce(&x, &sum, 1, ringoFloat32, ringoSum, comm, nullptr);
  ringoSend(&token, 1, ringoInt32, (rank + 1) % n, comm, nullptr);
  ringoRecv(&got, 1, ringoInt32, (rank + n - 1) % n, comm, nullptr);
  const ringoResult_t rc = ringoGroupEnd();
  if (rc != ringoSuccess) return Fail("a group of all-to-all, all-reduce, send and recv", rc, comm);
  for (int p = 0; p < n; ++p) {
    std::string bad = CheckBlock("grouped ringoAllToAll", 99, p, rank, b.data() + 16 * p, 16);
    if (!bad.empty()) return bad;
  }
  if (sum != static_cast<float>(n)) return "grouped all-reduce: " + std::to_string(sum);
  if (got != (rank + n - 1) % n) return "grouped send/recv: got " + std::to_string(got);
  return "";
}

class Threads : public ::testing::TestWithParam<int> {};

TEST_P(Threads, AllToAllGatherScatter) {
  const int n = GetParam();
  std::vector<ringoComm_t> comms(n, nullptr);
  ASSERT_EQ(ringoCommInitAll(comms.data(), n, nullptr), ringoSuccess) << ringoGetLastError(nullptr);
  HarnessOptions options;
  options.make_unique_id = false;
  auto results = RunRanks(
      n, RankMode::kThreads, kDeadline,
      [&](int rank, int nranks, const ringoUniqueId&) { return RunSweep(rank, nranks, comms[rank], true); }, options);
  EXPECT_ALL_RANKS_OK(results);
  for (ringoComm_t c : comms) ringoCommDestroy(c);
}

INSTANTIATE_TEST_SUITE_P(Collectives, Threads, ::testing::Values(1, 2, 3, 4, 5, 8));

class Processes : public ::testing::TestWithParam<int> {};

TEST_P(Processes, AllToAllGatherScatter) {
  const int n = GetParam();
  auto results = RunRanks(n, RankMode::kProcesses, kDeadline,
                          [&](int rank, int nranks, const ringoUniqueId& id) -> std::string {
                            ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
                            config.device_kind = RINGO_DEVICE_HOST;
                            ringoComm_t comm = nullptr;
                            if (ringoCommInitRankConfig(&comm, nranks, id, rank, &config) != ringoSuccess) {
                              return std::string("init: ") + ringoGetLastError(nullptr);
                            }
                            std::string problem = RunSweep(rank, nranks, comm, false);
                            ringoCommDestroy(comm);
                            return problem;
                          });
  EXPECT_ALL_RANKS_OK(results);
}

INSTANTIATE_TEST_SUITE_P(Collectives, Processes, ::testing::Values(2, 4));

}  // namespace
}  // namespace ringo::tests
