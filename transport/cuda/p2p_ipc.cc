#include "transport/cuda/p2p_ipc.h"

#include <signal.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "base/logging.h"
#include "transport/cuda/internal/ipc_wire.h"
#include "transport/cuda/internal/shared_connectors.h"

#if RINGO_P2P_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ringo::transport {

using base::Status;
using base::StatusOr;
using internal::IpcRecord;

uint64_t P2pIpcStride(uint64_t slot_bytes, uint64_t ll_slot_bytes) {
  constexpr uint64_t kPage = 4096;
  return (P2pFifoBytes(slot_bytes, ll_slot_bytes) + kPage - 1) / kPage * kPage;
}

namespace {

Status CheckSpec(const P2pIpcSpec& spec) {
  if (spec.nranks < 2) return base::InvalidArgument("a p2p ring needs at least 2 ranks");
  if (static_cast<int>(spec.order.size()) != spec.nranks) {
    return base::InvalidArgument("p2p IPC ring: the order needs one entry per rank");
  }
  if (spec.rank < 0 || spec.rank >= spec.nranks)
    return base::InvalidArgument("p2p IPC ring: rank out of range");
  if (spec.nchannels < 1) return base::InvalidArgument("p2p IPC ring: at least one channel");
  if (spec.slot_bytes == 0 || spec.slot_bytes % 16 != 0 || spec.ll_slot_bytes == 0 ||
      spec.ll_slot_bytes % 16 != 0) {
    return base::InvalidArgument("p2p IPC ring: slot sizes must be positive multiples of 16");
  }
  return Status();
}

int PositionOf(const std::vector<int>& order, int rank) {
  for (int p = 0; p < static_cast<int>(order.size()); ++p) {
    if (order[p] == rank) return p;
  }
  return -1;
}

// The process's SharedConnectors, freeing with cudaFree.
[[maybe_unused]] internal::SharedConnectors& Shared() {
  static internal::SharedConnectors* const shared =
      new internal::SharedConnectors([](void* ptr, int device) {
#if RINGO_P2P_CUDA
        auto scope = base::ScopedDevice::Enter(device);
        (void)cudaFree(ptr);  // waits for the device's outstanding work
        cudaGetLastError();
#else
        (void)ptr;
        (void)device;
#endif
      });
  return *shared;
}

// The connector of `channel` in an allocation at `base` (either end's view).
P2pFifo FifoAt(void* base, int channel, const P2pIpcSpec& spec, int device) {
  char* b = static_cast<char*>(base) +
            static_cast<uint64_t>(channel) * P2pIpcStride(spec.slot_bytes, spec.ll_slot_bytes);
  return P2pFifoAt(b, spec.slot_bytes, spec.ll_slot_bytes, device);
}

}  // namespace

StatusOr<std::unique_ptr<P2pIpcRing>> P2pIpcRing::Connect(Exchange& bootstrap,
                                                          const P2pIpcSpec& spec) {
  RETURN_IF_ERROR(CheckSpec(spec));
  if (bootstrap.nranks() != spec.nranks || bootstrap.rank() != spec.rank) {
    return base::InvalidArgument(
        "p2p IPC ring: the spec's rank and size differ from the bootstrap's");
  }
  const int pos = PositionOf(spec.order, spec.rank);
  if (pos < 0)
    return base::InvalidArgument("p2p IPC ring: rank " + std::to_string(spec.rank) +
                                 " is not on the ring");
#if !RINGO_P2P_CUDA
  return base::InvalidUsage("GPU p2p transport: Ringo was built without the CUDA toolkit");
#else
  std::unique_ptr<P2pIpcRing> ring(new P2pIpcRing(spec));
  // Round 1: allocate and export, then everyone's record (sent even after a
  // local failure, so the others stop at once naming this rank).
  IpcRecord mine = internal::FailedIpcRecord(spec.rank);
  Status local = ring->AllocateOwn();
  if (local.ok()) local = ring->Export(&mine);
  if (!local.ok()) {
    RINGO_LOG(WARN) << "rank " << spec.rank << ": " << local.ToString();
    mine = internal::FailedIpcRecord(spec.rank);
  }
  const int n = spec.nranks;
  const int next = spec.order[(pos + 1) % n];
  const int prev = spec.order[(pos + n - 1) % n];
  std::vector<IpcRecord> all(n);
  const Status gathered = bootstrap.AllGather(&mine, sizeof(mine), all.data());
  if (!gathered.ok()) {
    ring->pred_opened_ = local.ok() ? -1 : 0;  // the predecessor may have got the handle
    return local.ok() ? gathered : local;
  }
  Status opened = local;
  if (opened.ok()) opened = internal::CheckIpcRecord(all[next], next, mine);
  if (opened.ok()) opened = internal::CheckIpcRecord(all[prev], prev, mine);
  if (opened.ok()) {
    ring->pred_pid_ = all[prev].pid;
    ring->pred_same_process_ = internal::SameProcess(all[prev], mine);
    opened = ring->OpenSuccessor(all[next], mine);
  }
  // Round 2: who opened its successor. Each rank then knows whether its
  // predecessor maps its allocation (the release at destruction needs that).
  const char ok = opened.ok() ? 1 : 0;
  std::vector<char> oks(n, 0);
  const Status agreed = bootstrap.AllGather(&ok, 1, oks.data());
  ring->pred_opened_ = !local.ok() ? 0 : agreed.ok() ? (oks[prev] != 0 ? 1 : 0) : -1;
  RETURN_IF_ERROR(opened);
  RETURN_IF_ERROR(agreed);
  for (int r = 0; r < n; ++r) {
    if (oks[r] == 0) {
      return base::RemoteError("rank " + std::to_string(r) +
                               " could not open its ring successor's GPU connectors (CUDA IPC)");
    }
  }
  return ring;
#endif
}

