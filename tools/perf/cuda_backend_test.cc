// ringo-perf's CUDA backend on device 0: buffers, copies and fills ordered on
// its stream, event timing, and the verification kernels against the host
// verifier (inputs byte for byte, #wrong on correct, corrupted and poisoned
// results). Every GPU case skips with a message where no GPU is visible; the
// refusals that need no GPU run everywhere. Not yet run on a GPU.
#include "tools/perf/cuda_backend.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/cuda.h"
#include "base/gpu_test.h"
#include "tools/perf/collective.h"
#include "tools/perf/verify.h"

namespace ringo::perf {
namespace {

using base::DataType;
using base::RedOp;

#define SKIP_WITHOUT_GPU()                                                                        \
  RINGO_SKIP_WITHOUT_GPU(base::ProbeCuda().device_count > 0,                                      \
                         "no CUDA device visible (" << base::ProbeCuda().reason                   \
                                                    << "): ringo-perf's CUDA backend and device " \
                                                       "verification not tested")

TEST(CudaBackend, HostForNoDevice) {
  auto backend = MakeCudaOrHostBackend(-1, nullptr);
  ASSERT_TRUE(backend.ok()) << backend.status().message();
  EXPECT_EQ((*backend)->stream(), nullptr);
  EXPECT_EQ((*backend)->DeviceDescription(), "");
}

TEST(CudaBackend, RefusesHostAllocatorOnADevice) {
  HostAllocator allocator{[](size_t) -> base::StatusOr<void*> { return nullptr; }, [](void*) {}};
  auto backend = MakeCudaOrHostBackend(0, &allocator);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), base::Code::kInvalidUsage);
  // With a toolkit the message is about -R; without one, about the build.
  const std::string& message = backend.status().message();
  EXPECT_TRUE(message.find("-R 1") != std::string::npos ||
              message.find("without the CUDA toolkit") != std::string::npos)
      << message;
}

std::unique_ptr<Backend> Device0() {
  auto backend = MakeCudaOrHostBackend(0, nullptr);
  EXPECT_TRUE(backend.ok()) << backend.status().message();
  return backend.ok() ? std::move(*backend) : nullptr;
}

TEST(CudaBackend, BuffersCopiesFillsAndStream) {
  SKIP_WITHOUT_GPU();
  std::unique_ptr<Backend> backend = Device0();
  ASSERT_NE(backend, nullptr);
  EXPECT_NE(backend->stream(), nullptr);
  EXPECT_EQ(backend->DeviceDescription().rfind("[", 0), 0u) << backend->DeviceDescription();

  constexpr size_t kBytes = (size_t{1} << 20) + 3;
  auto buffer = AllocBuffer(backend.get(), kBytes);
  ASSERT_TRUE(buffer.ok()) << buffer.status().message();
  EXPECT_TRUE(base::IsDevicePointer(buffer->data()));
  EXPECT_EQ(base::PointerDevice(buffer->data()), 0);

  std::vector<char> host(kBytes), back(kBytes, 1);
  ASSERT_TRUE(backend->CopyToHost(back.data(), buffer->data(), kBytes).ok());
  EXPECT_EQ(back, host);  // Alloc zeroes

  for (size_t i = 0; i < kBytes; ++i) host[i] = static_cast<char>(i * 31 + 7);
  ASSERT_TRUE(backend->CopyToBackend(buffer->data(), host.data(), kBytes).ok());
  // Fill is enqueued on the stream: the copy after it sees it.
  ASSERT_TRUE(backend->Fill(buffer->data() + 5, 0xab, 100).ok());
  std::memset(host.data() + 5, 0xab, 100);
  ASSERT_TRUE(backend->CopyToHost(back.data(), buffer->data(), kBytes).ok());
  EXPECT_EQ(back, host);
  EXPECT_TRUE(backend->Synchronize().ok());
}

