#include "base/cuda_calls.h"

#include <gtest/gtest.h>

#include <thread>

namespace ringo::base {
namespace {

TEST(CudaCalls, EachThreadCountsItsOwn) {
  const CudaCallCounts before = ThreadCudaCalls();
  CountCudaCall(CudaCall::kLaunchKernel);
  CountCudaCall(CudaCall::kEventRecord);
  CountCudaCall(CudaCall::kEventRecord);
  std::thread other([] {
    for (int i = 0; i < 100; ++i) CountCudaCall(CudaCall::kLaunchKernel);
    EXPECT_EQ(ThreadCudaCalls().n[static_cast<int>(CudaCall::kLaunchKernel)], 100u);
  });
  other.join();
  const CudaCallCounts d = ThreadCudaCalls().Since(before);
  EXPECT_EQ(d.n[static_cast<int>(CudaCall::kLaunchKernel)], 1u);
  EXPECT_EQ(d.n[static_cast<int>(CudaCall::kEventRecord)], 2u);
  EXPECT_EQ(d.Total(), 3u);
}

TEST(CudaCalls, DescribedPerCallLargestFirst) {
  CudaCallCounts c;
  c.n[static_cast<int>(CudaCall::kLaunchKernel)] = 100;
  c.n[static_cast<int>(CudaCall::kStreamGetCaptureInfo)] = 100;
  c.n[static_cast<int>(CudaCall::kPointerGetAttributes)] = 200;
  c.n[static_cast<int>(CudaCall::kGetDevice)] = 50;
  EXPECT_EQ(DescribeCudaCalls(c, 100),
            "4.50 per call: cudaPointerGetAttributes 2.00, cudaStreamGetCaptureInfo 1.00, cudaLaunchKernel 1.00, "
            "cudaGetDevice 0.50");
  EXPECT_EQ(DescribeCudaCalls(CudaCallCounts(), 10), "0.00 per call");
  EXPECT_EQ(std::string(CudaCallName(CudaCall::kOther)), "other");
}

}  // namespace
}  // namespace ringo::base
