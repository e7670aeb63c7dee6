// Every instruction set's host loops against the scalar definition of each
// reduction (reduce_op.h), bit for bit, over every datatype, op, number of
// inputs and odd counts, with the float special values; and the fp16
// conversions of every set on every value.
#include "kernels/host_isa.h"
#include "kernels/internal/host_loops_table.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/device/half.h"
#include "gtest/gtest.h"
#include "kernels/reduce_op.h"

namespace ringo::kernels::internal {
namespace {

using base::DataType;
using base::RedOp;

std::vector<HostIsa> SupportedIsas() {
  std::vector<HostIsa> isas;
  for (int i = 0; i < kNumHostIsas; ++i) {
    if (HostIsaSupported(static_cast<HostIsa>(i))) isas.push_back(static_cast<HostIsa>(i));
  }
  return isas;
}

// Random elements of T, with the float special values mixed in.
template <typename T>
std::vector<T> RandomElems(int64_t count, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(static_cast<size_t>(count));
  for (auto& x : v) {
    if constexpr (std::is_integral<T>::value) {
      x = static_cast<T>(rng());
    } else {
      const uint64_t r = rng();
      float f = std::ldexp(static_cast<float>(static_cast<int32_t>(r & 0xffff) - 32768), static_cast<int>((r >> 16) % 24) - 16);
      switch ((r >> 40) % 64) {
        case 0: f = std::numeric_limits<float>::quiet_NaN(); break;
        case 1: f = std::numeric_limits<float>::infinity(); break;
        case 2: f = -std::numeric_limits<float>::infinity(); break;
        case 3: f = -0.0f; break;
        case 4: f = std::numeric_limits<float>::denorm_min() * static_cast<float>(r % 1000); break;
        case 5: f = 1e-7f * static_cast<float>(r % 1000); break;  // fp16 subnormals
        case 6: f = 65000.0f; break;                             // near fp16's largest
        default: break;
      }
      if constexpr (std::is_same<T, double>::value) {
        x = static_cast<double>(f) * (1.0 + static_cast<double>(r >> 53) * 1e-9);
      } else {
        x = FromAcc<T>(f);
      }
    }
  }
  return v;
}

template <typename T, RedOp kOp>
T RefReduce(const std::vector<std::vector<T>>& in, size_t i, int nranks) {
  const auto f = ReduceFunc<T, kOp>::Make(nranks);
  auto acc = f.Pre(in[0][i]);
  for (size_t q = 1; q < in.size(); ++q) acc = f.Apply(acc, f.Pre(in[q][i]));
  return f.Post(acc);
}

template <typename T>
bool IsNan(T x) {
  if constexpr (std::is_integral<T>::value) {
    return false;
  } else {
    return std::isnan(static_cast<double>(ToAcc(x)));
  }
}

// The same bits, but for NaN: which of two NaNs an addition passes on is up
// to the operand order the compiler picked (IEEE 754 leaves it open), so any
// NaN matches any NaN. Every other value, -0 and infinities included, must
// match exactly.
template <typename T>
::testing::AssertionResult SameBits(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << what << ": sizes differ";
  for (size_t i = 0; i < got.size(); ++i) {
    if (IsNan(got[i]) && IsNan(want[i])) continue;
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      return ::testing::AssertionFailure() << what << ": element " << i << " of " << got.size() << " differs";
    }
  }
  return ::testing::AssertionSuccess();
}

template <typename T, RedOp kOp>
void CheckReduceAll(HostIsa isa, DataType dtype) {
  const HostLoops& loops = GetHostLoopsFor(isa, dtype, kOp);
  for (int n : {1, 2, 3, 4, 5, 7, 8, 9}) {
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{13}, int64_t{1027}, int64_t{5003}}) {
      std::vector<std::vector<T>> in;
      for (int q = 0; q < n; ++q) in.push_back(RandomElems<T>(count, static_cast<uint32_t>(q * 7919 + count)));
      std::vector<T> want(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) want[i] = RefReduce<T, kOp>(in, static_cast<size_t>(i), n);
      const std::string what = std::string(HostIsaName(isa)) + " " + base::DataTypeName(dtype) + " " +
                               base::RedOpName(kOp) + " n=" + std::to_string(n) + " count=" + std::to_string(count);
      for (bool stream : {false, true}) {
        // Out of place into two outputs, and in place into input 0.
        std::vector<T> out1(static_cast<size_t>(count)), out2(static_cast<size_t>(count));
        std::vector<const void*> ins;
        for (auto& v : in) ins.push_back(v.data());
        void* outs[2] = {out1.data(), out2.data()};
        loops.reduce_all(ins.data(), n, outs, 2, count, n, stream);
        ASSERT_TRUE(SameBits(out1, want, what + " out1"));
        ASSERT_TRUE(SameBits(out2, want, what + " out2"));
        std::vector<std::vector<T>> copy = in;
        std::vector<const void*> cins;
        for (auto& v : copy) cins.push_back(v.data());
        void* self[1] = {copy[0].data()};
        loops.reduce_all(cins.data(), n, self, 1, count, n, stream);
        ASSERT_TRUE(SameBits(copy[0], want, what + " in place"));
      }
    }
  }
}