TEST(CudaBackend, EventTimingCoversTheStreamsWork) {
  SKIP_WITHOUT_GPU();
  std::unique_ptr<Backend> backend = Device0();
  ASSERT_NE(backend, nullptr);
  constexpr size_t kBytes = size_t{256} << 20;
  auto buffer = AllocBuffer(backend.get(), kBytes);
  ASSERT_TRUE(buffer.ok()) << buffer.status().message();
  ASSERT_TRUE(backend->StartTimer().ok());
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(backend->Fill(buffer->data(), i, kBytes).ok());
  auto seconds = backend->StopTimer();
  ASSERT_TRUE(seconds.ok()) << seconds.status().message();
  // 5 GiB of memset: well above a microsecond, well below a minute.
  EXPECT_GT(*seconds, 1e-6);
  EXPECT_LT(*seconds, 60.0);
  // Back to back, an empty interval.
  ASSERT_TRUE(backend->StartTimer().ok());
  auto empty = backend->StopTimer();
  ASSERT_TRUE(empty.ok());
  EXPECT_GE(*empty, 0.0);
  EXPECT_LT(*empty, *seconds);
}

TEST(CudaBackend, DeviceVerificationMatchesTheHost) {
  SKIP_WITHOUT_GPU();
  std::unique_ptr<Backend> backend = Device0();
  ASSERT_NE(backend, nullptr);
  constexpr size_t kMaxBytes = size_t{3} << 20;
  auto buffer = AllocBuffer(backend.get(), kMaxBytes);
  ASSERT_TRUE(buffer.ok()) << buffer.status().message();
  std::vector<char> host(kMaxBytes), got(kMaxBytes);
  int checked = 0;
  for (Collective c : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                       Collective::kBroadcast, Collective::kReduce}) {
    for (int o = 0; o < base::kNumRedOps; ++o) {
      const RedOp op = static_cast<RedOp>(o);
      if (!HasOp(c) && op != RedOp::kSum) continue;
      for (int t = 0; t < kPerfDataTypes; ++t) {
        const DataType type = static_cast<DataType>(t);
        const size_t ts = base::DataTypeSize(type);
        for (size_t bytes : {size_t{0}, size_t{1000}, kMaxBytes - 8}) {
          const int nranks = 3, rank = 2;
          const CollCounts counts = ComputeCounts(c, bytes, ts, nranks);
          const Pattern pattern(c, op, type, rank, nranks, rank, counts);
          const std::string name = std::string(CollectiveName(c)) + " " + base::RedOpName(op) +
                                   " " + base::DataTypeName(type) + " " + std::to_string(bytes);
          // Inputs.
          const size_t in_bytes = counts.send_count * ts;
          FillInput(type, pattern, pattern.InputFirst(), counts.send_count, host.data());
          ASSERT_TRUE(backend
                          ->FillInput(type, pattern, pattern.InputFirst(), counts.send_count,
                                      buffer->data())
                          .ok());
          ASSERT_TRUE(backend->CopyToHost(got.data(), buffer->data(), in_bytes).ok());
          ASSERT_EQ(std::memcmp(got.data(), host.data(), in_bytes), 0) << name;
          // Results: poison everywhere, then every 13th element left poisoned.
          const size_t out = counts.recv_count;
          std::memset(host.data(), kPoisonByte, out * ts);
          std::vector<char> expected(out * ts);
          WithDataType(type, [&](auto zero) {
            using T = decltype(zero);
            for (size_t i = 0; i < out; ++i) {
              if (i % 13 == 4) continue;
              const T v = FromDouble<T>(pattern.Expected(pattern.OutputFirst() + i));
              std::memcpy(host.data() + i * ts, &v, ts);
            }
          });
          ASSERT_TRUE(backend->CopyToBackend(buffer->data(), host.data(), out * ts).ok());
          const int64_t want = CountWrong(type, pattern, pattern.OutputFirst(), out, host.data());
          auto wrong =
              backend->CountWrong(type, pattern, pattern.OutputFirst(), out, buffer->data());
          ASSERT_TRUE(wrong.ok()) << wrong.status().message();
          EXPECT_EQ(*wrong, want) << name;
          EXPECT_EQ(want, static_cast<int64_t>((out + 8) / 13)) << name;
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 300);
}

}  // namespace
}  // namespace ringo::perf
