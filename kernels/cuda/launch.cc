// launch.h: argument checks, the kernel parameters, and the one place where a
// runtime (datatype, op) becomes a kernel instantiation (Dispatch below).
// Compiled by the host compiler; the kernels live in the ring_*.cu objects.
#include "kernels/cuda/launch.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "base/cuda.h"
#include "base/cuda_calls.h"
#include "kernels/cuda/internal/kernel_params.h"
#include "kernels/cuda/internal/ring_params.h"
#include "kernels/internal/dispatch.h"

#if RINGO_CUDA_KERNELS
#include <cuda_runtime_api.h>
#endif

namespace ringo::kernels::gpu {
namespace {

using base::DataType;
using base::RedOp;
using base::Status;
using base::StatusOr;
using internal::RingKernelParams;

// Fn<T, kOp>::Run(args...) returns a cudaError_t value or kNotBuilt; the
// (datatype, op) dispatch is kernels/internal/dispatch.h's, shared with the
// host executors.
template <template <typename, RedOp> class Fn, typename... Args>
int Dispatch(DataType dtype, RedOp op, Args&&... args) {
  return kernels::internal::DispatchTypeOpOr<Fn>([] { return internal::kNotBuilt; }, dtype, op,
                                                 std::forward<Args>(args)...);
}

template <typename T, RedOp kOp>
struct RingFn {
  static int Run(const RingKernelParams& p, Proto proto, void* stream) {
#if RINGO_CUDA_KERNELS
    return internal::LaunchRingTyped<T, kOp>(p, proto, stream);
#else
    return internal::kNotBuilt;
#endif
  }
};

template <typename T, RedOp kOp>
struct LoadFn {
  static int Run(int* blocks_per_sm) {
#if RINGO_CUDA_KERNELS
    return internal::LoadRingTyped<T, kOp>(blocks_per_sm);
#else
    return internal::kNotBuilt;
#endif
  }
};

template <typename T, RedOp kOp>
struct PreFn {
  static int Run(const void* src, void* dst, int64_t count, uint64_t scalar, const void* scalar_ptr, void* stream) {
#if RINGO_CUDA_KERNELS
    return internal::LaunchPreTyped<T, kOp>(src, dst, count, scalar, scalar_ptr, stream);
#else
    return internal::kNotBuilt;
#endif
  }
};

template <typename T, RedOp kOp>
struct ReduceFn {
  static int Run(const void* a, const void* b, void* dst, int64_t count, void* stream) {
#if RINGO_CUDA_KERNELS
    return internal::LaunchReduceTyped<T, kOp>(a, b, dst, count, stream);
#else
    return internal::kNotBuilt;
#endif
  }
};

std::string Where(DataType dtype, RedOp op) {
  return std::string(base::DataTypeName(dtype)) + "/" + base::RedOpName(op);
}

Status LaunchResult(int result, const std::string& what) {
  if (result == 0) return base::OkStatus();
  if (result == internal::kNotBuilt) {
    return base::InvalidUsage(what + ": this build has no GPU kernel for it (built with "
                              "--define=ringo_cuda_kernels=dev, which keeps float, bfloat16 and bytes with sum)");
  }
#if RINGO_CUDA_KERNELS
  const auto err = static_cast<cudaError_t>(result);
  return Status(base::Code::kCudaError,
                what + ": kernel launch failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
#else
  return Status(base::Code::kCudaError, what + ": CUDA error " + std::to_string(result));
#endif
}

Status NotBuilt() {
  return base::InvalidUsage("Ringo was built without the CUDA toolkit: no GPU kernels");
}

bool Aligned(const void* p, size_t to) { return reinterpret_cast<uintptr_t>(p) % to == 0; }

Status CheckFifo(const DeviceFifo& f, const char* which, int c, int64_t slice_bytes, Proto proto) {
  const std::string where = std::string("channel ") + std::to_string(c) + " " + which + " FIFO";
  if (f.head == nullptr || f.tail == nullptr || !Aligned(f.head, 8) || !Aligned(f.tail, 8)) {
    return base::InvalidArgument(where + ": head and tail must be 8-byte aligned device-visible counters");
  }
  if (proto == Proto::kSimple && (f.slots == nullptr || !Aligned(f.slots, 16) || f.slot_bytes % 16 != 0)) {
    return base::InvalidArgument(where + ": Simple slots must be 16-byte aligned, slot_bytes a multiple of 16");
  }
  if (proto == Proto::kLL && (f.ll_slots == nullptr || !Aligned(f.ll_slots, 16) || f.ll_slot_bytes % 16 != 0)) {
    return base::InvalidArgument(where + ": LL slots must be 16-byte aligned, ll_slot_bytes a multiple of 16");
  }
  if (slice_bytes > MaxSliceBytes(f, proto)) {
    return base::InvalidArgument(where + ": slice of " + std::to_string(slice_bytes) + " bytes exceeds the " +
                                 std::to_string(MaxSliceBytes(f, proto)) + " a slot carries");
  }
  return base::OkStatus();
}

Status CheckArgs(const DeviceCollArgs& d, const DeviceChannel* channels,
                 const DeviceChannel* device_channels, int nchannels) {
  const RingArgs& r = d.ring;
  const CollArgs& a = r.call;
  if (!base::IsValidDataType(static_cast<int>(a.dtype))) return base::InvalidArgument("unknown datatype");
  if (static_cast<int>(a.op) < 0 || static_cast<int>(a.op) >= base::kNumReduceOps) {
    return base::InvalidArgument("unknown reduction op");
  }
  if (static_cast<int>(a.coll) < 0 || static_cast<int>(a.coll) > static_cast<int>(Coll::kReduce)) {
    return base::InvalidArgument("unknown collective");
  }
  if (r.nranks < 1 || r.pos < 0 || r.pos >= r.nranks || r.rank < 0 || r.rank >= r.nranks) {
    return base::InvalidArgument("rank, position or rank count out of range");
  }
  if (a.root < 0 || a.root >= r.nranks) return base::InvalidArgument("root out of range");
  if (r.nranks > kMaxInlineRanks) {
    return base::InvalidArgument("a GPU ring takes at most " + std::to_string(kMaxInlineRanks) + " ranks");
  }
  if (r.root_pos < 0 || r.root_pos >= r.nranks || r.order[r.root_pos] != a.root) {
    return base::InvalidArgument("root_pos is not the root's ring position");
  }
  if (a.count < 0) return base::InvalidArgument("negative count");
  const size_t esize = base::DataTypeSize(a.dtype);
  if (a.count > 0 && (a.send == nullptr || a.recv == nullptr)) return base::InvalidArgument("null buffer");
  if (!Aligned(a.send, esize) || !Aligned(a.recv, esize)) {
    return base::InvalidArgument("buffers must be aligned to the datatype's size");
  }
  if (d.proto != Proto::kSimple && d.proto != Proto::kLL) return base::InvalidArgument("unknown protocol");
  if (r.nranks == 1) return base::OkStatus();  // a device copy: no channel
  if (nchannels < 1 || nchannels > kMaxChannels || channels == nullptr ||
      device_channels == nullptr || r.nchannels != nchannels) {
    return base::InvalidArgument("between 1 and " + std::to_string(kMaxChannels) +
                                 " channels, in host and in device memory");
  }
  // Every chunk must hold at least one element of the kernel's type.
  if (r.slice_bytes < static_cast<int64_t>(esize)) {
    return base::InvalidArgument("slice_bytes " + std::to_string(r.slice_bytes) + " below one element");
  }
  for (int c = 0; c < nchannels; ++c) {
    RETURN_IF_ERROR(CheckFifo(channels[c].recv, "recv", c, r.slice_bytes, d.proto));
    RETURN_IF_ERROR(CheckFifo(channels[c].send, "send", c, r.slice_bytes, d.proto));
  }
  return base::OkStatus();
}

// A collective of one rank: its output is its input (every op of one
// operand is the identity, float avg included: x * 1), so a device copy.
Status CopyOneRank(const CollArgs& a, void* stream) {
  const int64_t bytes = a.count * static_cast<int64_t>(base::DataTypeSize(a.dtype));
  if (Reduces(a.coll) && a.op == RedOp::kPreMulSum) {
    // The one operand still meets its scalar.
    if (a.count == 0) return base::OkStatus();
    base::CountCudaCall(base::CudaCall::kLaunchKernel);
    return LaunchResult(Dispatch<PreFn>(a.dtype, a.op, a.send, a.recv, a.count, a.scalar, a.scalar_ptr, stream),
                        "one-rank premul-sum");
  }
  if (bytes == 0 || a.send == a.recv) return base::OkStatus();
#if RINGO_CUDA_KERNELS
  base::CountCudaCall(base::CudaCall::kMemcpyAsync);
  return LaunchResult(static_cast<int>(cudaMemcpyAsync(a.recv, a.send, static_cast<size_t>(bytes),
                                                       cudaMemcpyDeviceToDevice,
                                                       static_cast<cudaStream_t>(stream))),
                      "one-rank collective (device copy)");
#else
  (void)stream;
  return NotBuilt();
#endif
}

#if RINGO_CUDA_KERNELS
StatusOr<RingResidency> LoadOnDevice(int device) {
  ASSIGN_OR_RETURN(base::ScopedDevice scope, base::ScopedDevice::Enter(device));
  RingResidency r;
  RINGO_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&r.sms, cudaDevAttrMultiProcessorCount, device));
  int blocks = 1 << 30;
  for (int d = 0; d < base::kNumDataTypes; ++d) {
    for (int o = 0; o < base::kNumReduceOps; ++o) {
      const auto dtype = static_cast<DataType>(d);
      const auto op = static_cast<RedOp>(o);
      const int err = Dispatch<LoadFn>(dtype, op, &blocks);
      if (err == internal::kNotBuilt) continue;  // the development build leaves it out
      RETURN_IF_ERROR(LaunchResult(err, "loading the ring kernel " + Where(dtype, op) +
                                            " on CUDA device " + std::to_string(device)));
    }
  }
  RETURN_IF_ERROR(LaunchResult(internal::LoadCopyKernel(), "loading the copy kernel"));
  RETURN_IF_ERROR(LaunchResult(internal::LoadP2pKernel(), "loading the point-to-point kernel"));
  if (blocks == (1 << 30)) return base::Internal("no ring kernel was loaded");
  r.blocks_per_sm = blocks;
  return r;
}
#endif

}  // namespace

