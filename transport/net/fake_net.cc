#include "transport/net/fake_net.h"

#include <climits>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

namespace ringo::transport::net {
namespace {

using base::Status;
using base::StatusOr;

// The two directions of one connection: messages sender -> receiver, and
// each side's abort notice and whether it closed.
struct Channel {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::vector<char>> messages;  // GUARDED_BY(mu)
  FaultNotice notice[2];                   // by side: 0 sender, 1 receiver
  bool closed[2] = {false, false};         // GUARDED_BY(mu)
  int ranks[2] = {-1, -1};
};

class FakeRequest : public Request {
 public:
  char* data = nullptr;
  size_t capacity = 0;
  size_t bytes = 0;
  bool done = false;
};

class FakeConnection {
 protected:
  FakeConnection(std::shared_ptr<Channel> ch, int side) : ch_(std::move(ch)), side_(side) {
    peer_.rank = ch_->ranks[1 - side_];
    peer_.where = "in-memory";
  }
  ~FakeConnection() {
    std::lock_guard<std::mutex> lock(ch_->mu);
    ch_->closed[side_] = true;
  }

  // The peer's abort or close, if any.
  Status PeerState() {
    FaultNotice& n = ch_->notice[1 - side_];
    const std::string where = "rank " + std::to_string(ch_->ranks[side_]) + ", connection to rank " +
                              std::to_string(peer_.rank);
    if (n.set.load(std::memory_order_acquire) != 0) return NoticeStatus(n, where, peer_.rank, INT_MAX);
    if (ch_->closed[1 - side_]) {
      return base::RemoteError(where + ": the peer closed the connection").WithOrigin(peer_.rank, where);
    }
    return Status();
  }

  void DoClose() {
    const std::string msg = "rank " + std::to_string(ch_->ranks[side_]) + " closed its communicator";
    DoAbort(base::RemoteError(msg).WithOrigin(ch_->ranks[side_], msg, kAfterEveryCollective), ch_->ranks[side_],
            kAfterEveryCollective);
  }

  void DoAbort(const Status& why, int self_rank, uint64_t seq) {
    WriteFaultNotice(ch_->notice[side_], why, self_rank, seq);
    std::lock_guard<std::mutex> lock(ch_->mu);
    ch_->closed[side_] = true;
  }

