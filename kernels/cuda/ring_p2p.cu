// The point-to-point kernel (p2p_types.h): one block of kP2pThreads per lane,
// gridDim.x = nlanes. Every block of a launch must be resident at once only
// as far as its peers' blocks wait on it (a send waits for its receiver to
// free slots); a launch holds at most kMaxP2pLanes blocks of 256 threads.
//
// Memory ordering (device_fifo.cuh's rules): thread 0 waits on a counter
// with a system-scope acquire, a barrier hands the slot to the block; after
// the block's copy, a barrier, then thread 0 writes the slot's size and
// release-stores the counter (the release is cumulative over the block's
// writes before the barrier). User buffers are this rank's device memory,
// ordered by the stream.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/internal/device_fifo.cuh"
#include "kernels/cuda/internal/kernel_params.h"
#include "kernels/cuda/p2p_types.h"

namespace ringo::kernels::gpu::internal {
namespace {

// dst = src for n bytes by every thread of the block: 16-byte vectors where
// both are aligned alike, bytes otherwise.
__device__ __forceinline__ void BlockCopy(char* dst, const char* src, uint64_t n) {
  const uint64_t t = threadIdx.x, stride = blockDim.x;
  uint64_t head = 0;
  if (((reinterpret_cast<uintptr_t>(dst) ^ reinterpret_cast<uintptr_t>(src)) & 15) == 0) {
    head = (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15;
    if (head > n) head = n;
    const uint64_t vectors = (n - head) / 16;
    const uint4* s = reinterpret_cast<const uint4*>(src + head);
    uint4* d = reinterpret_cast<uint4*>(dst + head);
    for (uint64_t i = t; i < vectors; i += stride) d[i] = __ldcg(s + i);
    for (uint64_t i = t; i < head; i += stride) dst[i] = src[i];
    for (uint64_t i = head + vectors * 16 + t; i < n; i += stride) dst[i] = src[i];
    return;
  }
  for (uint64_t i = t; i < n; i += stride) dst[i] = src[i];
}

// The size the sender stored for slot `step` (read after the tail's acquire).
__device__ __forceinline__ uint64_t SlotBytes(const DeviceFifo& f, uint64_t step) {
  return *static_cast<volatile uint64_t*>(&f.meta[step % kFifoSlots].bytes);
}

__global__ void __launch_bounds__(kP2pThreads) P2pKernel(const __grid_constant__ P2pKernelArgs a,
                                                         const __grid_constant__ KernelGuard guard) {
  __shared__ int failed;
  __shared__ uint64_t first_step;
  const P2pLane& lane = a.lanes[blockIdx.x];
  const DeviceFifo& f = lane.fifo;
  if (threadIdx.x == 0) {
    failed = 0;
    first_step = lane.kind == P2pLaneKind::kSend   ? LoadOwnCounter(f.tail)
                 : lane.kind == P2pLaneKind::kRecv ? LoadOwnCounter(f.head)
                                                   : 0;
  }
  __syncthreads();
  const Watchdog watchdog(guard, static_cast<int>(blockIdx.x), &failed);
  if (lane.kind == P2pLaneKind::kSelf) {
    for (int k = 0; k < lane.nops; ++k) {
      const P2pOpSpan& op = a.ops[lane.first_op + k];
      if (op.send != op.recv) BlockCopy(static_cast<char*>(op.recv), static_cast<const char*>(op.send), op.bytes);
    }
    return;
  }
  const bool sending = lane.kind == P2pLaneKind::kSend;
  uint64_t step = first_step;
  uint64_t seen = 0;  // thread 0: the peer's counter last seen
  for (int k = 0; k < lane.nops; ++k) {
    const P2pOpSpan& op = a.ops[lane.first_op + k];
    const uint64_t chunk = f.slot_bytes;
    const uint64_t nchunks = op.bytes == 0 ? 1 : (op.bytes + chunk - 1) / chunk;
    for (uint64_t c = 0; c < nchunks; ++c, ++step) {
      const uint64_t offset = c * chunk;
      const uint64_t n = op.bytes - offset < chunk ? op.bytes - offset : chunk;
      char* slot = static_cast<char*>(f.slots) + (step % kFifoSlots) * f.slot_stride;
      if (threadIdx.x == 0) {
        if (sending) {
          const uint64_t target = step + 1 < kFifoSlots ? 0 : step + 1 - kFifoSlots;
          if (seen < target) {
            WaitCounter(f.head, target, f.aborted, watchdog, WaitSite{lane.peer, 0, static_cast<int64_t>(step), target},
                        &seen, f.gpu_scope);
          }
        } else if (seen < step + 1 &&
                   WaitCounter(f.tail, step + 1, f.aborted, watchdog,
                               WaitSite{lane.peer, 1, static_cast<int64_t>(step), step + 1}, &seen, f.gpu_scope) &&
                   f.meta != nullptr && SlotBytes(f, step) != n) {
          watchdog.Fail(KernelError::kSizeMismatch, WaitSite{lane.peer, 1, static_cast<int64_t>(step), n},
                        SlotBytes(f, step), 0);
        }
      }
      __syncthreads();
      if (failed) {
        if (threadIdx.x == 0) MarkLaunchEnded(f, guard.launch);
        return;
      }
      if (sending) {
        BlockCopy(slot, static_cast<const char*>(op.send) + offset, n);
      } else {
        BlockCopy(static_cast<char*>(op.recv) + offset, slot, n);
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        if (sending) {
          if (f.meta != nullptr) f.meta[step % kFifoSlots].bytes = n;
          PostCounter(f.tail, step + 1, f.gpu_scope);
        } else {
          PostCounter(f.head, step + 1, f.gpu_scope);
        }
      }
    }
  }
  if (threadIdx.x == 0) MarkLaunchEnded(f, guard.launch);  // after its last post
}

}  // namespace

int LaunchP2pTyped(const P2pKernelArgs& args, const KernelGuard& guard, void* stream) {
  void* params[] = {const_cast<P2pKernelArgs*>(&args), const_cast<KernelGuard*>(&guard)};
  return static_cast<int>(cudaLaunchKernel(P2pKernel, dim3(static_cast<unsigned>(args.nlanes)), dim3(kP2pThreads),
                                           params, 0, static_cast<cudaStream_t>(stream)));
}

int LoadP2pKernel() {
  cudaFuncAttributes attr;
  return static_cast<int>(cudaFuncGetAttributes(&attr, P2pKernel));
}

}  // namespace ringo::kernels::gpu::internal
