#include "transport/net/proxy.h"

#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <chrono>
#include <cstring>
#include <deque>
#include <string>

#include "base/cpu_relax.h"
#include "base/logging.h"

namespace ringo::transport::net {
namespace {

constexpr int kSleepMs = 50;  // a sleeping proxy rechecks its flags this often
// ... and this often where a kernel feeds one of its FIFOs. A kernel cannot
// write the eventfd: the engine marks each launch in the FIFOs it feeds
// (MarkDeviceLaunch, which wakes the proxy), and the proxy does not sleep
// until the kernel has marked the launch ended; this bounds the wait should
// a launch go unmarked.
constexpr int kDeviceSleepMs = 1;
// The metadata ends where the data begins, so prefix and data go as one message.
constexpr size_t kMetaOffset = kProxySlotPrefix - sizeof(SlotMeta);
static_assert(sizeof(SlotMeta) <= kProxySlotPrefix, "the metadata fits the prefix");

using base::CpuRelax;

}  // namespace

struct Proxy::Edge {
  std::shared_ptr<FifoMemory> fifo;
  FifoHeader* header = nullptr;
  // The FIFO's slots, registered with the connection (null: nothing to
  // register); released after the connection, which may still be using it.
  std::unique_ptr<MemoryRegion> region;
  // Slots apart from the header (FifoMemory::slots_apart): each slot goes as
  // two messages, its metadata from `metas` (host memory, registered as
  // `meta_region`; released after the connection too) and then its data,
  // since the proxy cannot write a prefix into device memory nor read one
  // there.
  std::unique_ptr<SlotMeta[]> metas;
  std::unique_ptr<MemoryRegion> meta_region;
  std::unique_ptr<SendConnection> send;  // one of the two
  std::unique_ptr<RecvConnection> recv;
  int channel = 0;
  std::deque<Request*> requests;  // in flight, in order
  uint64_t issued = 0;            // slots handed to the network (sends) or posted (receives)
  uint64_t finished = 0;          // slots done: the head (sends) or the tail (receives)
  bool failed = false;            // stopped: its fault is in the FIFO (or was forwarded)
  bool device_fed = false;        // a kernel posts or releases its slots
  char* slots = nullptr;  // slot 0's prefix: after the header, or apart
  bool apart = false;
  // The connection took no more requests: nothing to issue until one of
  // those in flight completes (which wakes a sleeping proxy by itself).
  bool blocked = false;
  bool half = false;         // slot `issued`'s metadata is out, its data not yet
  int parts_done = 0;        // messages of slot `finished` done (apart: of 2)
  size_t meta_received = 0;  // (receives, apart) the size of slot `finished`'s metadata message

  Connection& connection() { return send ? static_cast<Connection&>(*send) : static_cast<Connection&>(*recv); }
  char* Slot(uint64_t i) const { return slots + (i % kSlots) * header->slot_stride; }

