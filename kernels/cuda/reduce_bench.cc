// Reduction bandwidth: the ring's reduce loop (LaunchReduceKernel, dst = a (+) b,
// sum) on 256 MiB of float32 and of bfloat16, beside a device-to-device
// cudaMemcpyAsync of the same 256 MiB, each timed with CUDA events on one
// stream: warm-up, then the median (and 10th/90th percentiles) of many
// iterations. Inputs are small integers (exact sums, never all zeros) and
// the result is verified on the host before timing. A reduce moves 3 x 256
// MiB (two reads, one write), a copy 2 x 256 MiB; each line gives the bytes
// moved and GB/s, so a caller computes the ratio (scripts/gpu_check.sh).
//
//   reduce_bench [--iters N]
//
// Output: a "# device ..." line, then per measurement
//   RESULT <name> bytes=<moved> median_us=<t> p10_us=<t> p90_us=<t> GBps=<moved / median>
// Exit status: 0 measured and verified; 1 a failure or a wrong result; with
// no usable GPU it says so and exits 0 (1 under RINGO_REQUIRE_GPU=1).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "base/config.h"
#include "base/cuda.h"
#include "base/device/dtype.h"
#include "kernels/cuda/launch.h"

#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#define RINGO_BENCH_HAVE_CUDART 1
#else
#define RINGO_BENCH_HAVE_CUDART 0
#endif

namespace {

int NoGpu(const std::string& why) {
  std::printf("no CUDA device visible (%s): reduction benchmark skipped\n", why.c_str());
  return ringo::base::GetConfig().require_gpu ? 1 : 0;
}

}  // namespace

#if !RINGO_BENCH_HAVE_CUDART
int main() { return NoGpu("built without the CUDA toolkit"); }
#else

namespace {

using ringo::base::BFloat16;
using ringo::base::DataType;
using ringo::base::RedOp;

constexpr size_t kBytes = size_t{256} << 20;

struct Device {
  void* a = nullptr;
  void* b = nullptr;
  void* dst = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
};
Device g;

bool Ok(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(err));
  return false;
}

bool Memcpy() {
  return Ok(cudaMemcpyAsync(g.dst, g.a, kBytes, cudaMemcpyDeviceToDevice, g.stream),
            "cudaMemcpyAsync");
}

bool Reduce(DataType dtype) {
  const int64_t count = static_cast<int64_t>(kBytes / ringo::base::DataTypeSize(dtype));
  const ringo::base::Status st =
      ringo::kernels::gpu::LaunchReduceKernel(dtype, RedOp::kSum, g.a, g.b, g.dst, count, g.stream);
  if (!st.ok()) std::fprintf(stderr, "%s\n", st.ToString().c_str());
  return st.ok();
}

// Times one enqueue with events on the stream, in ms; -1 on failure.
template <typename Fn>
double TimeMs(Fn enqueue) {
  if (!Ok(cudaEventRecord(g.start, g.stream), "cudaEventRecord") || !enqueue() ||
      !Ok(cudaEventRecord(g.stop, g.stream), "cudaEventRecord") ||
      !Ok(cudaEventSynchronize(g.stop), "cudaEventSynchronize")) {
    return -1;
  }
  float ms = 0;
  if (!Ok(cudaEventElapsedTime(&ms, g.start, g.stop), "cudaEventElapsedTime")) return -1;
  return ms;
}

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

// Warm-up, then `iters` timings; prints the RESULT line. False on failure.
template <typename Fn>
bool Measure(const char* name, double bytes_moved, int iters, Fn enqueue) {
  for (int i = 0; i < 5; ++i) {
    if (TimeMs(enqueue) < 0) return false;
  }
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    const double t = TimeMs(enqueue);
    if (t < 0) return false;
    ms.push_back(t);
  }
  const double median = Quantile(ms, 0.5);
  std::printf("RESULT %s bytes=%.0f median_us=%.1f p10_us=%.1f p90_us=%.1f GBps=%.1f\n", name,
              bytes_moved, median * 1e3, Quantile(ms, 0.1) * 1e3, Quantile(ms, 0.9) * 1e3,
              bytes_moved / (median * 1e6));
  std::fflush(stdout);
  return true;
}