template <typename T, RedOp kOp>
void CheckRingPrims(HostIsa isa, DataType dtype) {
  const HostLoops& loops = GetHostLoopsFor(isa, dtype, kOp);
  const int nranks = 3;
  const auto f = ReduceFunc<T, kOp>::Make(nranks);
  for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{31}, int64_t{4099}}) {
    const std::vector<T> a = RandomElems<T>(count, 11), b = RandomElems<T>(count, 12);
    std::vector<T> sent(static_cast<size_t>(count)), want_sent(static_cast<size_t>(count));
    std::vector<T> partial(static_cast<size_t>(count)), want_partial(static_cast<size_t>(count));
    std::vector<T> final1(static_cast<size_t>(count)), final2(static_cast<size_t>(count));
    std::vector<T> want_final(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      want_sent[i] = f.Partial(f.Pre(b[i]));
      want_partial[i] = f.Partial(f.Apply(ToAcc(a[i]), f.Pre(b[i])));
      want_final[i] = f.Post(f.Apply(ToAcc(a[i]), f.Pre(b[i])));
    }
    const std::string what = std::string(HostIsaName(isa)) + " " + base::DataTypeName(dtype) + " " +
                             base::RedOpName(kOp) + " count=" + std::to_string(count);
    loops.send(b.data(), sent.data(), count, nranks, false);
    ASSERT_TRUE(SameBits(sent, want_sent, what + " send"));
    loops.reduce_partial(a.data(), b.data(), partial.data(), nullptr, count, nranks, true, false);
    ASSERT_TRUE(SameBits(partial, want_partial, what + " reduce_partial"));
    loops.reduce_final(a.data(), b.data(), final1.data(), final2.data(), count, nranks, false, true);
    ASSERT_TRUE(SameBits(final1, want_final, what + " reduce_final out1"));
    ASSERT_TRUE(SameBits(final2, want_final, what + " reduce_final out2"));
    std::vector<T> in_place = b;  // the output over the rank's own input
    loops.reduce_final(a.data(), in_place.data(), in_place.data(), nullptr, count, nranks, false, false);
    ASSERT_TRUE(SameBits(in_place, want_final, what + " reduce_final in place"));
  }
}

template <typename T>
void CheckType(DataType dtype) {
  for (HostIsa isa : SupportedIsas()) {
    CheckReduceAll<T, RedOp::kSum>(isa, dtype);
    CheckReduceAll<T, RedOp::kProd>(isa, dtype);
    CheckReduceAll<T, RedOp::kMax>(isa, dtype);
    CheckReduceAll<T, RedOp::kMin>(isa, dtype);
    CheckReduceAll<T, RedOp::kAvg>(isa, dtype);
    CheckRingPrims<T, RedOp::kSum>(isa, dtype);
    CheckRingPrims<T, RedOp::kProd>(isa, dtype);
    CheckRingPrims<T, RedOp::kMax>(isa, dtype);
    CheckRingPrims<T, RedOp::kMin>(isa, dtype);
    CheckRingPrims<T, RedOp::kAvg>(isa, dtype);
  }
}

TEST(HostLoopsTest, Int8) { CheckType<int8_t>(DataType::kInt8); }
TEST(HostLoopsTest, Uint8) { CheckType<uint8_t>(DataType::kUint8); }
TEST(HostLoopsTest, Int32) { CheckType<int32_t>(DataType::kInt32); }
TEST(HostLoopsTest, Uint32) { CheckType<uint32_t>(DataType::kUint32); }
TEST(HostLoopsTest, Int64) { CheckType<int64_t>(DataType::kInt64); }
TEST(HostLoopsTest, Uint64) { CheckType<uint64_t>(DataType::kUint64); }
TEST(HostLoopsTest, Float16) { CheckType<base::Half>(DataType::kFloat16); }
TEST(HostLoopsTest, Float32) { CheckType<float>(DataType::kFloat32); }
TEST(HostLoopsTest, Float64) { CheckType<double>(DataType::kFloat64); }
TEST(HostLoopsTest, BFloat16) { CheckType<base::BFloat16>(DataType::kBFloat16); }

