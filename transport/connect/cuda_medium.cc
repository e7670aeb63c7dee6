// GPU FIFOs on one host: device memory of the receiver's GPU
// (cuda/gpu_fifo.h). A sender that is a thread of the receiver's process
// takes the allocation itself and addresses it by its pointer, with peer
// access enabled between the two GPUs (kCudaPeer); a sender in another
// process opens its CUDA IPC handle (kCudaIpc).
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "transport/connect/media.h"
#include "transport/cuda/gpu_fifo.h"

namespace ringo::transport {
namespace {

using base::Status;
using base::StatusOr;

struct CudaOffer {
  int32_t pid;
  int32_t reserved;
  char key[64];  // kCudaPeer: the process-wide registry's key
  char bus_id[kCudaBusIdBytes];
  unsigned char handle[kCudaIpcHandleBytes];
};
static_assert(sizeof(CudaOffer) <= kOfferBlobBytes, "an offer blob holds a CUDA IPC record");

// Device FIFOs a receiver made for a sender in this process, until it takes them.
std::mutex g_mu;
std::map<std::string, std::shared_ptr<OwnedDeviceFifo>>* g_fifos =
    new std::map<std::string, std::shared_ptr<OwnedDeviceFifo>>();  // GUARDED_BY(g_mu)

std::shared_ptr<OwnedDeviceFifo> Take(const std::string& key) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_fifos->find(key);
  if (it == g_fifos->end()) return nullptr;
  auto fifo = std::move(it->second);
  g_fifos->erase(it);
  return fifo;
}

class CudaMedium : public FifoMedium {
 public:
  explicit CudaMedium(Medium kind) : kind_(kind) {}
  Medium kind() const override { return kind_; }

  Status Create(const PairContext& pair, Made* made, OfferBlob* offer) override {
    const int device = pair.spec->device;
    if (device < 0) return base::Internal(pair.where + ": a GPU FIFO for a rank without a GPU");
    ASSIGN_OR_RETURN(auto fifo, OwnedDeviceFifo::Create(device, pair.geometry, pair.spec->rank));
    made->memory = fifo;
    made->header = static_cast<FifoHeader*>(fifo->base());
    made->device = device;
    CudaOffer o{};
    o.pid = pair.self_info().pid;
    if (kind_ == Medium::kCudaPeer) {
      made->name = "cuda-" + std::to_string(pair.spec->tag) + "-" + std::to_string(pair.peer) + "-" +
                   std::to_string(pair.spec->rank) + "-" + std::to_string(pair.lane);
      PutText(o.key, made->name);
      std::lock_guard<std::mutex> lock(g_mu);
      (*g_fifos)[made->name] = fifo;
    } else {
      RETURN_IF_ERROR(fifo->Export(o.handle, o.bus_id).WithContext(pair.where));
    }
    std::memcpy(offer->bytes, &o, sizeof(o));
    return Status();
  }

  StatusOr<FifoLink> Open(const PairContext& pair, const OfferBlob& offer) override {
    CudaOffer o;
    std::memcpy(&o, offer.bytes, sizeof(o));
    const int mine = pair.spec->device;
    FifoLink l;
    l.peer = pair.peer;
    l.lane = pair.lane;
    l.sending = true;
    l.medium = kind_;
    l.geometry = pair.geometry;
    if (kind_ == Medium::kCudaPeer) {
      std::shared_ptr<OwnedDeviceFifo> fifo = Take(GetText(o.key));
      if (fifo == nullptr) return base::RemoteError(pair.where + ": its GPU FIFO is not in this process");
      RETURN_IF_ERROR(EnablePeerAccess(mine, fifo->device()).WithContext(pair.where));
      l.header = static_cast<FifoHeader*>(fifo->base());
      l.device = fifo->device();
      l.memory = std::move(fifo);
      return l;
    }
    o.bus_id[kCudaBusIdBytes - 1] = '\0';
    const std::string bus(o.bus_id);
    const int theirs = DeviceOfBusId(bus);  // -1: not visible in this process
    if (theirs >= 0 && theirs != mine) {
      // The mapping works only where the two GPUs reach each other.
      RETURN_IF_ERROR(CanAccessPeer(mine, theirs).WithContext(pair.where));
    }
    auto mapped = OpenIpcDeviceFifo(o.handle, mine);
    if (!mapped.ok()) return mapped.status().WithContext(pair.where + " (GPU " + bus + ")");
    l.header = static_cast<FifoHeader*>((*mapped)->base());
    l.device = theirs;
    l.memory = *mapped;
    return l;
  }

  void Forget(const PairContext& pair, Made* made) override {
    if (kind_ == Medium::kCudaPeer) {
      Take(made->name);
    } else if (made->memory != nullptr) {
      static_cast<OwnedDeviceFifo*>(made->memory.get())->Abandon();  // its sender may map it
    }
  }

  StatusOr<FifoLink> Settle(const PairContext& pair, Made* made, bool opened, const SenderProbe&) override {
    if (kind_ == Medium::kCudaPeer) Take(made->name);  // still there only when the sender failed
    if (!opened) return base::Internal("unused");
    if (kind_ == Medium::kCudaIpc) {
      static_cast<OwnedDeviceFifo*>(made->memory.get())->ExpectRelease(pair.peer_info().pid, pair.spec->timeout_ms);
    }
    FifoLink l;
    l.peer = pair.peer;
    l.lane = pair.lane;
    l.sending = false;
    l.medium = kind_;
    l.header = made->header;
    l.geometry = pair.geometry;
    l.device = made->device;
    l.memory = made->memory;
    return l;
  }

 private:
  Medium kind_;
};

}  // namespace

std::unique_ptr<FifoMedium> MakeCudaMedium(Medium kind) { return std::make_unique<CudaMedium>(kind); }

}  // namespace ringo::transport
