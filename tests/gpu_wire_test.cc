// The compressed wire on GPU communicators (collectives/engines/gpu_wire.h,
// opt-in with RINGO_GPU_WIRE=1): thread ranks sharing CUDA device 0, every
// pair over loopback TCP (RINGO_SHM_DISABLE=1, so every pair "crosses the
// network" and is compressed), run fp32, bf16 and fp16 sum and avg
// all-reduces (in place and not) and reduce-scatters in every wire format,
// at 2, 3 and 4 ranks, over counts that straddle blocks, shards and rounds;
// every result must have the bits the host wire engine gives for the same
// inputs (host communicators run the same calls after), on every rank.
// Also: ringoCommSetWire accepts the GPU communicator. Skips where no GPU is
// visible (fails instead under RINGO_REQUIRE_GPU=1); not yet run on a GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "base/cuda.h"
#include "base/device/half.h"
#include "base/gpu_test.h"
#include "ringo/ringo.h"
#include "tests/api_test_util.h"
#include "tests/harness.h"

#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#define RINGO_TEST_HAVE_CUDART 1
#else
#define RINGO_TEST_HAVE_CUDART 0
#endif

namespace ringo::tests {
namespace {

bool GpuVisible() { return base::ProbeCuda().device_count > 0; }

#if RINGO_TEST_HAVE_CUDART

struct Case {
  ringoRedOp_t op;
  ringoDataType_t dtype;
  bool all_reduce;
  bool in_place;
};

size_t Esize(ringoDataType_t dt) { return dt == ringoFloat32 ? 4 : 2; }

// Rank r's input of `count` elements (`rs`: times nranks, for
// reduce-scatter), gradient-like values over several binades.
std::vector<uint8_t> Input(ringoDataType_t dt, int rank, size_t count, uint32_t seed) {
  std::mt19937 gen(seed * 7919u + static_cast<uint32_t>(rank));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> spread(-8, 2);
  std::vector<uint8_t> bytes(count * Esize(dt));
  for (size_t i = 0; i < count; ++i) {
    const float v = std::ldexp(normal(gen), spread(gen));
    if (dt == ringoFloat32) {
      std::memcpy(&bytes[4 * i], &v, 4);
    } else {
      const uint16_t h = dt == ringoBfloat16 ? base::FloatToBFloat16Bits(v) : base::FloatToHalfBits(v);
      std::memcpy(&bytes[2 * i], &h, 2);
    }
  }
  return bytes;
}

const char* Name(ringoDataType_t dt) { return dt == ringoFloat32 ? "fp32" : dt == ringoBfloat16 ? "bf16" : "fp16"; }

// Every case's output on every rank, by (case index, rank).
using Outputs = std::map<std::pair<int, int>, std::vector<uint8_t>>;

// Runs every case on `nranks` thread ranks, on the GPU (`gpu`) or in host
// memory, with `wire`; the outputs into `outputs`.
std::string RunCases(bool gpu, int nranks, int wire, const std::vector<Case>& cases, size_t count, Outputs* outputs) {
  std::mutex mu;
  auto results = RunRanks(nranks, RankMode::kThreads, std::chrono::seconds(240),
                          [&](int rank, int n, const ringoUniqueId& id) -> std::string {
    cudaStream_t stream = nullptr;
    // Device memory for the largest case and the stream, before the
    // communicator exists (a cudaMalloc or cudaFree while other ranks'
    // kernels wait for this rank could wait for them: docs/gpu.md's hazards).
    void* dev = nullptr;
    if (gpu) {
      cudaSetDevice(0);
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      cudaMalloc(&dev, (count * n + count) * 4);
    }
    ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
    config.device_kind = gpu ? RINGO_DEVICE_CUDA : RINGO_DEVICE_HOST;
    ringoComm_t comm = nullptr;
    if (ringoCommInitRankConfig(&comm, n, id, rank, &config) != ringoSuccess) {
      if (dev != nullptr) cudaFree(dev);
      return std::string("init: ") + ringoGetLastError(nullptr);
    }
    // The wire is set after init: the GPU communicator must accept it.
    if (ringoCommSetWire(comm, wire) != ringoSuccess) {
      std::string why = std::string("set wire: ") + ringoGetLastError(comm);
      ringoCommDestroy(comm);
      if (dev != nullptr) cudaFree(dev);
      return why;
    }
    std::string fail;
    for (size_t c = 0; c < cases.size() && fail.empty(); ++c) {
      const Case& k = cases[c];
      const size_t es = Esize(k.dtype);
      const size_t in_count = k.all_reduce ? count : count * n;
      const size_t out_count = count;
      std::vector<uint8_t> in = Input(k.dtype, rank, in_count, static_cast<uint32_t>(c + 1));
      std::vector<uint8_t> out(out_count * es, 0);
      void* send = nullptr;
      void* recv = nullptr;
      if (gpu) {
        cudaMemcpy(dev, in.data(), in_count * es, cudaMemcpyHostToDevice);
        send = dev;
        recv = k.in_place ? (k.all_reduce ? dev : static_cast<uint8_t*>(dev) + rank * count * es)
                          : static_cast<uint8_t*>(dev) + in_count * es;
      } else {
        send = in.data();
        recv = k.in_place ? (k.all_reduce ? in.data() : in.data() + rank * count * es) : out.data();
      }
      ringoResult_t rc = k.all_reduce ? ringoAllReduce(send, recv, count, k.dtype, k.op, comm, stream)
                                      : ringoReduceScatter(send, recv, count, k.dtype, k.op, comm, stream);
      if (rc == ringoSuccess && gpu && cudaStreamSynchronize(stream) != cudaSuccess) rc = ringoUnhandledCudaError;
      if (rc == ringoSuccess) {
        ringoResult_t async = ringoSuccess;
        ringoCommGetAsyncError(comm, &async);
        rc = async;
      }
      if (rc != ringoSuccess) {
        fail = std::string("case ") + std::to_string(c) + ": " + ringoGetErrorString(rc) + " (" +
               ringoGetLastError(comm) + ")";
      } else if (gpu) {
        cudaMemcpy(out.data(), recv, out_count * es, cudaMemcpyDeviceToHost);
      } else if (k.in_place) {
        std::memcpy(out.data(), recv, out_count * es);
      }
      std::lock_guard<std::mutex> lock(mu);
      (*outputs)[{static_cast<int>(c), rank}] = std::move(out);
    }
    ringoCommDestroy(comm);
    if (stream != nullptr) cudaStreamDestroy(stream);
    if (dev != nullptr) cudaFree(dev);
    return fail;
  });
  return DescribeFailures(results);
}

class GpuWireTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    SetEnvAndReload("RINGO_SHM_DISABLE", "1");  // every pair over TCP: every pair compressed
    SetEnvAndReload("RINGO_GPU_WIRE", "1");
  }
};