#if RINGO_P2P_CUDA

Status P2pIpcRing::AllocateOwn() {
  ASSIGN_OR_RETURN(base::ScopedDevice scope, base::ScopedDevice::Enter(spec_.device));
  ASSIGN_OR_RETURN(words_, base::MappedHostMemory::Allocate(2 * sizeof(uint32_t)));
  static_cast<volatile uint32_t*>(words_.host())[0] = 1;
  cudaStream_t stream = nullptr;
  RINGO_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  stream_ = stream;
  const uint64_t stride = P2pIpcStride(spec_.slot_bytes, spec_.ll_slot_bytes);
  RINGO_CUDA_RETURN_IF_ERROR(cudaMalloc(&own_, stride * spec_.nchannels));
  Shared().Register(own_, spec_.device);
  // Formatted and visible before any peer can open it (the exchange follows).
  for (int c = 0; c < spec_.nchannels; ++c) {
    RETURN_IF_ERROR(FormatP2pFifo(static_cast<char*>(own_) + c * stride, spec_.slot_bytes, spec_.ll_slot_bytes,
                                  stream));
    recv_.push_back(FifoAt(own_, c, spec_, spec_.device));
  }
  return Status();
}

Status P2pIpcRing::Export(IpcRecord* mine) {
  static_assert(sizeof(cudaIpcMemHandle_t) == internal::kIpcHandleBytes, "IPC handle size");
  cudaIpcMemHandle_t handle;
  RINGO_CUDA_RETURN_IF_ERROR(cudaIpcGetMemHandle(&handle, own_));
  RINGO_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetPCIBusId(mine->bus_id, sizeof(mine->bus_id), spec_.device));
  std::memcpy(mine->handle, &handle, sizeof(handle));
  mine->ok = 1;
  mine->nchannels = spec_.nchannels;
  mine->slot_bytes = spec_.slot_bytes;
  mine->ll_slot_bytes = spec_.ll_slot_bytes;
  mine->stride = P2pIpcStride(spec_.slot_bytes, spec_.ll_slot_bytes);
  mine->device_pointer = reinterpret_cast<uint64_t>(own_);
  return Status();
}

Status P2pIpcRing::OpenSuccessor(const IpcRecord& next, const IpcRecord& mine) {
  ASSIGN_OR_RETURN(base::ScopedDevice scope, base::ScopedDevice::Enter(spec_.device));
  const std::string bus = internal::BusId(next);
  int their_device = -1;  // the successor's GPU as this process numbers it; -1: not visible here
  if (cudaDeviceGetByPCIBusId(&their_device, bus.c_str()) != cudaSuccess) {
    cudaGetLastError();
    their_device = -1;
  }
  if (internal::SameProcess(next, mine)) {
    // Ranks that are threads of this process: CUDA refuses to open a handle
    // where it was exported, and needs none.
    if (their_device < 0)
      return base::Internal("rank " + std::to_string(next.rank) + "'s GPU " + bus +
                            " is not visible in its own process");
    RETURN_IF_ERROR(EnablePeerAccess(spec_.device, their_device));
    void* theirs = reinterpret_cast<void*>(next.device_pointer);
    if (!Shared().Retain(theirs)) {
      return base::Internal("rank " + std::to_string(next.rank) +
                            "'s GPU connectors are not known in this process");
    }
    peer_ = theirs;
    peer_retained_ = true;
  } else {
    if (their_device >= 0 && their_device != spec_.device) {
      int can = 0;
      RINGO_CUDA_RETURN_IF_ERROR(cudaDeviceCanAccessPeer(&can, spec_.device, their_device));
      if (can == 0) {
        return base::InvalidUsage(
            "GPU " + std::to_string(spec_.device) + " cannot access GPU " + bus + " (rank " +
            std::to_string(next.rank) +
            "'s) : no peer-to-peer path; the shared-memory GPU transport is not implemented "
            "yet (RINGO_DEVICE=host uses host memory)");
      }
    }
    cudaIpcMemHandle_t handle;
    std::memcpy(&handle, next.handle, sizeof(handle));
    void* mapped = nullptr;
    const cudaError_t err = cudaIpcOpenMemHandle(&mapped, handle, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
      return base::CudaCallStatus(err, "cudaIpcOpenMemHandle", __FILE__, __LINE__)
          .WithContext("opening rank " + std::to_string(next.rank) + "'s GPU connectors (GPU " +
                       bus + ")");
    }
    peer_ = mapped;
    peer_opened_ = true;
  }
  for (int c = 0; c < spec_.nchannels; ++c) send_.push_back(FifoAt(peer_, c, spec_, their_device));
  return Status();
}

