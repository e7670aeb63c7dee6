// RINGO_DETERMINISTIC=1: the bits of every reduction depend only on the
// inputs and the rank count, not on the algorithm (ring, one-shot, direct),
// the channel count or the slot size. Ranks are threads of this process
// (ringoCommInitAll on host memory), driven by one thread through a group.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ringo/ringo.h"
#include "tests/harness.h"
#include "tests/reference.h"

namespace ringo::tests {
namespace {

enum class Coll { kAllReduce, kReduceScatter, kReduce };
constexpr const char* kCollNames[] = {"AllReduce", "ReduceScatter", "Reduce"};

struct Config {
  const char* algo;
  const char* nchannels;  // nullptr: the planner's
  const char* slot_bytes;
};

const Config kConfigs[] = {
    {"oneshot", nullptr, nullptr}, {"direct", nullptr, nullptr}, {"ring", nullptr, nullptr},
    {"ring", "3", "192"},          {"ring", "1", "4096"},        {"ring", "2", "64"},
};

// Inputs whose sums depend on the order they are added in: magnitudes
// spread over many binades, both signs (floats); full-range values (ints).
std::vector<char> Input(ringoDataType_t dt, int rank, size_t n) {
  std::mt19937_64 rng(1234567u + 7919u * static_cast<unsigned>(rank) + 31u * static_cast<unsigned>(dt));
  std::vector<char> v(n * DataTypeSize(dt));
  for (size_t i = 0; i < n; ++i) {
    if (IsFloatType(dt)) {
      const double mag = std::ldexp(std::uniform_real_distribution<double>(1.0, 2.0)(rng),
                                    static_cast<int>(rng() % 24) - 12);
      WriteFloat(dt, v.data(), i, (rng() & 1) ? mag : -mag);
    } else {
      WriteInt(dt, v.data(), i, rng());
    }
  }
  return v;
}

// Every rank's output bytes (the root's for Reduce), concatenated.
std::vector<char> Run(int nranks, Coll coll, ringoDataType_t dt, ringoRedOp_t op, size_t count,
                      std::string* error) {
  std::vector<ringoComm_t> comms(nranks);
  if (ringoCommInitAll(comms.data(), nranks, nullptr) != ringoSuccess) {
    *error = std::string("ringoCommInitAll: ") + ringoGetLastError(nullptr);
    return {};
  }
  const size_t elem = DataTypeSize(dt);
  const size_t in_count = coll == Coll::kReduceScatter ? count * nranks : count;
  std::vector<std::vector<char>> in(nranks), out(nranks);
  for (int r = 0; r < nranks; ++r) {
    in[r] = Input(dt, r, in_count);
    out[r].assign(count * elem, 0);
  }
  ringoGroupStart();
  for (int r = 0; r < nranks; ++r) {
    switch (coll) {
      case Coll::kAllReduce:
        ringoAllReduce(in[r].data(), out[r].data(), count, dt, op, comms[r], nullptr);
        break;
      case Coll::kReduceScatter:
        ringoReduceScatter(in[r].data(), out[r].data(), count, dt, op, comms[r], nullptr);
        break;
      case Coll::kReduce:
        ringoReduce(in[r].data(), out[r].data(), count, dt, op, 1 % nranks, comms[r], nullptr);
        break;
    }
  }
  if (ringoGroupEnd() != ringoSuccess) *error = std::string("ringoGroupEnd: ") + ringoGetLastError(nullptr);
  for (ringoComm_t c : comms) ringoCommDestroy(c);
  std::vector<char> all;
  for (int r = 0; r < nranks; ++r) {
    if (coll == Coll::kReduce && r != 1 % nranks) continue;
    all.insert(all.end(), out[r].begin(), out[r].end());
  }
  return all;
}

struct Outcome {
  std::vector<char> bytes;
  std::string config;
};

// Runs every configuration and reports the first whose bits differ.
std::string Sweep(bool deterministic, int nranks, Coll coll, ringoDataType_t dt, ringoRedOp_t op, size_t count) {
  std::optional<Outcome> first;
  for (const Config& c : kConfigs) {
    ScopedEnv env({{"RINGO_DETERMINISTIC", deterministic ? "1" : "0"},
                   {"RINGO_ALGO", c.algo},
                   {"RINGO_NCHANNELS", c.nchannels ? std::optional<std::string>(c.nchannels) : std::nullopt},
                   {"RINGO_SLOT_BYTES", c.slot_bytes ? std::optional<std::string>(c.slot_bytes) : std::nullopt}});
    std::string error;
    const std::string name = std::string(c.algo) + "/ch" + (c.nchannels ? c.nchannels : "auto") + "/slot" +
                             (c.slot_bytes ? c.slot_bytes : "auto");
    std::vector<char> bytes = Run(nranks, coll, dt, op, count, &error);
    if (!error.empty()) return name + ": " + error;
    if (!first) {
      first = Outcome{bytes, name};
      continue;
    }
    if (bytes != first->bytes) {
      size_t at = 0;
      while (at < bytes.size() && bytes[at] == first->bytes[at]) ++at;
      return name + " differs from " + first->config + " at byte " + std::to_string(at);
    }
  }
  return "";
}

TEST(Deterministic, SameBitsAcrossAlgorithmsChannelsAndSlots) {
  ScopedEnv env({{"RINGO_DEVICE", "host"}});
  const ringoDataType_t types[] = {ringoInt8,   ringoUint8,  ringoInt32,   ringoUint32,  ringoInt64,
                                   ringoUint64, ringoFloat16, ringoFloat32, ringoFloat64, ringoBfloat16};
  const ringoRedOp_t ops[] = {ringoSum, ringoProd, ringoMax, ringoMin, ringoAvg};
  int runs = 0;
  for (int nranks : {2, 3, 4}) {
    for (int c = 0; c < 3; ++c) {
      for (ringoDataType_t dt : types) {
        for (ringoRedOp_t op : ops) {
          const std::string err = Sweep(true, nranks, static_cast<Coll>(c), dt, op, 333);
          EXPECT_EQ(err, "") << nranks << " ranks " << kCollNames[c] << " " << DataTypeName(dt) << " "
                             << OpName(op);
          ++runs;
        }
      }
    }
  }
  RecordProperty("sweeps", runs);
}

// The sweep can tell: without deterministic mode the same inputs give
// different bits on different algorithms (three ranks' float sums associate
// differently on the ring than in rank order).
TEST(Deterministic, WithoutItTheBitsDependOnTheAlgorithm) {
  ScopedEnv env({{"RINGO_DEVICE", "host"}});
  EXPECT_NE(Sweep(false, 3, Coll::kAllReduce, ringoFloat32, ringoSum, 333), "");
  EXPECT_NE(Sweep(false, 4, Coll::kAllReduce, ringoBfloat16, ringoSum, 333), "");
}

}  // namespace
}  // namespace ringo::tests
