// The compressed wire's kernels (collectives/engines/gpu_wire.h): encode a
// piece of the input into a wire format, sum the contributions in fp32 in
// rank order, decode a piece into the output. Each thread runs the value
// and block codecs of kernels/wire.h, the host's own (kernels/wire_test
// checks they give the span loops' bytes), so a GPU rank's wire holds the
// bits a host rank's does. Built with --fmad=false, as the ring kernels: a
// scaled value is rounded before it is added, as on the host.
#include <cuda_runtime.h>

#include <cstdint>

#include "base/device/dtype.h"
#include "kernels/cuda/device_types.h"
#include "kernels/cuda/internal/kernel_params.h"
#include "kernels/wire.h"

namespace ringo::kernels::gpu::internal {
namespace {

constexpr int kWireThreads = 256;

__device__ __forceinline__ float LoadAs(base::DataType dtype, const void* p, int64_t i) {
  switch (dtype) {
    case base::DataType::kBFloat16: return base::BFloat16BitsToFloat(static_cast<const uint16_t*>(p)[i]);
    case base::DataType::kFloat16: return base::HalfBitsToFloat(static_cast<const uint16_t*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ void StoreAs(base::DataType dtype, void* p, int64_t i, float v) {
  switch (dtype) {
    case base::DataType::kBFloat16: static_cast<uint16_t*>(p)[i] = base::FloatToBFloat16Bits(v); return;
    case base::DataType::kFloat16: static_cast<uint16_t*>(p)[i] = base::FloatToHalfBits(v); return;
    default: static_cast<float*>(p)[i] = v; return;
  }
}

// `n` values of `dtype` at `src`, times `scale`, into `out` in `wire`
// (kNone: fp32). A thread per value; for the 8-bit formats a thread per block.
__global__ void __launch_bounds__(kWireThreads)
    WireEncodeKernel(int wire, int dtype, const void* src, int64_t n, float scale, uint8_t* out) {
  const Wire w = static_cast<Wire>(wire);
  const auto dt = static_cast<base::DataType>(dtype);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (w == Wire::kE4m3 || w == Wire::kE5m2) {
    const int64_t blocks = (n + kWireBlock - 1) / kWireBlock;
    for (int64_t b = first; b < blocks; b += stride) {
      const int64_t at = b * kWireBlock;
      const int len = static_cast<int>(n - at < kWireBlock ? n - at : kWireBlock);
      float x[kWireBlock];
      for (int i = 0; i < len; ++i) {
        const float v = LoadAs(dt, src, at + i);
        x[i] = scale == 1.0f ? v : v * scale;
      }
      WireEncodeEightBlock(w, x, len, out + b * (kWireBlock + 1));
    }
    return;
  }
  for (int64_t i = first; i < n; i += stride) {
    const float v0 = LoadAs(dt, src, i);
    const float v = scale == 1.0f ? v0 : v0 * scale;
    if (w == Wire::kNone) {
      reinterpret_cast<float*>(out)[i] = v;
    } else {
      reinterpret_cast<uint16_t*>(out)[i] = WireEncodeSixteen(w, v);
    }
  }
}

// acc[i] = the sum over sources r, in order, of value i of source r (in
// `wire` where it is wired, fp32 otherwise), each addition in fp32.
__global__ void __launch_bounds__(kWireThreads)
    WireSumKernel(const WireSource* sources, int nsources, int wire, int64_t n, float* acc) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    float a = 0.0f;
    for (int r = 0; r < nsources; ++r) {
      const Wire w = sources[r].wired != 0 ? static_cast<Wire>(wire) : Wire::kNone;
      const float v = WireDecodeAt(w, sources[r].bytes, i);
      a = r == 0 ? v : a + v;
    }
    acc[i] = a;
  }
}

// dst[i] = value i of `in` (in `wire`), as `dtype`, rounded to nearest even.
__global__ void __launch_bounds__(kWireThreads)
    WireDecodeKernel(int wire, const uint8_t* in, int64_t n, int dtype, void* dst) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    StoreAs(static_cast<base::DataType>(dtype), dst, i, WireDecodeAt(static_cast<Wire>(wire), in, i));
  }
}

// Enough blocks for `units` threads' work, at most what the device holds
// at once (the loops stride over the rest).
int WireGrid(const void* kernel, int64_t units, int* blocks) {
  int device = 0, sms = 0, per_sm = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err == cudaSuccess) err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kWireThreads, 0);
  if (err != cudaSuccess) return static_cast<int>(err);
  const int64_t needed = (units + kWireThreads - 1) / kWireThreads;
  const int64_t most = static_cast<int64_t>(sms) * (per_sm > 0 ? per_sm : 1);
  *blocks = static_cast<int>(needed < most ? (needed > 0 ? needed : 1) : most);
  return 0;
}

int Launch(const void* kernel, int64_t units, void** args, void* stream) {
  int blocks = 0;
  const int err = WireGrid(kernel, units, &blocks);
  if (err != 0) return err;
  return static_cast<int>(
      cudaLaunchKernel(kernel, dim3(blocks), dim3(kWireThreads), args, 0, static_cast<cudaStream_t>(stream)));
}

}  // namespace

int LaunchWireEncodeKernel(int wire, int dtype, const void* src, int64_t n, float scale, void* out, void* stream) {
  if (n == 0) return 0;
  const bool eight = wire == static_cast<int>(Wire::kE4m3) || wire == static_cast<int>(Wire::kE5m2);
  uint8_t* o = static_cast<uint8_t*>(out);
  void* args[] = {&wire, &dtype, &src, &n, &scale, &o};
  return Launch(reinterpret_cast<const void*>(WireEncodeKernel), eight ? (n + kWireBlock - 1) / kWireBlock : n,
                args, stream);
}

int LaunchWireSumKernel(const WireSource* sources, int nsources, int wire, int64_t n, float* acc, void* stream) {
  if (n == 0) return 0;
  void* args[] = {&sources, &nsources, &wire, &n, &acc};
  return Launch(reinterpret_cast<const void*>(WireSumKernel), n, args, stream);
}

int LaunchWireDecodeKernel(int wire, const void* in, int64_t n, int dtype, void* dst, void* stream) {
  if (n == 0) return 0;
  const uint8_t* i = static_cast<const uint8_t*>(in);
  void* args[] = {&wire, &i, &n, &dtype, &dst};
  return Launch(reinterpret_cast<const void*>(WireDecodeKernel), n, args, stream);
}

int LoadWireKernels() {
  cudaFuncAttributes attr;
  cudaError_t err = cudaFuncGetAttributes(&attr, WireEncodeKernel);
  if (err == cudaSuccess) err = cudaFuncGetAttributes(&attr, WireSumKernel);
  if (err == cudaSuccess) err = cudaFuncGetAttributes(&attr, WireDecodeKernel);
  return static_cast<int>(err);
}

}  // namespace ringo::kernels::gpu::internal
