// Host FIFOs in this process (threads) and in POSIX shared memory (processes).
#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "base/logging.h"
#include "transport/connect/media.h"
#include "transport/shm/segment.h"

namespace ringo::transport {
namespace {

using base::Status;
using base::StatusOr;

std::string PairName(const PairContext& pair, const char* kind) {
  char name[128];
  std::snprintf(name, sizeof(name), "/ringo-%016llx-%s%d-%d-l%d", static_cast<unsigned long long>(pair.spec->tag),
                kind, pair.peer, pair.spec->rank, pair.lane);
  return name;
}

FifoLink LinkOf(const PairContext& pair, Medium medium, bool sending, std::shared_ptr<FifoMemory> memory) {
  FifoLink l;
  l.peer = pair.peer;
  l.lane = pair.lane;
  l.sending = sending;
  l.medium = medium;
  l.header = static_cast<FifoHeader*>(memory->base());
  l.geometry = pair.geometry;
  l.memory = std::move(memory);
  return l;
}

// ---------------------------------------------------------------- process --

// FIFOs a receiver made for a sender that is a thread of this process,
// until that sender takes them.
std::mutex g_process_mu;
std::map<std::string, std::shared_ptr<FifoMemory>>* g_process_fifos =
    new std::map<std::string, std::shared_ptr<FifoMemory>>();  // GUARDED_BY(g_process_mu)

std::shared_ptr<FifoMemory> TakeProcessFifo(const std::string& key) {
  std::lock_guard<std::mutex> lock(g_process_mu);
  auto it = g_process_fifos->find(key);
  if (it == g_process_fifos->end()) return nullptr;
  auto mem = std::move(it->second);
  g_process_fifos->erase(it);
  return mem;
}

struct NameOffer {
  char name[128];
};
static_assert(sizeof(NameOffer) <= kOfferBlobBytes, "an offer blob holds a name");

class ProcessMedium : public FifoMedium {
 public:
  Medium kind() const override { return Medium::kProcess; }

  Status Create(const PairContext& pair, Made* made, OfferBlob* offer) override {
    made->name = PairName(pair, "p");
    made->memory = AllocateProcessFifo(pair.geometry.slot_bytes, pair.spec->rank, pair.geometry.slot_prefix);
    made->header = static_cast<FifoHeader*>(made->memory->base());
    {
      std::lock_guard<std::mutex> lock(g_process_mu);
      (*g_process_fifos)[made->name] = made->memory;
    }
    NameOffer o{};
    PutText(o.name, made->name);
    std::memcpy(offer->bytes, &o, sizeof(o));
    return Status();
  }

  StatusOr<FifoLink> Open(const PairContext& pair, const OfferBlob& offer) override {
    NameOffer o;
    std::memcpy(&o, offer.bytes, sizeof(o));
    auto mem = TakeProcessFifo(GetText(o.name));
    if (mem == nullptr) return base::RemoteError(pair.where + ": its in-process FIFO is not in this process");
    return LinkOf(pair, kind(), true, std::move(mem));
  }

  StatusOr<FifoLink> Settle(const PairContext& pair, Made* made, bool opened, const SenderProbe&) override {
    TakeProcessFifo(made->name);  // still there only when the sender failed
    if (!opened) return base::Internal("unused");
    made->header->receiver_pulls.store(1, std::memory_order_release);  // the same process: it reads its buffers
    return LinkOf(pair, kind(), false, made->memory);
  }
};

// -------------------------------------------------------------------- shm --

// Whether this process reads `want` at `addr` in process `pid`: then a
// receiver may copy straight out of its sender's buffers (the same user, no
// ptrace restriction, and truly that process: not a namesake in another pid
// namespace).
bool CanRead(int32_t pid, uint64_t addr, uint64_t want) {
  uint64_t got = 0;
  iovec local{&got, sizeof(got)};
  iovec remote{reinterpret_cast<void*>(addr), sizeof(got)};
  return ::process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof(got)) && got == want;
}

class ShmMedium : public FifoMedium {
 public:
  Medium kind() const override { return Medium::kShm; }

  Status Create(const PairContext& pair, Made* made, OfferBlob* offer) override {
    if (pair.geometry.slot_prefix != 0 || pair.geometry.ll_slot_bytes != 0) {
      return base::Internal("a shared-memory FIFO has no slot prefix and no LL slots");
    }
    made->name = PairName(pair, "s");
    ASSIGN_OR_RETURN(made->memory, CreateShmFifo(made->name, pair.geometry.slot_bytes, pair.spec->rank));
    made->header = static_cast<FifoHeader*>(made->memory->base());
    NameOffer o{};
    PutText(o.name, made->name);
    std::memcpy(offer->bytes, &o, sizeof(o));
    return Status();
  }

  StatusOr<FifoLink> Open(const PairContext& pair, const OfferBlob& offer) override {
    NameOffer o;
    std::memcpy(&o, offer.bytes, sizeof(o));
    auto mem = OpenShmFifo(GetText(o.name), pair.geometry.slot_bytes);
    if (!mem.ok()) return mem.status().WithContext(pair.where);
    return LinkOf(pair, kind(), true, *mem);
  }

  StatusOr<FifoLink> Settle(const PairContext& pair, Made* made, bool opened, const SenderProbe& probe) override {
    if (made->memory != nullptr) UnlinkShm(made->name);  // both ends have it mapped, or the sender failed
    if (!opened) return base::Internal("unused");
    const bool pulls = CanRead(pair.peer_info().pid, probe.addr, probe.value);
    if (!pulls && pair.lane == kP2pLane) {
      RINGO_LOG(INFO) << pair.where << ": cannot read the peer's memory (process_vm_readv: " << std::strerror(errno)
                      << "); its large messages go through the FIFO";
    }
    made->header->receiver_pulls.store(pulls ? 1 : 2, std::memory_order_release);
    return LinkOf(pair, kind(), false, made->memory);
  }
};

}  // namespace

std::unique_ptr<FifoMedium> MakeProcessMedium() { return std::make_unique<ProcessMedium>(); }
std::unique_ptr<FifoMedium> MakeShmMedium() { return std::make_unique<ShmMedium>(); }

}  // namespace ringo::transport