bool KernelsBuilt() { return RINGO_CUDA_KERNELS != 0; }

StatusOr<RingResidency> LoadRingKernels(int device) {
  if (!KernelsBuilt()) return NotBuilt();
#if RINGO_CUDA_KERNELS
  static std::mutex* const mu = new std::mutex();
  static auto* const loaded = new std::map<int, StatusOr<RingResidency>>();
  std::lock_guard<std::mutex> lock(*mu);
  auto it = loaded->find(device);
  if (it == loaded->end()) it = loaded->emplace(device, LoadOnDevice(device)).first;
  return it->second;
#else
  (void)device;
  return NotBuilt();
#endif
}

int64_t MaxSliceBytes(const DeviceFifo& fifo, Proto proto) {
  if (proto == Proto::kLL) {
    return static_cast<int64_t>(fifo.ll_slot_bytes / kLLLineBytes * kLLDataBytesPerLine);
  }
  return fifo.slot_bytes > static_cast<uint64_t>(kSlotShiftPad)
             ? static_cast<int64_t>(fifo.slot_bytes) - kSlotShiftPad
             : 0;
}

DeviceFifo DeviceFifoAt(void* header, const transport::FifoGeometry& geometry, bool receiving, int peer_rank,
                        const uint32_t* abort_word, void* slots_apart) {
  using transport::FifoHeader;
  char* base = static_cast<char*>(header);
  DeviceFifo f;
  f.slots = slots_apart != nullptr ? static_cast<char*>(slots_apart) + geometry.slot_prefix
                                   : base + geometry.SlotOffset(0);
  f.slot_bytes = geometry.slot_bytes;
  f.slot_stride = geometry.stride();
  f.tail = reinterpret_cast<uint64_t*>(base + offsetof(FifoHeader, tail));
  f.head = reinterpret_cast<uint64_t*>(base + offsetof(FifoHeader, head));
  f.meta = reinterpret_cast<transport::SlotMeta*>(base + offsetof(FifoHeader, meta));
  f.aborted = abort_word != nullptr
                  ? abort_word
                  : reinterpret_cast<const uint32_t*>(base + (receiving ? offsetof(FifoHeader, sender_aborted)
                                                                        : offsetof(FifoHeader, receiver_aborted)));
  f.ll_slots = geometry.ll_slot_bytes > 0 ? base + geometry.LLOffset() : nullptr;
  f.ll_slot_bytes = geometry.ll_slot_bytes;
  f.peer_rank = peer_rank;
  return f;
}

