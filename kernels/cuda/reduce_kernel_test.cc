// The reduction and copy kernels against the host's element function, any
// alignment and size; every kernel loading at once with what the GPU holds of
// the ring kernel; launch errors that are the launch's own. Part of
// //kernels/cuda:ring_kernel_test (with ring_kernel_test.cc). Without a
// visible GPU these skip (fail under RINGO_REQUIRE_GPU=1).
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/cuda.h"
#include "base/device/dtype.h"
#include "base/gpu_test.h"
#include "kernels/cuda/internal/test_reference.h"
#include "kernels/cuda/launch.h"
#include "kernels/reduce_op.h"

#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#define RINGO_TEST_HAVE_CUDART 1
#else
#define RINGO_TEST_HAVE_CUDART 0
#endif

namespace ringo::kernels::gpu {
namespace {

#if RINGO_TEST_HAVE_CUDART

using base::BFloat16;
using base::DataType;
using base::Half;
using base::RedOp;
using testref::AsDouble;
using testref::Hash;
using testref::Same;
using testref::Value;

#define SKIP_WITHOUT_GPU()                                                      \
  RINGO_SKIP_WITHOUT_GPU(base::ProbeCuda().device_count > 0,                    \
                         "no CUDA device visible (" << base::ProbeCuda().reason \
                                                    << "): reduction and copy kernels not tested")

void Cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}
#define CUDA(call) Cuda((call), #call)

// ---- Reduction and copy kernels. ----

template <typename T, RedOp kOp>
T ReduceOne(T a, T b) {
  const auto f = ReduceFunc<T, kOp>::Make(1);
  return f.Partial(f.Apply(ToAcc(a), f.Pre(b)));
}

template <typename T>
T ReduceOneOp(RedOp op, T a, T b) {
  switch (op) {
    case RedOp::kSum:
      return ReduceOne<T, RedOp::kSum>(a, b);
    case RedOp::kProd:
      return ReduceOne<T, RedOp::kProd>(a, b);
    case RedOp::kMax:
      return ReduceOne<T, RedOp::kMax>(a, b);
    case RedOp::kMin:
      return ReduceOne<T, RedOp::kMin>(a, b);
    case RedOp::kAvg:
      return ReduceOne<T, RedOp::kAvg>(a, b);
    case RedOp::kPreMulSum:  // needs a scalar: the premul-sum tests cover it
      ADD_FAILURE() << "ReduceOneOp has no scalar for premul-sum";
      return T{};
  }
  return T{};
}

// A device allocation freed on scope exit.
struct DeviceBuffer {
  explicit DeviceBuffer(size_t bytes) { CUDA(cudaMalloc(&p, bytes)); }
  ~DeviceBuffer() { cudaFree(p); }
  char* get() const { return static_cast<char*>(p); }
  void* p = nullptr;
};

template <typename T>
void CheckReduce(DataType dtype, RedOp op, int64_t count, int off_a, int off_b, int off_d) {
  SCOPED_TRACE(std::string(base::DataTypeName(dtype)) + " " + base::RedOpName(op) + " count " +
               std::to_string(count) + " offsets " + std::to_string(off_a) + "/" +
               std::to_string(off_b) + "/" + std::to_string(off_d));
  std::vector<T> a(count), b(count), got(count);
  for (int64_t i = 0; i < count; ++i) {
    a[i] = Value<T>(Hash(1, static_cast<uint32_t>(i), 7), op);
    b[i] = Value<T>(Hash(2, static_cast<uint32_t>(i), 7), op);
  }
  const size_t bytes = count * sizeof(T) + 64;
  DeviceBuffer da(bytes), db(bytes), dd(bytes);
  T* pa = reinterpret_cast<T*>(da.get()) + off_a;
  T* pb = reinterpret_cast<T*>(db.get()) + off_b;
  T* pd = reinterpret_cast<T*>(dd.get()) + off_d;
  CUDA(cudaMemcpy(pa, a.data(), count * sizeof(T), cudaMemcpyHostToDevice));
  CUDA(cudaMemcpy(pb, b.data(), count * sizeof(T), cudaMemcpyHostToDevice));
  const base::Status st = LaunchReduceKernel(dtype, op, pa, pb, pd, count, nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();
  CUDA(cudaDeviceSynchronize());
  CUDA(cudaMemcpy(got.data(), pd, count * sizeof(T), cudaMemcpyDeviceToHost));
  for (int64_t i = 0; i < count; ++i) {
    const T want = ReduceOneOp<T>(op, a[i], b[i]);
    ASSERT_TRUE(Same(got[i], want, RedOp::kSum))
        << "element " << i << ": got " << AsDouble(got[i]) << ", want " << AsDouble(want);
  }
}

template <typename T>
void CheckReduceAllOps(DataType dtype) {
  for (int o = 0; o < base::kNumRedOps; ++o) {
    for (int64_t count : {0, 1, 15, 1000, 65537}) {
      for (auto [x, y, z] : {std::tuple<int, int, int>{0, 0, 0}, {1, 1, 1}, {0, 1, 2}}) {
        CheckReduce<T>(dtype, static_cast<RedOp>(o), count, x, y, z);
        if (testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST(ReduceKernel, MatchesHostForEveryTypeAndOp) {
  SKIP_WITHOUT_GPU();
  CheckReduceAllOps<int8_t>(DataType::kInt8);
  CheckReduceAllOps<uint8_t>(DataType::kUint8);
  CheckReduceAllOps<int32_t>(DataType::kInt32);
  CheckReduceAllOps<uint32_t>(DataType::kUint32);
  CheckReduceAllOps<int64_t>(DataType::kInt64);
  CheckReduceAllOps<uint64_t>(DataType::kUint64);
  CheckReduceAllOps<Half>(DataType::kFloat16);
  CheckReduceAllOps<float>(DataType::kFloat32);
  CheckReduceAllOps<double>(DataType::kFloat64);
  CheckReduceAllOps<BFloat16>(DataType::kBFloat16);
}

TEST(CopyKernel, CopiesAnyAlignmentAndSize) {
  SKIP_WITHOUT_GPU();
  for (int64_t bytes : {0, 1, 15, 4097, (1 << 20) + 3}) {
    for (auto [so, doff] : {std::pair<int, int>{0, 0}, {3, 3}, {1, 6}}) {
      SCOPED_TRACE(std::to_string(bytes) + " bytes, offsets " + std::to_string(so) + "/" +
                   std::to_string(doff));
      std::vector<uint8_t> src(bytes), got(bytes);
      for (int64_t i = 0; i < bytes; ++i)
        src[i] = static_cast<uint8_t>(Hash(3, static_cast<uint32_t>(i), 1));
      DeviceBuffer ds(bytes + 16), dd(bytes + 16);
      CUDA(cudaMemcpy(ds.get() + so, src.data(), bytes, cudaMemcpyHostToDevice));
      const base::Status st = LaunchCopyKernel(ds.get() + so, dd.get() + doff, bytes, nullptr);
      ASSERT_TRUE(st.ok()) << st.ToString();
      CUDA(cudaDeviceSynchronize());
      CUDA(cudaMemcpy(got.data(), dd.get() + doff, bytes, cudaMemcpyDeviceToHost));
      ASSERT_TRUE(src == got);
    }
  }
}

// ---- Loading, residency and launch errors. ----

TEST(RingKernelLoad, EveryKernelLoadsAndFitsTheGpu) {
  SKIP_WITHOUT_GPU();
  const base::StatusOr<RingResidency> r = LoadRingKernels(0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  int sms = 0;
  CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  EXPECT_EQ(r.value().sms, sms);
  EXPECT_GE(r.value().blocks_per_sm, 1)
      << "a ring block of " << kRingThreads << " threads does not fit an SM";
  const base::StatusOr<RingResidency> again = LoadRingKernels(0);  // cached
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value().blocks_per_sm, r.value().blocks_per_sm);
  EXPECT_FALSE(LoadRingKernels(1 << 20).ok());  // no such device
}

// A launch reports its own result: an error another call left in the
// runtime's last-error slot is not this launch's failure.
TEST(RingKernelLoad, LaunchErrorsAreTheLaunchsOwn) {
  SKIP_WITHOUT_GPU();
  DeviceBuffer src(4096), dst(4096);
  CUDA(cudaMemset(src.p, 7, 4096));
  CUDA(cudaDeviceSynchronize());
  ASSERT_NE(cudaSetDevice(1 << 20),
            cudaSuccess);  // leaves cudaErrorInvalidDevice in the last-error slot
  const base::Status st = LaunchCopyKernel(src.p, dst.p, 4096, nullptr);
  EXPECT_TRUE(st.ok()) << st.ToString();
  cudaGetLastError();
  CUDA(cudaDeviceSynchronize());
}

#endif  // RINGO_TEST_HAVE_CUDART

}  // namespace
}  // namespace ringo::kernels::gpu
