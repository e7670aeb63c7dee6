#include "tests/p2p_case.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "tests/harness.h"
#include "tests/reference.h"

namespace ringo::tests {
namespace {

constexpr size_t kGuard = 32;
constexpr unsigned char kGuardByte = 0xa5;

struct Picker {
  std::mt19937 rng;
  const std::vector<size_t>& counts;
  size_t next_dtype = 0;
  Message Make(int src, int dst) {
    Message m;
    m.src = src;
    m.dst = dst;
    m.count = counts[rng() % counts.size()];
    m.dtype = kEveryDataType[next_dtype++ % 12];
    m.seed = static_cast<uint32_t>(rng());
    return m;
  }
};

}  // namespace

size_t MessageBytes(const Message& m) { return m.count * DataTypeSize(m.dtype); }

void FillMessage(const Message& m, unsigned char* dst) {
  uint32_t x = m.seed * 2654435761u + static_cast<uint32_t>(m.src * 31 + m.dst);
  const size_t n = MessageBytes(m);
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    dst[i] = static_cast<unsigned char>(x >> 7);
  }
}

std::vector<Round> MakeRounds(int nranks, uint32_t seed, const std::vector<size_t>& counts, int max_ops,
                              bool with_ungrouped) {
  Picker pick{std::mt19937(seed), counts};
  std::vector<Round> rounds;
  const int n = nranks;
  {
    Round r{"ring forward", {}, true};
    for (int s = 0; s < n; ++s) r.messages.push_back(pick.Make(s, (s + 1) % n));
    rounds.push_back(r);
  }
  {
    Round r{"ring backward", {}, true};
    for (int s = 0; s < n; ++s) r.messages.push_back(pick.Make(s, (s + n - 1) % n));
    rounds.push_back(r);
  }
  {
    Round r{"random permutation", {}, true};
    std::vector<int> perm(n);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), pick.rng);
    for (int s = 0; s < n; ++s) r.messages.push_back(pick.Make(s, perm[s]));
    rounds.push_back(r);
  }
  {
    // Random pairs, self included, until one rank has max_ops operations.
    Round r{"random pairs", {}, true};
    std::vector<int> ops(n, 0);
    for (int tries = 0; tries < 4 * max_ops; ++tries) {
      const int s = static_cast<int>(pick.rng() % n);
      const int d = static_cast<int>(pick.rng() % n);
      const int need_s = 1, need_d = 1;
      if (ops[s] + need_s + (s == d ? need_d : 0) > max_ops || (s != d && ops[d] + need_d > max_ops)) continue;
      ops[s] += need_s;
      ops[d] += need_d;
      r.messages.push_back(pick.Make(s, d));
    }
    rounds.push_back(r);
  }
  {
    Round r{"every ordered pair", {}, true};
    for (int s = 0; s < n; ++s) {
      for (int d = 0; d < n; ++d) r.messages.push_back(pick.Make(s, d));
    }
    std::shuffle(r.messages.begin(), r.messages.end(), pick.rng);
    rounds.push_back(r);
  }
  if (n >= 2) {
    Round r{"several messages on one pair, both directions", {}, true};
    for (int k = 0; k < 5; ++k) {
      r.messages.push_back(pick.Make(0, n - 1));
      r.messages.push_back(pick.Make(n - 1, 0));
    }
    rounds.push_back(r);
  }
  if (with_ungrouped && n >= 2) {
    // A chain of single calls: rank 0 sends first, every other rank receives
    // then sends on, so nothing waits on a later call.
    Round r{"chain of single calls", {}, false};
    for (int s = 0; s < n; ++s) r.messages.push_back(pick.Make(s, (s + 1) % n));
    rounds.push_back(r);
  }
  return rounds;
}

std::string RunRound(const Round& round, int rank, ringoComm_t comm) {
  struct Buffer {
    const Message* m;
    std::vector<unsigned char> bytes;  // guard, data, guard
  };
  std::vector<Buffer> sends, recvs;
  for (const Message& m : round.messages) {
    if (m.src == rank) {
      Buffer b{&m, std::vector<unsigned char>(MessageBytes(m) + 1)};
      FillMessage(m, b.bytes.data());
      sends.push_back(std::move(b));
    }
    if (m.dst == rank) recvs.push_back({&m, std::vector<unsigned char>(MessageBytes(m) + 2 * kGuard, kGuardByte)});
  }
  auto fail = [&](const std::string& what, ringoResult_t rc) {
    return round.name + ": " + what + " returned " + ResultName(rc) + ": " + ringoGetLastError(comm);
  };
  if (round.grouped && ringoGroupStart() != ringoSuccess) return round.name + ": ringoGroupStart failed";
  size_t si = 0, ri = 0;
  std::string error;
  // The chain: every rank but 0 receives before it sends.
  const bool recv_first = !round.grouped && rank != 0;
  for (const Message& m : round.messages) {
    const bool mine_send = m.src == rank;
    const bool mine_recv = m.dst == rank;
    auto do_send = [&] {
      Buffer& b = sends[si++];
      const ringoResult_t rc = ringoSend(b.bytes.data(), m.count, m.dtype, m.dst, comm, nullptr);
      if (rc != ringoSuccess && error.empty()) error = fail("ringoSend to " + std::to_string(m.dst), rc);
    };
    auto do_recv = [&] {
      Buffer& b = recvs[ri++];
      const ringoResult_t rc = ringoRecv(b.bytes.data() + kGuard, m.count, m.dtype, m.src, comm, nullptr);
      if (rc != ringoSuccess && error.empty()) error = fail("ringoRecv from " + std::to_string(m.src), rc);
    };
    if (recv_first) {
      if (mine_recv) do_recv();
      if (mine_send) do_send();
    } else {
      if (mine_send) do_send();
      if (mine_recv) do_recv();
    }
  }
  if (round.grouped) {
    const ringoResult_t rc = ringoGroupEnd();
    if (rc != ringoSuccess && error.empty()) error = fail("ringoGroupEnd", rc);
  }
  if (!error.empty()) return error;
  std::vector<unsigned char> want;
  for (const Buffer& b : recvs) {
    const Message& m = *b.m;
    const size_t n = MessageBytes(m);
    want.assign(n + 1, 0);
    FillMessage(m, want.data());
    const std::string what = round.name + ": message " + std::to_string(m.src) + " -> " + std::to_string(m.dst) +
                             " (" + std::to_string(m.count) + " x " + DataTypeName(m.dtype) + ")";
    for (size_t i = 0; i < kGuard; ++i) {
      if (b.bytes[i] != kGuardByte || b.bytes[kGuard + n + i] != kGuardByte) return what + ": guard bytes overwritten";
    }
    if (n > 0 && std::memcmp(b.bytes.data() + kGuard, want.data(), n) != 0) {
      size_t i = 0;
      while (b.bytes[kGuard + i] == want[i]) ++i;
      return what + ": byte " + std::to_string(i) + " is " + std::to_string(b.bytes[kGuard + i]) + ", expected " +
             std::to_string(want[i]);
    }
  }
  return "";
}

}  // namespace ringo::tests