namespace internal {

RingKernelParams BuildRingParams(const DeviceCollArgs& args, const DeviceChannel* channels,
                                 const KernelGuard& guard) {
  RingKernelParams p{};
  p.ring = LoopArgs(args.ring);
  p.channels = channels;
  p.guard = guard;
  return p;
}

}  // namespace internal

Status LaunchRingKernel(const DeviceCollArgs& args, const DeviceChannel* host_channels,
                        const DeviceChannel* device_channels, int nchannels, void* cuda_stream,
                        const KernelGuard& guard) {
  if (!KernelsBuilt()) return NotBuilt();
  RETURN_IF_ERROR(CheckArgs(args, host_channels, device_channels, nchannels));
  if (args.ring.nranks == 1) return CopyOneRank(args.ring.call, cuda_stream);
  const RingKernelParams p = internal::BuildRingParams(args, device_channels, guard);
  base::CountCudaCall(base::CudaCall::kLaunchKernel);
  return LaunchResult(Dispatch<RingFn>(p.ring.call.dtype, p.ring.call.op, p, args.proto, cuda_stream),
                      std::string("ring kernel ") + Where(args.ring.call.dtype, args.ring.call.op));
}

Status LaunchP2pKernel(const P2pKernelArgs& args, void* cuda_stream, const KernelGuard& guard) {
  if (!KernelsBuilt()) return NotBuilt();
  if (args.nlanes < 1 || args.nlanes > kMaxP2pLanes) {
    return base::InvalidArgument("between 1 and " + std::to_string(kMaxP2pLanes) + " lanes");
  }
  for (int l = 0; l < args.nlanes; ++l) {
    const P2pLane& lane = args.lanes[l];
    if (lane.nops < 0 || lane.first_op < 0 || lane.first_op + lane.nops > kMaxP2pOps) {
      return base::InvalidArgument("lane " + std::to_string(l) + "'s operations are out of range");
    }
    if (lane.kind == P2pLaneKind::kSelf) continue;
    const DeviceFifo& f = lane.fifo;
    if (f.head == nullptr || f.tail == nullptr || f.slots == nullptr || f.slot_bytes == 0 || !Aligned(f.head, 8) ||
        !Aligned(f.tail, 8)) {
      return base::InvalidArgument("lane " + std::to_string(l) + " has no connector");
    }
  }
#if RINGO_CUDA_KERNELS
  base::CountCudaCall(base::CudaCall::kLaunchKernel);
  return LaunchResult(internal::LaunchP2pTyped(args, guard, cuda_stream), "point-to-point kernel");
#else
  (void)cuda_stream;
  (void)guard;
  return NotBuilt();
#endif
}