// Every fp16 pattern to fp32: the value exactly; NaN stays NaN with its sign
// and payload (F16C also sets the quiet bit of a signalling NaN, which the
// conversion back to fp16 sets anyway).
TEST(HostLoopsTest, EveryHalfToFloat) {
  std::vector<uint16_t> halves(65536);
  for (uint32_t h = 0; h < 65536; ++h) halves[h] = static_cast<uint16_t>(h);
  for (HostIsa isa : SupportedIsas()) {
    std::vector<float> got(65536);
    GetHalfConversionsFor(isa).to_float(halves.data(), got.data(), 65536);
    for (uint32_t h = 0; h < 65536; ++h) {
      const float want = base::HalfBitsToFloat(static_cast<uint16_t>(h));
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got[h])) << HostIsaName(isa) << " " << std::hex << h;
        ASSERT_EQ(base::FloatBits(got[h]) & 0xffbfe000u, base::FloatBits(want) & 0xffbfe000u)
            << HostIsaName(isa) << " NaN payload " << std::hex << h;
      } else {
        ASSERT_EQ(base::FloatBits(got[h]), base::FloatBits(want)) << HostIsaName(isa) << " " << std::hex << h;
      }
    }
  }
}

// Every fp32 pattern to fp16 (2^32 of them) in each set beyond the generic
// one (whose loop is FloatToHalfBits itself, checked against an independent
// reference in base/device/dtype_test), bit for bit.
TEST(HostLoopsTest, EveryFloatToHalf) {
  constexpr int64_t kChunk = int64_t{1} << 20;
  std::vector<float> floats(kChunk);
  std::vector<uint16_t> got(kChunk);
  for (HostIsa isa : SupportedIsas()) {
    if (isa == HostIsa::kGeneric) continue;
    const HalfConversions& conv = GetHalfConversionsFor(isa);
    int64_t mismatches = 0;
    for (uint64_t base = 0; base < (uint64_t{1} << 32); base += kChunk) {
      for (int64_t i = 0; i < kChunk; ++i) floats[i] = base::BitsFloat(static_cast<uint32_t>(base + i));
      conv.from_float(floats.data(), got.data(), kChunk);
      for (int64_t i = 0; i < kChunk; ++i) {
        if (got[i] != base::FloatToHalfBits(floats[i]) && mismatches++ < 5) {
          ADD_FAILURE() << HostIsaName(isa) << ": float 0x" << std::hex << (base + i) << " -> 0x" << got[i]
                        << ", FloatToHalfBits 0x" << base::FloatToHalfBits(floats[i]);
        }
      }
    }
    EXPECT_EQ(mismatches, 0) << HostIsaName(isa);
  }
}

TEST(HostLoopsTest, NamesParse) {
  for (int i = 0; i < kNumHostIsas; ++i) {
    HostIsa isa;
    bool automatic = true;
    ASSERT_TRUE(ParseHostIsa(HostIsaName(static_cast<HostIsa>(i)), &isa, &automatic));
    EXPECT_EQ(isa, static_cast<HostIsa>(i));
    EXPECT_FALSE(automatic);
  }
  HostIsa isa;
  bool automatic = false;
  EXPECT_TRUE(ParseHostIsa("auto", &isa, &automatic));
  EXPECT_TRUE(automatic);
  EXPECT_FALSE(ParseHostIsa("avx512", &isa, &automatic));
}

// Unset: the widest set this CPU runs.
TEST(HostLoopsTest, ActiveIsTheWidestByDefault) {
  if (!base::GetConfig().host_isa.empty()) GTEST_SKIP() << "RINGO_HOST_ISA is set";
  const std::vector<HostIsa> isas = SupportedIsas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), HostIsa::kGeneric);
  EXPECT_EQ(ActiveHostIsa(), isas.back());
  EXPECT_EQ(&GetHostLoops(DataType::kFloat32, RedOp::kSum),
            &GetHostLoopsFor(isas.back(), DataType::kFloat32, RedOp::kSum));
}

// RINGO_HOST_ISA=generic, as a communicator passes its configuration's
// value, picks the baseline set (in a fresh process: the choice is made
// once, at the first use), and a later choice changes nothing.
TEST(HostLoopsDeathTest, ConfigurationPicksTheSet) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("RINGO_HOST_ISA", "generic", 1);
        base::ReloadConfigForTesting();
        SelectHostIsa(base::GetConfig().host_isa);
        SelectHostIsa("auto");
        std::exit(ActiveHostIsa() == HostIsa::kGeneric ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace ringo::kernels::internal