  std::shared_ptr<Channel> ch_;
  int side_;
  PeerName peer_;
  std::deque<std::unique_ptr<FakeRequest>> requests_;
};

class FakeSend : public SendConnection, private FakeConnection {
 public:
  explicit FakeSend(std::shared_ptr<Channel> ch) : FakeConnection(std::move(ch), 0) {}
  StatusOr<std::unique_ptr<MemoryRegion>> Register(void*, size_t, MemoryKind) override {
    return std::unique_ptr<MemoryRegion>();
  }
  StatusOr<Request*> Isend(const void* data, size_t bytes, MemoryRegion*) override {
    std::lock_guard<std::mutex> lock(ch_->mu);
    RETURN_IF_ERROR(PeerState());
    if (requests_.size() >= 8) return static_cast<Request*>(nullptr);
    const char* p = static_cast<const char*>(data);
    ch_->messages.emplace_back(p, p + bytes);
    auto r = std::make_unique<FakeRequest>();
    r->bytes = bytes;
    r->done = true;
    requests_.push_back(std::move(r));
    return static_cast<Request*>(requests_.back().get());
  }
  Status Test(Request* request, bool* done, size_t* bytes) override {
    std::lock_guard<std::mutex> lock(ch_->mu);
    RETURN_IF_ERROR(PeerState());
    for (auto it = requests_.begin(); it != requests_.end(); ++it) {
      if (it->get() != request) continue;
      *done = true;
      *bytes = (*it)->bytes;
      requests_.erase(it);
      return Status();
    }
    return base::Internal("unknown request");
  }
  void PollFds(std::vector<int>*, std::vector<short>*) const override {}
  void Abort(const Status& why, int self_rank, uint64_t seq) override { DoAbort(why, self_rank, seq); }
  void Close() override { DoClose(); }
  const PeerName& peer() const override { return peer_; }
};

class FakeRecv : public RecvConnection, private FakeConnection {
 public:
  explicit FakeRecv(std::shared_ptr<Channel> ch) : FakeConnection(std::move(ch), 1) {}
  StatusOr<std::unique_ptr<MemoryRegion>> Register(void*, size_t, MemoryKind) override {
    return std::unique_ptr<MemoryRegion>();
  }
  StatusOr<Request*> Irecv(void* data, size_t bytes, MemoryRegion*) override {
    std::lock_guard<std::mutex> lock(ch_->mu);
    if (requests_.size() >= 8) return static_cast<Request*>(nullptr);
    auto r = std::make_unique<FakeRequest>();
    r->data = static_cast<char*>(data);
    r->capacity = bytes;
    requests_.push_back(std::move(r));
    return static_cast<Request*>(requests_.back().get());
  }
  Status Test(Request* request, bool* done, size_t* bytes) override {
    std::lock_guard<std::mutex> lock(ch_->mu);
    *done = false;
    // Complete the posted receives in order with the queued messages.
    for (auto& r : requests_) {
      if (r->done) continue;
      if (ch_->messages.empty()) break;
      std::vector<char>& m = ch_->messages.front();
      if (m.size() > r->capacity) {
        return base::RemoteError("a message of " + std::to_string(m.size()) + " bytes for a receive of " +
                                 std::to_string(r->capacity))
            .WithOrigin(peer_.rank, "an oversized message");
      }
      if (!m.empty()) std::memcpy(r->data, m.data(), m.size());
      r->bytes = m.size();
      r->done = true;
      ch_->messages.pop_front();
    }
    for (auto it = requests_.begin(); it != requests_.end(); ++it) {
      if (it->get() != request) continue;
      if ((*it)->done) {
        *done = true;
        *bytes = (*it)->bytes;
        requests_.erase(it);
        return Status();
      }
      return PeerState();  // nothing more will come from a peer that went
    }
    return base::Internal("unknown request");
  }
  void PollFds(std::vector<int>*, std::vector<short>*) const override {}
  void Abort(const Status& why, int self_rank, uint64_t seq) override { DoAbort(why, self_rank, seq); }
  void Close() override { DoClose(); }
  const PeerName& peer() const override { return peer_; }
};

// Listeners by id, for Connect to find.
struct Registry {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t next_id = 1;
  std::map<uint64_t, std::deque<std::shared_ptr<Channel>>> arrived;  // by listener id
  std::map<uint64_t, ConnectOptions> listening;
};

Registry& GetRegistry() {
  static Registry* r = new Registry();
  return *r;
}

class FakeListener : public Listener {
 public:
  FakeListener(uint64_t id, ConnectOptions options) : id_(id), options_(options) {}
  ~FakeListener() override {
    Registry& r = GetRegistry();
    std::lock_guard<std::mutex> lock(r.mu);
    r.listening.erase(id_);
    r.arrived.erase(id_);
  }
  StatusOr<std::unique_ptr<RecvConnection>> Accept(int peer_rank, Deadline deadline) override {
    Registry& r = GetRegistry();
    std::unique_lock<std::mutex> lock(r.mu);
    while (true) {
      auto& q = r.arrived[id_];
      while (!q.empty()) {
        std::shared_ptr<Channel> ch = q.front();
        q.pop_front();
        if (ch->ranks[0] == peer_rank) return std::unique_ptr<RecvConnection>(new FakeRecv(ch));
      }
      if (r.cv.wait_until(lock, deadline) == std::cv_status::timeout) {
        return base::Timeout("rank " + std::to_string(options_.self_rank) + " waiting for rank " +
                             std::to_string(peer_rank) + " to connect");
      }
    }
  }

 private:
  uint64_t id_;
  ConnectOptions options_;
};

class FakeNet : public Net {
 public:
  const char* name() const override { return "fake"; }
  int DeviceCount() const override { return 1; }
  StatusOr<NetProperties> Properties(int device) const override {
    if (device != 0) return base::InvalidArgument("fake device " + std::to_string(device));
    NetProperties p;
    p.name = "fake0";
    p.max_requests = 8;
    return p;
  }
  StatusOr<std::unique_ptr<Listener>> Listen(int device, const ConnectOptions& options, NetHandle* handle) override {
    if (device != 0) return base::InvalidArgument("fake device " + std::to_string(device));
    Registry& r = GetRegistry();
    std::lock_guard<std::mutex> lock(r.mu);
    const uint64_t id = r.next_id++;
    r.listening[id] = options;
    *handle = NetHandle();
    std::memcpy(handle->bytes, &id, sizeof(id));
    return std::unique_ptr<Listener>(new FakeListener(id, options));
  }
  StatusOr<std::unique_ptr<SendConnection>> Connect(int device, const NetHandle& handle, const ConnectOptions& options,
                                                    Deadline) override {
    if (device != 0) return base::InvalidArgument("fake device " + std::to_string(device));
    uint64_t id = 0;
    std::memcpy(&id, handle.bytes, sizeof(id));
    Registry& r = GetRegistry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.listening.find(id);
    if (it == r.listening.end() || it->second.tag != options.tag || it->second.self_rank != options.peer_rank) {
      return base::RemoteError("rank " + std::to_string(options.self_rank) + " connecting to rank " +
                               std::to_string(options.peer_rank) + ": no such listener");
    }
    auto ch = std::make_shared<Channel>();
    ch->ranks[0] = options.self_rank;
    ch->ranks[1] = options.peer_rank;
    r.arrived[id].push_back(ch);
    r.cv.notify_all();
    return std::unique_ptr<SendConnection>(new FakeSend(ch));
  }
};

}  // namespace

std::unique_ptr<Net> MakeFakeNet() { return std::make_unique<FakeNet>(); }

}  // namespace ringo::transport::net