Status LaunchReduceKernel(DataType dtype, RedOp op, const void* a, const void* b, void* dst, int64_t count,
                          void* cuda_stream) {
  if (!KernelsBuilt()) return NotBuilt();
  if (!base::IsValidDataType(static_cast<int>(dtype))) return base::InvalidArgument("unknown datatype");
  if (static_cast<int>(op) < 0 || static_cast<int>(op) >= base::kNumReduceOps) {
    return base::InvalidArgument("unknown reduction op");
  }
  if (count < 0) return base::InvalidArgument("negative count");
  if (count > 0 && (a == nullptr || b == nullptr || dst == nullptr)) return base::InvalidArgument("null buffer");
  base::CountCudaCall(base::CudaCall::kLaunchKernel);
  return LaunchResult(Dispatch<ReduceFn>(dtype, op, a, b, dst, count, cuda_stream),
                      "reduce kernel " + Where(dtype, op));
}

Status LaunchCopyKernel(const void* src, void* dst, int64_t bytes, void* cuda_stream) {
  if (!KernelsBuilt()) return NotBuilt();
  if (bytes < 0) return base::InvalidArgument("negative size");
  if (bytes > 0 && (src == nullptr || dst == nullptr)) return base::InvalidArgument("null buffer");
#if RINGO_CUDA_KERNELS
  base::CountCudaCall(base::CudaCall::kLaunchKernel);
  return LaunchResult(internal::LaunchCopyBytes(src, dst, bytes, cuda_stream), "copy kernel");
#else
  return NotBuilt();
#endif
}

namespace {

bool WireDataType(DataType dtype) {
  return dtype == DataType::kFloat32 || dtype == DataType::kBFloat16 || dtype == DataType::kFloat16;
}

}  // namespace

