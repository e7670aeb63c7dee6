// Reduction bandwidth: the ring's reduce loop (LaunchReduceKernel, dst = a (+) b)
// against a device-to-device cudaMemcpy of the same 256 MiB, float32 and
// bfloat16, timed with CUDA events, median of many iterations after warm-up,
// result verified. Prints the time ratio and the bandwidth ratio (a reduce
// moves 3 x 256 MiB: two reads, one write; a copy 2 x 256 MiB), which is how
// close the reduction runs to the device's copy bandwidth.
//
//   bazel run //kernels/cuda:reduce_bench [-- --benchmark_repetitions=...]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "base/device/dtype.h"
#include "kernels/cuda/launch.h"

#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#define RINGO_BENCH_HAVE_CUDART 1
#else
#define RINGO_BENCH_HAVE_CUDART 0
#endif

#if !RINGO_BENCH_HAVE_CUDART
int main() {
  std::printf("no CUDA device visible: built without the CUDA toolkit, nothing to measure\n");
  return 0;
}
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
std::map<std::string, std::vector<double>> g_ms;  // per-iteration times by benchmark

bool Ok(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(err));
  return false;
}

// Times one enqueue with events on the benchmark stream; -1 on failure.
template <typename Fn>
double TimeMs(Fn enqueue) {
  cudaEventRecord(g.start, g.stream);
  if (!enqueue()) return -1;
  cudaEventRecord(g.stop, g.stream);
  if (!Ok(cudaEventSynchronize(g.stop), "cudaEventSynchronize")) return -1;
  float ms = 0;
  cudaEventElapsedTime(&ms, g.start, g.stop);
  return ms;
}

bool Memcpy() { return Ok(cudaMemcpyAsync(g.dst, g.a, kBytes, cudaMemcpyDeviceToDevice, g.stream), "cudaMemcpyAsync"); }

bool Reduce(DataType dtype) {
  const int64_t count = static_cast<int64_t>(kBytes / ringo::base::DataTypeSize(dtype));
  const ringo::base::Status st = ringo::kernels::gpu::LaunchReduceKernel(dtype, RedOp::kSum, g.a, g.b, g.dst, count, g.stream);
  if (!st.ok()) std::fprintf(stderr, "%s\n", st.ToString().c_str());
  return st.ok();
}

template <typename Fn>
void Run(benchmark::State& state, const std::string& name, double bytes_moved, Fn enqueue) {
  for (auto _ : state) {
    const double ms = TimeMs(enqueue);
    if (ms < 0) {
      state.SkipWithError("CUDA failed");
      return;
    }
    state.SetIterationTime(ms / 1e3);
    g_ms[name].push_back(ms);
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes_moved * state.iterations()));
}

void BM_MemcpyD2D(benchmark::State& state) { Run(state, "memcpy", 2.0 * kBytes, Memcpy); }

void BM_Reduce(benchmark::State& state, DataType dtype) {
  Run(state, ringo::base::DataTypeName(dtype), 3.0 * kBytes, [dtype] { return Reduce(dtype); });
}

BENCHMARK(BM_MemcpyD2D)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(200);
BENCHMARK_CAPTURE(BM_Reduce, float32, DataType::kFloat32)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(200);
BENCHMARK_CAPTURE(BM_Reduce, bfloat16, DataType::kBFloat16)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(200);

// Fills a and b with small integers (exact sums) and checks dst = a + b everywhere.
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
  if (!Ok(cudaMemcpy(g.a, a.data(), kBytes, cudaMemcpyHostToDevice), "upload") ||
      !Ok(cudaMemcpy(g.b, b.data(), kBytes, cudaMemcpyHostToDevice), "upload") || !Reduce(dtype) ||
      !Ok(cudaStreamSynchronize(g.stream), "reduce") ||
      !Ok(cudaMemcpy(got.data(), g.dst, kBytes, cudaMemcpyDeviceToHost), "download")) {
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

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<size_t>(q * (v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device visible: reduction benchmark skipped\n");
    return 0;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
#ifdef NDEBUG
  const char* mode = "opt";
#else
  const char* mode = "debug asserts on";
#endif
  std::printf("device: %s (sm_%d%d, %d SMs), CUDA runtime %d, host build %s, buffers %zu MiB\n", prop.name,
              prop.major, prop.minor, prop.multiProcessorCount, runtime, mode, kBytes >> 20);
  if (!Ok(cudaMalloc(&g.a, kBytes), "cudaMalloc") || !Ok(cudaMalloc(&g.b, kBytes), "cudaMalloc") ||
      !Ok(cudaMalloc(&g.dst, kBytes), "cudaMalloc") || !Ok(cudaStreamCreate(&g.stream), "stream") ||
      !Ok(cudaEventCreate(&g.start), "event") || !Ok(cudaEventCreate(&g.stop), "event")) {
    return 1;
  }
  if (!Verify<float>(DataType::kFloat32) || !Verify<BFloat16>(DataType::kBFloat16)) return 1;
  std::printf("verified: dst = a + b for float32 and bfloat16\n");
  for (int i = 0; i < 20; ++i) {  // warm-up: clocks, caches, lazy module loading
    TimeMs(Memcpy);
    TimeMs([] { return Reduce(DataType::kFloat32); });
    TimeMs([] { return Reduce(DataType::kBFloat16); });
  }

  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  const double copy = Median(g_ms["memcpy"]);
  std::printf("\n%-10s %12s %12s %12s %12s %14s\n", "kernel", "median_us", "p10_us", "p90_us", "GB/s", "vs_memcpy");
  std::printf("%-10s %12.1f %12.1f %12.1f %12.1f %14s\n", "memcpy", copy * 1e3, Quantile(g_ms["memcpy"], 0.1) * 1e3,
              Quantile(g_ms["memcpy"], 0.9) * 1e3, 2.0 * kBytes / (copy * 1e6), "1.00");
  for (const char* name : {"float", "bfloat16"}) {
    const auto& v = g_ms[name];
    const double t = Median(v);
    if (t <= 0 || copy <= 0) continue;
    const double bw = 3.0 * kBytes / (t * 1e6);
    char ratio[64];
    std::snprintf(ratio, sizeof(ratio), "t %.2fx, bw %.2f", t / copy, bw / (2.0 * kBytes / (copy * 1e6)));
    std::printf("%-10s %12.1f %12.1f %12.1f %12.1f %14s\n", name, t * 1e3, Quantile(v, 0.1) * 1e3,
                Quantile(v, 0.9) * 1e3, bw, ratio);
  }
  std::printf("(t: reduce time / memcpy time for the same 256 MiB; bw: (3 x 256 MiB / t_reduce) / (2 x 256 MiB / "
              "t_memcpy))\n");
  cudaFree(g.a);
  cudaFree(g.b);
  cudaFree(g.dst);
  return 0;
}

#endif  // RINGO_BENCH_HAVE_CUDART
