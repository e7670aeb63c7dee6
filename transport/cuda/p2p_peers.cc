#include "transport/cuda/p2p_peers.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "base/cuda.h"
#include "base/logging.h"
#include "transport/cuda/internal/ipc_wire.h"

#if RINGO_P2P_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ringo::transport {

using base::Status;
using internal::IpcRecord;

namespace {

constexpr uint64_t kGpuTag = uint64_t{1} << 50;
constexpr uint64_t kLLSlotBytes = 16;  // point-to-point uses Simple slots only

uint64_t PairTag(uint64_t kind, int src, int dst) {
  return kind | kGpuTag | (static_cast<uint64_t>(src) << 24) | static_cast<uint64_t>(dst);
}

std::vector<int> Missing(const std::vector<int>& peers, int self, int nranks,
                         const std::vector<std::unique_ptr<P2pFifo>>& have) {
  std::vector<int> out;
  for (int p : peers) {
    if (p == self || p < 0 || p >= nranks || have[p] != nullptr) continue;
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  return out;
}

P2pFifo FifoIn(void* base, uint64_t slot_bytes, int device) { return P2pFifoAt(base, slot_bytes, kLLSlotBytes, device); }

}  // namespace

struct GpuPeerLinks::Own {
  void* memory = nullptr;
  IpcRecord record{};
  Status status;
};

GpuPeerLinks::GpuPeerLinks(Exchange* exchange, const GpuPeerSpec& spec) : exchange_(exchange), spec_(spec) {
  send_.resize(spec_.nranks);
  recv_.resize(spec_.nranks);
}

#if RINGO_P2P_CUDA

GpuPeerLinks::~GpuPeerLinks() {
  auto scope = base::ScopedDevice::Enter(spec_.device);
  for (void* p : opened_) (void)cudaIpcCloseMemHandle(p);
  for (void* p : owned_) (void)cudaFree(p);  // waits for the device's outstanding work
  cudaGetLastError();
}

Status GpuPeerLinks::Offer(int peer, Own* own) {
  own->record = internal::FailedIpcRecord(spec_.rank);
  own->record.pid = static_cast<int32_t>(::getpid());
  own->record.process_nonce = internal::ProcessNonce();
  Status st = [&]() -> Status {
    ASSIGN_OR_RETURN(base::ScopedDevice scope, base::ScopedDevice::Enter(spec_.device));
    const uint64_t bytes = P2pFifoBytes(spec_.slot_bytes, kLLSlotBytes);
    RINGO_CUDA_RETURN_IF_ERROR(cudaMalloc(&own->memory, bytes));
    owned_.push_back(own->memory);
    // Formatted before any peer can open it (the offer follows).
    RETURN_IF_ERROR(FormatP2pFifo(own->memory, spec_.slot_bytes, kLLSlotBytes, nullptr));
    cudaIpcMemHandle_t handle;
    RINGO_CUDA_RETURN_IF_ERROR(cudaIpcGetMemHandle(&handle, own->memory));
    RINGO_CUDA_RETURN_IF_ERROR(
        cudaDeviceGetPCIBusId(own->record.bus_id, sizeof(own->record.bus_id), spec_.device));
    std::memcpy(own->record.handle, &handle, sizeof(handle));
    own->record.ok = 1;
    own->record.nchannels = 1;
    own->record.slot_bytes = spec_.slot_bytes;
    own->record.ll_slot_bytes = kLLSlotBytes;
    own->record.stride = P2pFifoBytes(spec_.slot_bytes, kLLSlotBytes);
    own->record.device_pointer = reinterpret_cast<uint64_t>(own->memory);
    return Status();
  }();
  if (!st.ok()) own->record.ok = 0;
  own->status = st;
  const Status sent =
      exchange_->Send(peer, PairTag(kTagPeerOffer, peer, spec_.rank), &own->record, sizeof(own->record));
  return st.ok() ? sent : st;
}

Status GpuPeerLinks::Answer(int peer) {
  const std::string where = "rank " + std::to_string(spec_.rank) + " connecting to peer rank " +
                            std::to_string(peer) + " for GPU point-to-point";
  std::string msg;
  RETURN_IF_ERROR(exchange_->Recv(peer, PairTag(kTagPeerOffer, spec_.rank, peer), &msg,
                                  DeadlineAfterMs(spec_.timeout_ms))
                      .WithContext(where + " (has it posted the matching ringoRecv?)"));
  IpcRecord theirs{};
  if (msg.size() != sizeof(theirs)) return base::RemoteError(where + ": a malformed offer");
  std::memcpy(&theirs, msg.data(), sizeof(theirs));
  IpcRecord mine = internal::FailedIpcRecord(spec_.rank);
  mine.ok = 1;
  mine.nchannels = 1;
  mine.slot_bytes = theirs.slot_bytes;
  mine.ll_slot_bytes = kLLSlotBytes;
  mine.stride = P2pFifoBytes(theirs.slot_bytes, kLLSlotBytes);
  mine.pid = static_cast<int32_t>(::getpid());
  mine.process_nonce = internal::ProcessNonce();
  Status st = internal::CheckIpcRecord(theirs, peer, mine);
  std::unique_ptr<P2pFifo> end;
  if (st.ok()) {
    st = [&]() -> Status {
      ASSIGN_OR_RETURN(base::ScopedDevice scope, base::ScopedDevice::Enter(spec_.device));
      const std::string bus = internal::BusId(theirs);
      int their_device = -1;
      if (cudaDeviceGetByPCIBusId(&their_device, bus.c_str()) != cudaSuccess) {
        cudaGetLastError();
        their_device = -1;
      }
      void* base = nullptr;
      if (internal::SameProcess(theirs, mine)) {
        if (their_device < 0) return base::Internal(where + ": the peer's GPU " + bus + " is not visible");
        RETURN_IF_ERROR(EnablePeerAccess(spec_.device, their_device));
        base = reinterpret_cast<void*>(theirs.device_pointer);
      } else {
        cudaIpcMemHandle_t handle;
        std::memcpy(&handle, theirs.handle, sizeof(handle));
        const cudaError_t err = cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess);
        if (err != cudaSuccess) {
          return base::CudaCallStatus(err, "cudaIpcOpenMemHandle", __FILE__, __LINE__).WithContext(where);
        }
        opened_.push_back(base);
      }
      end = std::make_unique<P2pFifo>(FifoIn(base, theirs.slot_bytes, their_device));
      return Status();
    }();
  }
  const char ok = st.ok() ? 1 : 0;
  const Status sent = exchange_->Send(peer, PairTag(kTagPeerAck, spec_.rank, peer), &ok, 1);
  RETURN_IF_ERROR(st);
  RETURN_IF_ERROR(sent);
  send_[peer] = std::move(end);
  return Status();
}