// a = (i % 17) - 8, b = i % 5 (exact in bfloat16 and float), then dst = a + b checked everywhere.
template <typename T>
bool Verify(DataType dtype) {
  const size_t n = kBytes / sizeof(T);
  std::vector<T> a(n), b(n), got(n);
  for (size_t i = 0; i < n; ++i) {
    const float x = static_cast<float>(static_cast<int>(i % 17) - 8), y = static_cast<float>(static_cast<int>(i % 5));
    if constexpr (std::is_same<T, BFloat16>::value) {
      a[i] = BFloat16::FromFloat(x);
      b[i] = BFloat16::FromFloat(y);
    } else {
      a[i] = x;
      b[i] = y;
    }
  }
  if (!Ok(cudaMemcpyAsync(g.a, a.data(), kBytes, cudaMemcpyHostToDevice, g.stream), "upload") ||
      !Ok(cudaMemcpyAsync(g.b, b.data(), kBytes, cudaMemcpyHostToDevice, g.stream), "upload") ||
      !Ok(cudaMemsetAsync(g.dst, 0xFF, kBytes, g.stream), "poison") || !Reduce(dtype) ||
      !Ok(cudaMemcpyAsync(got.data(), g.dst, kBytes, cudaMemcpyDeviceToHost, g.stream),
          "download") ||
      !Ok(cudaStreamSynchronize(g.stream), "reduce")) {
    return false;
  }
  for (size_t i = 0; i < n; ++i) {
    float want, have;
    if constexpr (std::is_same<T, BFloat16>::value) {
      want = a[i].ToFloat() + b[i].ToFloat();
      have = got[i].ToFloat();
    } else {
      want = a[i] + b[i];
      have = got[i];
    }
    if (want != have) {
      std::fprintf(stderr, "%s: element %zu is %g, want %g\n", ringo::base::DataTypeName(dtype), i, have, want);
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 100;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
      iters = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--iters N]\n", argv[0]);
      return 2;
    }
  }
  const ringo::base::CudaProbe& probe = ringo::base::ProbeCuda();
  if (probe.device_count == 0) return NoGpu(probe.reason);
  cudaDeviceProp prop{};
  int runtime = 0;
  if (!Ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties") ||
      !Ok(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion")) {
    return 1;
  }
  std::printf(
      "# device 0: %s (sm_%d%d, %d SMs, %.0f MiB), CUDA runtime %d, buffers %zu MiB, %d "
      "iterations\n",
      prop.name, prop.major, prop.minor, prop.multiProcessorCount,
      static_cast<double>(prop.totalGlobalMem) / (1 << 20), runtime, kBytes >> 20, iters);
  if (!Ok(cudaMalloc(&g.a, kBytes), "cudaMalloc") || !Ok(cudaMalloc(&g.b, kBytes), "cudaMalloc") ||
      !Ok(cudaMalloc(&g.dst, kBytes), "cudaMalloc") ||
      !Ok(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking), "stream") ||
      !Ok(cudaEventCreate(&g.start), "event") || !Ok(cudaEventCreate(&g.stop), "event")) {
    return 1;
  }
  if (!Verify<float>(DataType::kFloat32)) return 1;
  if (!Verify<BFloat16>(DataType::kBFloat16)) return 1;
  std::printf(
      "# verified: dst = a + b for float32 and bfloat16 (inputs: small integers, not zeros)\n");
  bool ok = Measure("memcpy_d2d", 2.0 * kBytes, iters, Memcpy);
  ok = ok &&
       Measure("reduce_float32", 3.0 * kBytes, iters, [] { return Reduce(DataType::kFloat32); });
  ok = ok &&
       Measure("reduce_bfloat16", 3.0 * kBytes, iters, [] { return Reduce(DataType::kBFloat16); });
  ok =
      ok && Measure("memcpy_d2d_again", 2.0 * kBytes, iters, Memcpy);  // the spread of the baseline
  cudaFree(g.a);
  cudaFree(g.b);
  cudaFree(g.dst);
  return ok ? 0 : 1;
}

#endif  // RINGO_BENCH_HAVE_CUDART