Status LaunchWireEncode(Wire wire, DataType dtype, const void* src, int64_t n, float scale, void* out,
                        void* cuda_stream) {
  if (!KernelsBuilt()) return NotBuilt();
  if (!ValidWire(static_cast<int>(wire)) || !WireDataType(dtype)) return base::InvalidArgument("wire encode: bad format or datatype");
  if (n < 0) return base::InvalidArgument("negative count");
  if (n > 0 && (src == nullptr || out == nullptr)) return base::InvalidArgument("null buffer");
#if RINGO_CUDA_KERNELS
  base::CountCudaCall(base::CudaCall::kLaunchKernel);
  return LaunchResult(internal::LaunchWireEncodeKernel(static_cast<int>(wire), static_cast<int>(dtype), src, n, scale,
                                                       out, cuda_stream),
                      std::string("wire encode kernel (") + WireName(wire) + ")");
#else
  return NotBuilt();
#endif
}

Status LaunchWireSum(const kernels::WireSource* device_sources, int nsources, Wire wire, int64_t n, float* acc,
                     void* cuda_stream) {
  if (!KernelsBuilt()) return NotBuilt();
  if (!ValidWire(static_cast<int>(wire))) return base::InvalidArgument("wire sum: bad format");
  if (n < 0 || nsources < 1) return base::InvalidArgument("wire sum: negative count or no source");
  if (n > 0 && (device_sources == nullptr || acc == nullptr)) return base::InvalidArgument("null buffer");
#if RINGO_CUDA_KERNELS
  base::CountCudaCall(base::CudaCall::kLaunchKernel);
  return LaunchResult(
      internal::LaunchWireSumKernel(device_sources, nsources, static_cast<int>(wire), n, acc, cuda_stream),
      std::string("wire sum kernel (") + WireName(wire) + ")");
#else
  return NotBuilt();
#endif
}

Status LoadWireKernels(int device) {
  if (!KernelsBuilt()) return NotBuilt();
#if RINGO_CUDA_KERNELS
  ASSIGN_OR_RETURN(base::ScopedDevice scope, base::ScopedDevice::Enter(device));
  return LaunchResult(internal::LoadWireKernels(), "loading the wire kernels on CUDA device " + std::to_string(device));
#else
  return NotBuilt();
#endif
}

Status LaunchWireDecode(Wire wire, const void* in, int64_t n, DataType dtype, void* dst, void* cuda_stream) {
  if (!KernelsBuilt()) return NotBuilt();
  if (!ValidWire(static_cast<int>(wire)) || !WireDataType(dtype)) return base::InvalidArgument("wire decode: bad format or datatype");
  if (n < 0) return base::InvalidArgument("negative count");
  if (n > 0 && (in == nullptr || dst == nullptr)) return base::InvalidArgument("null buffer");
#if RINGO_CUDA_KERNELS
  base::CountCudaCall(base::CudaCall::kLaunchKernel);
  return LaunchResult(
      internal::LaunchWireDecodeKernel(static_cast<int>(wire), in, n, static_cast<int>(dtype), dst, cuda_stream),
      std::string("wire decode kernel (") + WireName(wire) + ")");
#else
  return NotBuilt();
#endif
}

Status ErrorRecordStatus(const ErrorRecord& r) {
  const auto code = static_cast<KernelError>(r.code);
  if (code == KernelError::kNone) return base::OkStatus();
  const std::string where = "rank " + std::to_string(r.rank) + (r.receiving ? " receiving from" : " sending to") +
                            " rank " + std::to_string(r.peer) + " (GPU, channel " + std::to_string(r.channel) +
                            ", step " + std::to_string(r.step) + ")";
  switch (code) {
    case KernelError::kTimeout:
      return base::Timeout(where + ": no progress for " + std::to_string(r.waited_ns / 1000000) + " ms (waiting for " +
                           (r.receiving ? "its data" : "a free slot") + ", counter/flag " +
                           std::to_string(r.observed) + " of " + std::to_string(r.expected) + ")");
    case KernelError::kAborted: return base::RemoteError(where + ": the communicator was aborted");
    case KernelError::kPeerAborted: return base::RemoteError(where + ": the peer aborted the connection");
    case KernelError::kSizeMismatch:
      return base::InvalidUsage(where + ": expected a chunk of " + std::to_string(r.expected) +
                                " bytes and its ring predecessor sent " + std::to_string(r.observed) +
                                ": the ranks did not issue the same collective with the same count");
    case KernelError::kNone: break;
  }
  return base::Internal(where + ": unknown kernel error code " + std::to_string(r.code));
}

}  // namespace ringo::kernels::gpu
