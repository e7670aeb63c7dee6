// The compressed wire's kernels (collectives/engines/gpu_wire.h): encode a
// piece of the input into a wire format, sum the contributions in fp32 in
// rank order, decode a piece into the output. Each thread runs one unit of
// kernels/wire.h's stage functions, which the host stages run in a loop
// (and whose codecs kernels/wire_test checks against the host's span
// loops), so a GPU rank's wire holds the bits a host rank's does. Built
// with --fmad=false, as the ring kernels: a scaled value is rounded before
// it is added, as on the host.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "base/device/dtype.h"
#include "kernels/cuda/internal/kernel_params.h"
#include "kernels/wire.h"

namespace ringo::kernels::gpu::internal {
namespace {

constexpr int kWireThreads = 256;

__global__ void __launch_bounds__(kWireThreads)
    WireEncodeKernel(int wire, int dtype, const void* src, int64_t n, float scale, uint8_t* out) {
  const Wire w = static_cast<Wire>(wire);
  const int64_t units = WireEncodeUnits(w, n);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; u < units; u += stride) {
    WireEncodeUnit(w, static_cast<base::DataType>(dtype), src, n, scale, out, u);
  }
}

__global__ void __launch_bounds__(kWireThreads)
    WireSumKernel(const WireSource* sources, int nsources, int wire, int64_t n, float* acc) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    acc[i] = WireSumAt(sources, nsources, static_cast<Wire>(wire), i);
  }
}

__global__ void __launch_bounds__(kWireThreads)
    WireDecodeKernel(int wire, const uint8_t* in, int64_t n, int dtype, void* dst) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    WireStore(static_cast<base::DataType>(dtype), dst, i, WireDecodeAt(static_cast<Wire>(wire), in, i));
  }
}

// The most blocks of `kernel` (kernel `which` of the three) the current
// device holds at once: asked once per device and kernel, then remembered.
constexpr int kCachedDevices = 64;
std::atomic<int> most_blocks[3][kCachedDevices];

int MostBlocks(const void* kernel, int which, int* most) {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return static_cast<int>(err);
  if (device >= 0 && device < kCachedDevices) {
    *most = most_blocks[which][device].load(std::memory_order_relaxed);
    if (*most > 0) return 0;
  }
  int sms = 0, per_sm = 0;
  err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err == cudaSuccess) err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kWireThreads, 0);
  if (err != cudaSuccess) return static_cast<int>(err);
  *most = sms * (per_sm > 0 ? per_sm : 1);
  if (device >= 0 && device < kCachedDevices) most_blocks[which][device].store(*most, std::memory_order_relaxed);
  return 0;
}

// Enough blocks for `units` threads' work, at most what the device holds
// at once (the loops stride over the rest).
int Launch(const void* kernel, int which, int64_t units, void** args, void* stream) {
  int most = 0;
  const int err = MostBlocks(kernel, which, &most);
  if (err != 0) return err;
  const int64_t needed = (units + kWireThreads - 1) / kWireThreads;
  const int blocks = static_cast<int>(needed < most ? (needed > 0 ? needed : 1) : most);
  return static_cast<int>(
      cudaLaunchKernel(kernel, dim3(blocks), dim3(kWireThreads), args, 0, static_cast<cudaStream_t>(stream)));
}

}  // namespace

int LaunchWireEncodeKernel(int wire, int dtype, const void* src, int64_t n, float scale, void* out, void* stream) {
  if (n == 0) return 0;
  uint8_t* o = static_cast<uint8_t*>(out);
  void* args[] = {&wire, &dtype, &src, &n, &scale, &o};
  return Launch(reinterpret_cast<const void*>(WireEncodeKernel), 0, WireEncodeUnits(static_cast<Wire>(wire), n), args,
                stream);
}

int LaunchWireSumKernel(const WireSource* sources, int nsources, int wire, int64_t n, float* acc, void* stream) {
  if (n == 0) return 0;
  void* args[] = {&sources, &nsources, &wire, &n, &acc};
  return Launch(reinterpret_cast<const void*>(WireSumKernel), 1, n, args, stream);
}

int LaunchWireDecodeKernel(int wire, const void* in, int64_t n, int dtype, void* dst, void* stream) {
  if (n == 0) return 0;
  const uint8_t* i = static_cast<const uint8_t*>(in);
  void* args[] = {&wire, &i, &n, &dtype, &dst};
  return Launch(reinterpret_cast<const void*>(WireDecodeKernel), 2, n, args, stream);
}

int LoadWireKernels() {
  cudaFuncAttributes attr;
  cudaError_t err = cudaFuncGetAttributes(&attr, WireEncodeKernel);
  if (err == cudaSuccess) err = cudaFuncGetAttributes(&attr, WireSumKernel);
  if (err == cudaSuccess) err = cudaFuncGetAttributes(&attr, WireDecodeKernel);
  return static_cast<int>(err);
}

}  // namespace ringo::kernels::gpu::internal