void P2pIpcRing::RaiseAbort() {
  if (stream_ == nullptr) return;
  auto scope = base::ScopedDevice::Enter(spec_.device);
  auto stream = static_cast<cudaStream_t>(stream_);
  const void* one = words_.host();
  // Errors have nowhere to go here; the deadline still stops the peers. This
  // rank is the receiver of recv_ and the sender of send_.
  for (const P2pFifo& f : recv_) {
    (void)cudaMemcpyAsync(&f.header->receiver_aborted, one, sizeof(uint32_t), cudaMemcpyDefault, stream);
  }
  for (const P2pFifo& f : send_) {
    (void)cudaMemcpyAsync(&f.header->sender_aborted, one, sizeof(uint32_t), cudaMemcpyDefault, stream);
  }
  cudaGetLastError();
}

void P2pIpcRing::ReleaseAndFree() {
  auto scope = base::ScopedDevice::Enter(spec_.device);
  auto stream = static_cast<cudaStream_t>(stream_);
  // 1. Tell the successor this rank is done with its memory (after any abort
  // write: same stream), then unmap it.
  if (peer_ != nullptr) {
    (void)cudaMemcpyAsync(&static_cast<FifoHeader*>(peer_)->sender_released, words_.host(), sizeof(uint32_t),
                          cudaMemcpyDefault, stream);
    (void)cudaStreamSynchronize(stream);
    if (peer_opened_) (void)cudaIpcCloseMemHandle(peer_);
    if (peer_retained_) Shared().Release(peer_);
    peer_ = nullptr;
  }
  // 2. Free this rank's memory once the predecessor no longer maps it. A
  // predecessor in this process shares it through SharedConnectors: no wait,
  // whichever of the two lets go last frees it.
  if (own_ != nullptr && pred_same_process_ && pred_opened_ >= 0) {
    Shared().Release(own_);
    own_ = nullptr;
  }
  if (own_ != nullptr) {
    bool released = pred_opened_ == 0;
    if (pred_opened_ < 0) {
      // Init broke during the exchange: whether the predecessor maps this
      // memory is unknown, and it may never say. Leak it rather than wait.
      RINGO_LOG(WARN) << "rank " << spec_.rank
                      << ": leaving this rank's GPU connectors allocated (the exchange "
                      << "broke; the ring predecessor may map them)";
      own_ = nullptr;
    }
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(spec_.timeout_ms);
    auto* seen = static_cast<volatile uint32_t*>(words_.host()) + 1;
    while (own_ != nullptr && !released) {
      *seen = 0;
      if (cudaMemcpyAsync(const_cast<uint32_t*>(seen), &static_cast<FifoHeader*>(own_)->sender_released,
                          sizeof(uint32_t), cudaMemcpyDefault, stream) != cudaSuccess ||
          cudaStreamSynchronize(stream) != cudaSuccess) {
        break;  // the device is unusable: nothing more to learn
      }
      released = *seen != 0;
      // A predecessor process that is gone has lost its mappings with its context.
      if (!released && !pred_same_process_ && pred_pid_ > 0 && ::kill(pred_pid_, 0) != 0 &&
          errno == ESRCH) {
        released = true;
      }
      if (released || std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (released) {
      Shared().Release(own_);
    } else if (own_ != nullptr) {
      RINGO_LOG(WARN)
          << "rank " << spec_.rank << ": the ring predecessor did not release this rank's GPU "
          << "connectors within " << spec_.timeout_ms
          << " ms; leaving them allocated (freeing memory another process maps is undefined)";
    }
    own_ = nullptr;
  }
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream);
  stream_ = nullptr;
  cudaGetLastError();
}

P2pIpcRing::~P2pIpcRing() { ReleaseAndFree(); }

#else

Status P2pIpcRing::AllocateOwn() { return base::InvalidUsage("built without the CUDA toolkit"); }
Status P2pIpcRing::Export(IpcRecord*) {
  return base::InvalidUsage("built without the CUDA toolkit");
}
Status P2pIpcRing::OpenSuccessor(const IpcRecord&, const IpcRecord&) {
  return base::InvalidUsage("built without the CUDA toolkit");
}
void P2pIpcRing::RaiseAbort() {}
void P2pIpcRing::ReleaseAndFree() {}
P2pIpcRing::~P2pIpcRing() = default;

#endif  // RINGO_P2P_CUDA

}  // namespace ringo::transport