Status GpuPeerLinks::Settle(int peer, Own* own) {
  const std::string where = "rank " + std::to_string(spec_.rank) + " connecting from peer rank " +
                            std::to_string(peer) + " for GPU point-to-point";
  std::string msg;
  RETURN_IF_ERROR(exchange_->Recv(peer, PairTag(kTagPeerAck, peer, spec_.rank), &msg,
                                  DeadlineAfterMs(spec_.timeout_ms))
                      .WithContext(where + " (has it posted the matching ringoSend?)"));
  RETURN_IF_ERROR(own->status);
  if (msg.size() != 1 || msg[0] != 1) return base::RemoteError(where + ": it could not open this rank's connector");
  recv_[peer] = std::make_unique<P2pFifo>(FifoIn(own->memory, spec_.slot_bytes, spec_.device));
  return Status();
}

#else  // !RINGO_P2P_CUDA

GpuPeerLinks::~GpuPeerLinks() = default;
Status GpuPeerLinks::Offer(int, Own*) { return base::InvalidUsage("built without the CUDA toolkit"); }
Status GpuPeerLinks::Answer(int) { return base::InvalidUsage("built without the CUDA toolkit"); }
Status GpuPeerLinks::Settle(int, Own*) { return base::InvalidUsage("built without the CUDA toolkit"); }

#endif  // RINGO_P2P_CUDA

Status GpuPeerLinks::Connect(const std::vector<int>& send_to, const std::vector<int>& recv_from) {
  const std::vector<int> outgoing = Missing(send_to, spec_.rank, spec_.nranks, send_);
  const std::vector<int> incoming = Missing(recv_from, spec_.rank, spec_.nranks, recv_);
  if (outgoing.empty() && incoming.empty()) return Status();
  if (!exchange_->CarriesMessages()) return base::Internal("GPU point-to-point needs a message exchange");
  Status first;
  auto note = [&first](const Status& st) {
    if (first.ok() && !st.ok()) first = st;
  };
  std::vector<Own> own(incoming.size());
  for (size_t i = 0; i < incoming.size(); ++i) note(Offer(incoming[i], &own[i]));
  for (int q : outgoing) note(Answer(q));
  for (size_t i = 0; i < incoming.size(); ++i) note(Settle(incoming[i], &own[i]));
  return first;
}

}  // namespace ringo::transport
