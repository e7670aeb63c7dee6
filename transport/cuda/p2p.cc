#include "transport/cuda/p2p.h"

#include <string>

#include "transport/shm/fifo.h"
#include <utility>

#if RINGO_P2P_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ringo::transport {

using base::Status;
using base::StatusOr;

uint64_t P2pFifoBytes(uint64_t slot_bytes, uint64_t ll_slot_bytes) {
  return FifoGeometry{slot_bytes, 0, ll_slot_bytes}.Bytes();
}

P2pFifo P2pFifoAt(void* base, uint64_t slot_bytes, uint64_t ll_slot_bytes, int device) {
  P2pFifo f;
  f.header = static_cast<FifoHeader*>(base);
  f.geometry = FifoGeometry{slot_bytes, 0, ll_slot_bytes};
  f.device = device;
  return f;
}

Status FormatP2pFifo(void* base, uint64_t slot_bytes, uint64_t ll_slot_bytes, void* stream) {
#if RINGO_P2P_CUDA
  // The header as a host FIFO's (receiver unnamed: kernels report ranks from
  // their own records), written into zeroed device memory.
  FifoHeader header;
  FormatFifoHeader(&header, FifoGeometry{slot_bytes, 0, ll_slot_bytes}, -1, ProcessId{});
  const auto s = static_cast<cudaStream_t>(stream);
  RINGO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(base, 0, P2pFifoBytes(slot_bytes, ll_slot_bytes), s));
  RINGO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(base, &header, sizeof(header), cudaMemcpyHostToDevice, s));
  RINGO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  return Status();
#else
  (void)base;
  (void)slot_bytes;
  (void)ll_slot_bytes;
  (void)stream;
  return base::InvalidUsage("GPU p2p transport: Ringo was built without the CUDA toolkit");
#endif
}

StatusOr<std::unique_ptr<P2pRing>> P2pRing::Create(const P2pRingSpec& spec) {
  if (spec.nranks < 2) return base::InvalidArgument("a p2p ring needs at least 2 ranks");
  if (static_cast<int>(spec.order.size()) != spec.nranks ||
      static_cast<int>(spec.devices.size()) != spec.nranks) {
    return base::InvalidArgument("p2p ring: order and devices need one entry per rank");
  }
  if (spec.nchannels < 1) return base::InvalidArgument("p2p ring: at least one channel");
  if (spec.slot_bytes == 0 || spec.slot_bytes % 16 != 0 || spec.ll_slot_bytes == 0 ||
      spec.ll_slot_bytes % 16 != 0) {
    return base::InvalidArgument("p2p ring: slot sizes must be positive multiples of 16");
  }
#if !RINGO_P2P_CUDA
  return base::InvalidUsage("GPU p2p transport: Ringo was built without the CUDA toolkit");
#else
  std::unique_ptr<P2pRing> ring(new P2pRing(spec));
  RETURN_IF_ERROR(ring->Allocate());  // the destructor frees a partial allocation
  return ring;
#endif
}

namespace {

// A ring position's ends within a shared in-process ring.
class InProcessEnds : public P2pEnds {
 public:
  InProcessEnds(std::shared_ptr<P2pRing> ring, int pos) : ring_(std::move(ring)), pos_(pos) {}
  const P2pFifo& Recv(int channel) const override {
    const int n = ring_->spec().nranks;
    return ring_->Edge((pos_ + n - 1) % n, channel);
  }
  const P2pFifo& Send(int channel) const override { return ring_->Edge(pos_, channel); }
  void RaiseAbort() override { ring_->RaiseAbort(pos_); }

 private:
  std::shared_ptr<P2pRing> ring_;
  int pos_;
};

}  // namespace

std::unique_ptr<P2pEnds> P2pRing::EndsOf(std::shared_ptr<P2pRing> ring, int pos) {
  return std::make_unique<InProcessEnds>(std::move(ring), pos);
}

#if RINGO_P2P_CUDA

Status EnablePeerAccess(int from, int to) {
  if (from == to) return Status();
  int can = 0;
  RINGO_CUDA_RETURN_IF_ERROR(cudaDeviceCanAccessPeer(&can, from, to));
  if (can == 0) {
    return base::InvalidUsage(
        "GPU " + std::to_string(from) + " cannot access GPU " + std::to_string(to) +
        "'s memory (no peer-to-peer path); the shared-memory GPU transport is not "
        "implemented yet");
  }
  ASSIGN_OR_RETURN(base::ScopedDevice scope, base::ScopedDevice::Enter(from));
  const cudaError_t err = cudaDeviceEnablePeerAccess(to, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError();
    return Status();
  }
  RINGO_CUDA_RETURN_IF_ERROR(err);
  return Status();
}

Status P2pRing::Allocate() {
  const int n = spec_.nranks;
  const int nch = spec_.nchannels;
  ASSIGN_OR_RETURN(abort_flags_, base::MappedHostMemory::Allocate(sizeof(uint32_t) * n * nch));
  auto* flags = static_cast<uint32_t*>(abort_flags_.device());
  const uint64_t bytes = P2pFifoBytes(spec_.slot_bytes, spec_.ll_slot_bytes);
  edges_.resize(static_cast<size_t>(n) * nch);
  for (int pos = 0; pos < n; ++pos) {
    const int sender = spec_.devices[spec_.order[pos]];
    const int receiver = spec_.devices[spec_.order[(pos + 1) % n]];
    RETURN_IF_ERROR(EnablePeerAccess(sender, receiver));
    ASSIGN_OR_RETURN(base::ScopedDevice scope, base::ScopedDevice::Enter(receiver));
    for (int c = 0; c < nch; ++c) {
      void* m = nullptr;
      RINGO_CUDA_RETURN_IF_ERROR(cudaMalloc(&m, bytes));
      device_memory_.push_back(m);
      P2pFifo& f = edges_[pos * nch + c];
      // The destructor frees memory_[i] on edges_[i].device.
      f = P2pFifoAt(m, spec_.slot_bytes, spec_.ll_slot_bytes, receiver);
      f.abort_word = flags + pos * nch + c;
      // Formatted (and synchronised) before any kernel of another stream reads the counters.
      RETURN_IF_ERROR(FormatP2pFifo(m, spec_.slot_bytes, spec_.ll_slot_bytes, nullptr));
    }
  }
  return Status();
}

P2pRing::~P2pRing() {
  for (size_t i = 0; i < device_memory_.size(); ++i) {
    // cudaFree synchronises with the device's outstanding work.
    auto scope = base::ScopedDevice::Enter(edges_[i].device);
    cudaFree(device_memory_[i]);
  }
}

void P2pRing::RaiseAbort(int pos) {
  const int n = spec_.nranks;
  auto* flags = static_cast<volatile uint32_t*>(abort_flags_.host());
  if (flags == nullptr) return;
  for (int c = 0; c < spec_.nchannels; ++c) {
    flags[pos * spec_.nchannels + c] = 1;                  // to the successor
    flags[((pos + n - 1) % n) * spec_.nchannels + c] = 1;  // from the predecessor
  }
}

#else

Status EnablePeerAccess(int, int) {
  return base::InvalidUsage("GPU p2p transport: Ringo was built without the CUDA toolkit");
}
P2pRing::~P2pRing() = default;
void P2pRing::RaiseAbort(int) {}

#endif  // RINGO_P2P_CUDA

}  // namespace ringo::transport
