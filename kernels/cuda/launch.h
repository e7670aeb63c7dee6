// The host-side launch API of the CUDA ring kernels. Includable without CUDA
// headers: streams travel as `void*` (a cudaStream_t), memory as device
// pointers. Everything here enqueues work on the given stream and returns at
// once: completion, and any error a kernel records, are the stream's.
//
// Thread safety: the functions keep no state; a stream, its FIFOs and its
// error record must be used by one thread at a time (as a communicator is).
// Without a CUDA toolkit at build time every function returns an error saying
// so (RINGO_CUDA_KERNELS is 0).
#ifndef RINGO_KERNELS_CUDA_LAUNCH_H_
#define RINGO_KERNELS_CUDA_LAUNCH_H_

#include <cstdint>

#include "base/device/dtype.h"
#include "base/status.h"
#include "kernels/cuda/device_types.h"
#include "kernels/cuda/p2p_types.h"
#include "kernels/cuda/residency.h"
#include "kernels/wire.h"

namespace ringo::kernels::gpu {

// Whether this build holds the CUDA kernels at all.
bool KernelsBuilt();

// Enqueues this rank's part of the ring collective `args` on `cuda_stream`:
// one block of kRingThreads threads per channel, channel c over channel c of
// the table. `host_channels` is the table as the host reads it (checked
// during the call); `device_channels` the same nchannels entries in device
// memory, which the kernel reads and which must outlive it (a communicator
// uploads its table once). Every rank of the ring must launch the same
// collective (coll, count, dtype, op, root, slice_bytes, proto, nchannels);
// the kernels of all ranks must be able to run at the same time (they wait
// on each other: separate non-blocking streams, every block resident, see
// residency.h and LoadRingKernels).
//
// One rank (args.ring.nranks == 1) is a device-to-device copy of the input into
// the output (nothing when they are the same buffer); no channel is used and
// the channel arguments may be null.
//
// Waits give up after guard.timeout_ns without progress (0: never) or when
// *guard.abort becomes non-zero (null: not checked); the kernel then records
// the peer and step in *guard.error (null: not recorded) and returns, so
// the stream completes. Both live in host memory mapped for the device and
// must outlive the kernel. Read the record after the stream completes (or
// poll `code` while it runs): ErrorRecordStatus turns it into a Status.
//
// Returns an error for invalid arguments (sizes, counts, a slice that does not
// fit a slot, too many channels, unaligned buffers) or a failed launch; the
// launch error is the launch call's own result.
base::Status LaunchRingKernel(const DeviceCollArgs& args, const DeviceChannel* host_channels,
                              const DeviceChannel* device_channels, int nchannels,
                              void* cuda_stream, const KernelGuard& guard);

// Loads every ring, reduction and copy kernel on `device` now (CUDA loads
// modules lazily by default, and loading a kernel at its first launch may
// synchronise the context, which would wait for ring kernels that wait for
// the one being launched) and reports what the device holds of the ring
// kernel at once. The first call per device does the work; later calls
// return the same answer. Blocking; changes no current device.
base::StatusOr<RingResidency> LoadRingKernels(int device);

// OK when the record holds no error; otherwise Timeout (timeout), RemoteError
// (an abort) or InvalidUsage (mismatched collectives), naming rank, peer,
// channel and step.
base::Status ErrorRecordStatus(const ErrorRecord& record);

// dst[i] = a[i] (+) b[i] for `count` elements of `dtype` (the ring's
// recvReduceSend arithmetic, with premul 1 for avg): the reduction-bandwidth
// kernel. Buffers may alias exactly (dst == a or dst == b) but not partially.
base::Status LaunchReduceKernel(base::DataType dtype, base::RedOp op, const void* a, const void* b, void* dst,
                                int64_t count, void* cuda_stream);

// The compressed wire's kernels (collectives/engines/gpu_wire.h; formats
// and layout: kernels/wire.h). `dtype` is fp32, bf16 or fp16; a piece's
// buffers in the wire are those of a span of `n` values.
//
// Loads the three kernels on `device` now (as LoadRingKernels does the
// others', so that no first launch loads them while ring kernels wait).
// Blocking; changes no current device.
base::Status LoadWireKernels(int device);
// out = the `n` values at `src`, times `scale` (1: as they are), in `wire`
// (kNone: fp32).
base::Status LaunchWireEncode(Wire wire, base::DataType dtype, const void* src, int64_t n, float scale, void* out,
                              void* cuda_stream);
// acc[i] = the sum, in fp32 and in order, of value i of every source
// (`device_sources`: `nsources` entries in device memory, each in `wire`
// where it is wired, fp32 otherwise).
base::Status LaunchWireSum(const kernels::WireSource* device_sources, int nsources, Wire wire, int64_t n, float* acc,
                           void* cuda_stream);
// dst = the `n` values at `in` (in `wire`) as `dtype`, rounded to nearest even.
base::Status LaunchWireDecode(Wire wire, const void* in, int64_t n, base::DataType dtype, void* dst,
                              void* cuda_stream);

// dst = src for `bytes` bytes through the kernels' 16-byte copy loop (any
// alignment); buffers must not overlap.
base::Status LaunchCopyKernel(const void* src, void* dst, int64_t bytes, void* cuda_stream);

// Enqueues a batch of sends and receives (p2p_types.h) on `cuda_stream`:
// one block per lane. Every peer must enqueue the matching operations (a
// send waits for its receiver's slots); the guard is LaunchRingKernel's. Checks the lanes (counters and slots
// where a lane needs them, operations in range) before launching.
base::Status LaunchP2pKernel(const P2pKernelArgs& args, void* cuda_stream, const KernelGuard& guard);

// The largest slice a channel can carry with `proto`: the slot size less
// kSlotShiftPad for Simple, half the LL slot (rounded down to whole lines)
// for LL.
int64_t MaxSliceBytes(const DeviceFifo& fifo, Proto proto);

// Bytes of LL buffer per slot needed for slices of `slice_bytes`.
inline int64_t LLSlotBytesFor(int64_t slice_bytes) {
  return (slice_bytes + kLLDataBytesPerLine - 1) / kLLDataBytesPerLine * kLLLineBytes;
}

}  // namespace ringo::kernels::gpu

#endif  // RINGO_KERNELS_CUDA_LAUNCH_H_