  // Registers the FIFO's slots with their prefixes for the network (not its
  // header: nothing a peer writes may reach the counters and notices); for
  // slots apart, the staging of their metadata too.
  base::Status Register(Connection& c, FifoMemory& memory) {
    const auto* h = static_cast<const FifoHeader*>(memory.base());
    apart = memory.slots_apart() != nullptr;
    slots = apart ? memory.slots_apart() : static_cast<char*>(memory.base()) + kFifoDataOffset;
    ASSIGN_OR_RETURN(region, c.Register(slots, kSlots * static_cast<size_t>(h->slot_stride),
                                        memory.slots_on_device() ? MemoryKind::kCuda : MemoryKind::kHost));
    if (apart) {
      metas.reset(new SlotMeta[kSlots]());
      ASSIGN_OR_RETURN(meta_region, c.Register(metas.get(), kSlots * sizeof(SlotMeta), MemoryKind::kHost));
    }
    return base::OkStatus();
  }
};

Proxy::Proxy(const ProxyOptions& options) : options_(options) {
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

Proxy::~Proxy() {
  Shutdown(false, 0);
  for (auto& e : edges_) e->header->proxy_wake_fd = -1;
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void Proxy::Shutdown(bool drain, int64_t timeout_ms) {
  {
    std::lock_guard<std::mutex> lock(added_mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  if (drain && thread_.joinable()) {
    draining_.store(true);
    Wake();
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!drained_.load() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  stop_.store(true);
  Wake();
  if (thread_.joinable()) thread_.join();
  // The thread is gone: this thread owns the edges now.
  TakeAdded();
  for (auto& e : edges_) {
    if (e->failed) continue;
    FifoHeader* h = e->header;
    const bool sender_side = e->send != nullptr;
    const std::atomic<uint32_t>& aborted = sender_side ? h->sender_aborted : h->receiver_aborted;
    if (aborted.load(std::memory_order_acquire) != 0) {
      const FaultNotice& notice = sender_side ? h->sender_notice : h->receiver_notice;
      e->connection().Abort(
          NoticeStatus(notice, "rank " + std::to_string(options_.self_rank), options_.self_rank, INT_MAX),
          options_.self_rank, 0);
    } else {
      e->connection().Close();
    }
  }
}

base::Status Proxy::AddSender(std::shared_ptr<FifoMemory> fifo, std::unique_ptr<SendConnection> connection,
                              int channel, bool device_fed) {
  auto e = std::make_unique<Edge>();
  e->device_fed = device_fed;
  RETURN_IF_ERROR(e->Register(*connection, *fifo));
  e->send = std::move(connection);
  return Adopt(std::move(e), std::move(fifo), channel);
}

base::Status Proxy::AddReceiver(std::shared_ptr<FifoMemory> fifo, std::unique_ptr<RecvConnection> connection,
                                int channel, bool device_fed) {
  auto e = std::make_unique<Edge>();
  e->device_fed = device_fed;
  RETURN_IF_ERROR(e->Register(*connection, *fifo));
  e->recv = std::move(connection);
  return Adopt(std::move(e), std::move(fifo), channel);
}

base::Status Proxy::Adopt(std::unique_ptr<Edge> e, std::shared_ptr<FifoMemory> fifo, int channel) {
  e->fifo = std::move(fifo);
  e->header = static_cast<FifoHeader*>(e->fifo->base());
  e->header->proxy_wake_fd = wake_fd_;
  e->channel = channel;
  {
    std::lock_guard<std::mutex> lock(added_mu_);
    if (shut_down_) return base::InvalidUsage("the network proxy was shut down");
    added_.push_back(std::move(e));
    has_added_.store(true, std::memory_order_release);
  }
  Wake();
  return base::OkStatus();
}

void Proxy::TakeAdded() {
  std::lock_guard<std::mutex> lock(added_mu_);
  for (auto& e : added_) edges_.push_back(std::move(e));
  added_.clear();
  has_added_.store(false, std::memory_order_relaxed);
}

void Proxy::Wake() {
  const uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!::write(wake_fd_, &one, sizeof(one));
}

base::Status Proxy::Start() {
  if (wake_fd_ < 0) return base::SystemError(std::string("eventfd for the network proxy: ") + std::strerror(errno));
  thread_ = std::thread([this] { Run(); });
  return base::OkStatus();
}

void Proxy::FailLocal(Edge& e, const base::Status& st) {
  RINGO_LOG(INFO) << "rank " << options_.self_rank << " channel " << e.channel << " proxy: " << st.ToString();
  e.failed = true;
  // The peer may not see the fault by itself (a verbs queue pair in error
  // is silent to the other end): tell it, best effort.
  e.connection().Abort(st, options_.self_rank, 0);
  FifoHeader* h = e.header;
  // The remote end's notice and flag, as the executor reads them.
  if (e.recv) {
    WriteFaultNotice(h->sender_notice, st, options_.self_rank, 0);
    h->sender_aborted.store(1, std::memory_order_seq_cst);
  } else {
    WriteFaultNotice(h->receiver_notice, st, options_.self_rank, 0);
    h->receiver_aborted.store(1, std::memory_order_seq_cst);
  }
  WakeFifo(h);
}

Proxy::Issue Proxy::Track(Edge& e, base::StatusOr<Request*> request) {
  if (!request.ok()) {
    FailLocal(e, request.status());
    return Issue::kFailed;
  }
  if (*request == nullptr) {  // the connection holds no more: wait for one to complete
    e.blocked = true;
    return Issue::kBlocked;
  }
  e.requests.push_back(*request);
  return Issue::kIssued;
}

bool Proxy::StepSender(Edge& e) {
  FifoHeader* h = e.header;
  if (h->sender_aborted.load(std::memory_order_acquire) != 0) {  // the executor failed: tell the peer why
    e.send->Abort(NoticeStatus(h->sender_notice, "rank " + std::to_string(options_.self_rank), options_.self_rank,
                               INT_MAX),
                  options_.self_rank, 0);
    e.failed = true;
    return true;
  }
  bool moved = false;
  const uint64_t tail = h->tail.value.load(std::memory_order_acquire);
  while (e.issued < tail) {
    const SlotMeta& meta = h->meta[e.issued % kSlots];
    // A kernel's data starts at the shift its size word carries.
    const uint64_t span = std::min<uint64_t>(SlotSpan(meta.bytes), h->slot_bytes);
    Issue issued;
    if (!e.apart) {  // the metadata in the prefix, right before the data: one message
      char* msg = e.Slot(e.issued) + kMetaOffset;
      std::memcpy(msg, &meta, sizeof(meta));
      issued = Track(e, e.send->Isend(msg, sizeof(meta) + span, e.region.get()));
    } else if (!e.half) {  // the metadata alone, from host memory; the data next
      SlotMeta& staged = e.metas[e.issued % kSlots];
      staged = meta;
      issued = Track(e, e.send->Isend(&staged, sizeof(staged), e.meta_region.get()));
    } else {  // the data, straight from where the executor wrote it
      issued = Track(e, e.send->Isend(e.Slot(e.issued) + kProxySlotPrefix, span, e.region.get()));
    }
    if (issued == Issue::kFailed) return true;
    if (issued == Issue::kBlocked) break;
    moved = true;
    if (e.apart) {
      e.half = !e.half;
      if (e.half) continue;  // the metadata's request is in flight: the slot's data next
    }
    ++e.issued;
  }
  while (!e.requests.empty()) {
    bool done = false;
    size_t bytes = 0;
    base::Status st = e.send->Test(e.requests.front(), &done, &bytes);
    if (!st.ok()) {
      FailLocal(e, st.WithContext("channel " + std::to_string(e.channel) + ", message " + std::to_string(e.finished)));
      return true;
    }
    if (!done) break;
    e.requests.pop_front();
    e.blocked = false;
    moved = true;
    if (e.apart && ++e.parts_done < 2) continue;
    e.parts_done = 0;
    Publish(h->head, ++e.finished);  // the slot is free again
  }
  return moved;
}

bool Proxy::StepReceiver(Edge& e) {
  FifoHeader* h = e.header;
  if (h->receiver_aborted.load(std::memory_order_acquire) != 0) {
    e.recv->Abort(NoticeStatus(h->receiver_notice, "rank " + std::to_string(options_.self_rank), options_.self_rank,
                               INT_MAX),
                  options_.self_rank, 0);
    e.failed = true;
    return true;
  }
  bool moved = false;
  const uint64_t head = h->head.value.load(std::memory_order_acquire);
  while (e.issued < head + kSlots) {
    Issue issued;
    if (!e.apart) {  // prefix and data as one message
      issued = Track(e, e.recv->Irecv(e.Slot(e.issued) + kMetaOffset, sizeof(SlotMeta) + h->slot_bytes,
                                      e.region.get()));
    } else if (!e.half) {  // the metadata, into host memory; the data next
      issued = Track(e, e.recv->Irecv(&e.metas[e.issued % kSlots], sizeof(SlotMeta), e.meta_region.get()));
    } else {  // the data, straight into the slot
      issued = Track(e, e.recv->Irecv(e.Slot(e.issued) + kProxySlotPrefix, h->slot_bytes, e.region.get()));
    }
    if (issued == Issue::kFailed) return true;
    if (issued == Issue::kBlocked) break;
    moved = true;
    if (e.apart) {
      e.half = !e.half;
      if (e.half) continue;  // the metadata's request is in flight: the slot's data next
    }
    ++e.issued;
  }
  while (!e.requests.empty()) {
    bool done = false;
    size_t bytes = 0;
    base::Status st = e.recv->Test(e.requests.front(), &done, &bytes);
    if (!st.ok()) {
      FailLocal(e, st.WithContext("channel " + std::to_string(e.channel) + ", message " + std::to_string(e.finished)));
      return true;
    }
    if (!done) break;
    e.requests.pop_front();
    e.blocked = false;
    moved = true;
    if (e.apart && e.parts_done == 0) {  // the metadata; the data follows
      e.meta_received = bytes;
      e.parts_done = 1;
      continue;
    }
    e.parts_done = 0;
    SlotMeta meta;
    std::memcpy(&meta, e.apart ? static_cast<void*>(&e.metas[e.finished % kSlots]) : e.Slot(e.finished) + kMetaOffset,
                sizeof(meta));
    const bool meta_whole = e.apart ? e.meta_received == sizeof(meta) : bytes >= sizeof(meta);
    const uint64_t data = e.apart ? bytes : bytes - std::min(bytes, sizeof(meta));
    // The size word: bytes, and (a kernel's) the shift; nothing above (an
    // inline mark, say: the slot's data is here, not in its metadata).
    const bool word_ok = (meta.bytes >> kSlotShiftBit) < 16;
    if (!meta_whole || !word_ok || SlotSpan(meta.bytes) != data || SlotSpan(meta.bytes) > h->slot_bytes) {
      const int peer = e.recv->peer().rank;
      const std::string msg = "rank " + std::to_string(options_.self_rank) + " channel " + std::to_string(e.channel) +
                              ": rank " + std::to_string(peer) + " sent message " + std::to_string(e.finished) +
                              " of " + std::to_string(e.apart ? e.meta_received + bytes : bytes) +
                              " bytes that says it holds " + std::to_string(meta.bytes);
      FailLocal(e, base::RemoteError(msg).WithOrigin(peer, msg));
      return true;
    }
    if (e.apart) {  // the NIC's writes into the slot, visible before the tail says they are there
      const base::Status visible = e.fifo->AfterNetworkWrite();
      if (!visible.ok()) {
        FailLocal(e, visible.WithContext("channel " + std::to_string(e.channel)));
        return true;
      }
    }
    SlotMeta& dst = h->meta[e.finished % kSlots];
    dst.bytes = meta.bytes;
    dst.sig = meta.sig;
    ++e.finished;
    __atomic_store_n(&dst.posted, e.finished, __ATOMIC_RELEASE);  // as SendEnd::Post marks a slot
    Publish(h->tail, e.finished);
  }
  return moved;
}

void Proxy::Sleep() {
  // A kernel that may still post or release (its launch not marked ended)
  // cannot wake the proxy: no sleep while one runs.
  for (auto& e : edges_) {
    if (!e->failed && e->device_fed && DeviceLaunchRunning(e->header)) return;
  }
  // Declare the sleep in every FIFO, then look once more: a post before the
  // declaration is seen here, one after it writes the eventfd.
  for (auto& e : edges_) e->header->proxy_sleeping.store(1, std::memory_order_seq_cst);
  bool work = false;
  for (auto& e : edges_) {
    if (e->failed) continue;
    const FifoHeader* h = e->header;
    // An edge the connection holds back has nothing to issue until a
    // request completes, which makes its descriptors readable.
    // A launch marked after the declaration found proxy_sleeping 0 and
    // wrote no eventfd: it is seen here instead.
    work = work || (e->device_fed && DeviceLaunchRunning(h));
    if (e->send) {
      work = work || (h->tail.value.load(std::memory_order_seq_cst) > e->issued && !e->blocked) ||
             h->sender_aborted.load(std::memory_order_seq_cst) != 0;
    } else {
      work = work || (h->head.value.load(std::memory_order_seq_cst) + kSlots > e->issued && !e->blocked) ||
             h->receiver_aborted.load(std::memory_order_seq_cst) != 0;
    }
  }
  if (!work && !stop_.load()) {
    std::vector<int> fds;
    std::vector<short> events;
    for (auto& e : edges_) {
      if (e->failed) continue;
      // What arrived beside the messages is taken first, so it does not
      // keep the descriptors readable.
      const base::Status st = e->connection().Poll();
      if (!st.ok()) {
        FailLocal(*e, st.WithContext("channel " + std::to_string(e->channel)));
        continue;
      }
      e->connection().PollFds(&fds, &events);
    }
    std::vector<pollfd> p;
    p.push_back({wake_fd_, POLLIN, 0});
    for (size_t i = 0; i < fds.size(); ++i) p.push_back({fds[i], events[i], 0});
    bool device_fed = false;
    for (auto& e : edges_) device_fed = device_fed || (e->device_fed && !e->failed);
    ::poll(p.data(), p.size(), device_fed ? kDeviceSleepMs : kSleepMs);
    uint64_t drained;
    while (::read(wake_fd_, &drained, sizeof(drained)) > 0) {
    }
  }
  for (auto& e : edges_) e->header->proxy_sleeping.store(0, std::memory_order_relaxed);
}

bool Proxy::Drained() const {
  for (const auto& e : edges_) {
    if (e->failed || !e->send) continue;
    if (!e->requests.empty() || e->finished < e->header->tail.value.load(std::memory_order_acquire)) return false;
  }
  return true;
}

void Proxy::Run() {
  int idle = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    if (has_added_.load(std::memory_order_acquire)) TakeAdded();
    if (draining_.load(std::memory_order_relaxed) && Drained()) {
      drained_.store(true);
      return;
    }
    bool moved = false;
    for (auto& e : edges_) {
      if (e->failed) continue;
      moved = (e->send ? StepSender(*e) : StepReceiver(*e)) || moved;
    }
    if (moved) {
      idle = 0;
      continue;
    }
    ++idle;
    if (idle <= options_.spin_count) {
      CpuRelax();
    } else if (idle <= options_.spin_count + options_.yield_count) {
      sched_yield();
    } else {
      Sleep();
      idle = 0;
    }
  }
}

}  // namespace ringo::transport::net