TEST_F(GpuWireTest, GpuRanksGiveTheHostWireEnginesBits) {
  RINGO_SKIP_WITHOUT_GPU(GpuVisible(), "no CUDA device visible (" + base::ProbeCuda().reason + ")");
  std::vector<Case> cases;
  for (ringoDataType_t dt : {ringoFloat32, ringoBfloat16, ringoFloat16}) {
    for (ringoRedOp_t op : {ringoSum, ringoAvg}) {
      for (bool ar : {true, false}) {
        for (bool ip : {false, true}) cases.push_back({op, dt, ar, ip});
      }
    }
  }
  // (ranks, count): blocks and shards that do not divide, and at 2 ranks a
  // count of several rounds (262144 values a shard each).
  const std::vector<std::pair<int, size_t>> shapes = {{2, 1}, {2, 4099}, {3, 4099}, {4, 100003}, {2, 600001}};
  for (int wire : {ringoWireBf16, ringoWireFp16, ringoWireFp8e4m3, ringoWireFp8e5m2}) {
    for (const auto& [n, count] : shapes) {
      SCOPED_TRACE("wire " + std::to_string(wire) + ", " + std::to_string(n) + " ranks, " + std::to_string(count));
      Outputs on_gpu, on_host;
      ASSERT_EQ(RunCases(true, n, wire, cases, count, &on_gpu), "");
      ASSERT_EQ(RunCases(false, n, wire, cases, count, &on_host), "");
      for (size_t c = 0; c < cases.size(); ++c) {
        for (int r = 0; r < n; ++r) {
          const auto& g = on_gpu[{static_cast<int>(c), r}];
          const auto& h = on_host[{static_cast<int>(c), r}];
          ASSERT_EQ(g.size(), h.size());
          size_t first = g.size();
          for (size_t b = 0; b < g.size(); ++b) {
            if (g[b] != h[b]) {
              first = b;
              break;
            }
          }
          EXPECT_EQ(first, g.size()) << Name(cases[c].dtype) << (cases[c].op == ringoSum ? " sum " : " avg ")
                                     << (cases[c].all_reduce ? "all-reduce" : "reduce-scatter")
                                     << (cases[c].in_place ? " in place" : "") << ", rank " << r
                                     << ": first differing byte " << first;
        }
      }
    }
  }
}

#else

TEST(GpuWireTest, GpuRanksGiveTheHostWireEnginesBits) {
  RINGO_SKIP_WITHOUT_GPU(GpuVisible(), "built without the CUDA runtime");
}

#endif

}  // namespace
}  // namespace ringo::tests
