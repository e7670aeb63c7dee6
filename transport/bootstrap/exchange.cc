#include "transport/bootstrap/exchange.h"

#include <algorithm>
#include <cstring>

namespace ringo::transport {

using base::Status;
using base::StatusOr;

Status Exchange::Barrier() {
  std::vector<char> all(nranks());
  char mine = 0;
  return AllGather(&mine, 1, all.data());
}

Status Exchange::Send(int, uint64_t, const void*, size_t) {
  return base::Internal("this exchange carries no point-to-point messages");
}

Status Exchange::Recv(int, uint64_t, std::string*, Deadline, const std::atomic<bool>*) {
  return base::Internal("this exchange carries no point-to-point messages");
}

StatusOr<std::unique_ptr<Exchange>> Exchange::Subgroup(uint64_t, const std::vector<int>&) {
  return base::Internal("this exchange has no subgroups");
}

Status AgreeOk(Exchange& exchange, const Status& mine, const std::string& what) {
  char ok = mine.ok() ? 1 : 0;
  std::vector<char> all(exchange.nranks());
  Status gathered = exchange.AllGather(&ok, 1, all.data());
  if (!mine.ok()) return mine;
  RETURN_IF_ERROR(gathered);
  for (int r = 0; r < exchange.nranks(); ++r) {
    if (!all[r]) return base::RemoteError("rank " + std::to_string(r) + " could not " + what);
  }
  return base::OkStatus();
}

// ---- Mailbox ----

void Mailbox::SetControlSink(ControlService* sink) {
  std::lock_guard<std::mutex> lock(mu_);
  sink_ = sink;
}

void Mailbox::Put(int src, uint64_t context, uint64_t tag, std::string data) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (IsControlRequest(tag)) {
      // Delivered under the lock, so that a sink being removed is never
      // called afterwards; Deliver only queues.
      if (sink_ != nullptr) sink_->Deliver(src, context, tag, std::move(data));
      return;
    }
    queued_[Key(src, context, tag)].push_back(std::move(data));
  }
  cv_.notify_all();
}

void Mailbox::MarkGone(int src, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    gone_.emplace(src, why);
  }
  cv_.notify_all();
}

void Mailbox::WakeAll() { cv_.notify_all(); }

Status Mailbox::Take(int src, uint64_t context, uint64_t tag, std::string* data, Deadline deadline,
                     const std::atomic<bool>* abort, int self_rank) {
  std::unique_lock<std::mutex> lock(mu_);
  const Key key(src, context, tag);
  while (true) {
    auto it = queued_.find(key);
    if (it != queued_.end() && !it->second.empty()) {
      *data = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) queued_.erase(it);
      return Status();
    }
    auto gone = gone_.find(src);
    if (gone != gone_.end()) {
      return base::RemoteError("rank " + std::to_string(self_rank) + " waiting for a message from rank " +
                               std::to_string(src) + ": " + gone->second)
          .WithOrigin(src, gone->second);
    }
    if (abort != nullptr && abort->load(std::memory_order_relaxed)) {
      return base::InvalidUsage("the communicator was aborted");
    }
    const Deadline now = Clock::now();
    if (now >= deadline) {
      return base::Timeout("rank " + std::to_string(self_rank) + " waited for a message from rank " +
                           std::to_string(src) + " in vain")
          .WithOrigin(src, "it never answered rank " + std::to_string(self_rank));
    }
    // Wakes at least every 50 ms to see an abort raised without a notify.
    cv_.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(50)));
  }
}

// ---- LocalFabric ----

namespace {

class LocalView : public MessageFabric {
 public:
  LocalView(std::shared_ptr<LocalFabric> fabric, int rank)
      : fabric_(std::move(fabric)), rank_(rank), control_(std::make_unique<ControlService>(this)) {
    fabric_->mailbox(rank_).SetControlSink(control_.get());
  }
  ~LocalView() override {
    fabric_->mailbox(rank_).SetControlSink(nullptr);
    control_.reset();
  }
  ControlService& control() override { return *control_; }
  int rank() const override { return rank_; }
  int nranks() const override { return fabric_->nranks(); }
  Status Send(int dst, uint64_t context, uint64_t tag, const void* data, size_t bytes, Deadline) override {
    if (dst < 0 || dst >= fabric_->nranks()) return base::Internal("message to rank " + std::to_string(dst));
    fabric_->mailbox(dst).Put(rank_, context, tag, std::string(static_cast<const char*>(data), bytes));
    return Status();
  }
  Status Recv(int src, uint64_t context, uint64_t tag, std::string* data, Deadline deadline,
              const std::atomic<bool>* abort) override {
    return fabric_->mailbox(rank_).Take(src, context, tag, data, deadline, abort, rank_);
  }

 private:
  std::shared_ptr<LocalFabric> fabric_;
  int rank_;
  std::unique_ptr<ControlService> control_;
};

}  // namespace

std::shared_ptr<MessageFabric> LocalFabric::View(const std::shared_ptr<LocalFabric>& fabric, int rank) {
  return std::make_shared<LocalView>(fabric, rank);
}

Mailbox& LocalFabric::mailbox(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& box = boxes_[rank];
  if (!box) box = std::make_unique<Mailbox>();
  return *box;
}

// ---- FabricExchange ----

FabricExchange::FabricExchange(std::shared_ptr<MessageFabric> fabric, uint64_t context, std::vector<int> members,
                               int64_t timeout_ms)
    : fabric_(std::move(fabric)), context_(context), members_(std::move(members)), timeout_ms_(timeout_ms) {
  for (size_t i = 0; i < members_.size(); ++i) {
    if (members_[i] == fabric_->rank()) rank_ = static_cast<int>(i);
  }
}

Status FabricExchange::Send(int peer, uint64_t tag, const void* data, size_t bytes) {
  if (peer < 0 || peer >= nranks()) return base::Internal("message to member " + std::to_string(peer));
  return fabric_->Send(members_[peer], context_, tag, data, bytes, DeadlineAfterMs(timeout_ms_));
}

Status FabricExchange::Recv(int peer, uint64_t tag, std::string* data, Deadline deadline,
                            const std::atomic<bool>* abort) {
  if (peer < 0 || peer >= nranks()) return base::Internal("message from member " + std::to_string(peer));
  Status st = fabric_->Recv(members_[peer], context_, tag, data, deadline, abort);
  if (st.ok() || members_[peer] == peer) return st;
  // The fabric names its own ranks; say which member that is here.
  return Status(st.code(), st.message() + " (rank " + std::to_string(peer) + " of this communicator)");
}

Status FabricExchange::AllGather(const void* mine, size_t bytes, void* all) {
  const uint64_t tag = kTagAllGather | ++gathers_;
  const int n = nranks();
  const Deadline deadline = DeadlineAfterMs(timeout_ms_);
  if (rank_ != 0) {
    RETURN_IF_ERROR(Send(0, tag, mine, bytes));
    std::string result;
    RETURN_IF_ERROR(Recv(0, tag, &result, deadline));
    if (result.size() != bytes * static_cast<size_t>(n)) {
      return base::RemoteError("all-gather: rank 0 sent " + std::to_string(result.size()) + " bytes, expected " +
                               std::to_string(bytes * static_cast<size_t>(n)));
    }
    if (!result.empty()) std::memcpy(all, result.data(), result.size());
    return Status();
  }
  std::string result(bytes * static_cast<size_t>(n), '\0');
  if (bytes > 0) std::memcpy(result.data(), mine, bytes);
  Status st;
  for (int r = 1; r < n && st.ok(); ++r) {
    std::string part;
    st = Recv(r, tag, &part, deadline);
    if (st.ok() && part.size() != bytes) {
      st = base::InvalidUsage("all-gather: rank " + std::to_string(r) + " sent " + std::to_string(part.size()) +
                              " bytes, rank 0 " + std::to_string(bytes));
    }
    if (st.ok() && bytes > 0) std::memcpy(&result[static_cast<size_t>(r) * bytes], part.data(), bytes);
  }
  RETURN_IF_ERROR(st);
  for (int r = 1; r < n; ++r) RETURN_IF_ERROR(Send(r, tag, result.data(), result.size()));
  if (!result.empty()) std::memcpy(all, result.data(), result.size());
  return Status();
}

StatusOr<std::unique_ptr<Exchange>> FabricExchange::Subgroup(uint64_t context, const std::vector<int>& members) {
  std::vector<int> fabric_ranks;
  for (int m : members) {
    if (m < 0 || m >= nranks()) return base::Internal("subgroup member " + std::to_string(m));
    fabric_ranks.push_back(members_[m]);
  }
  if (std::find(members.begin(), members.end(), rank_) == members.end()) {
    return base::Internal("a subgroup must include the rank that makes it");
  }
  return std::unique_ptr<Exchange>(new FabricExchange(fabric_, context, std::move(fabric_ranks), timeout_ms_));
}

uint64_t ChildContext(uint64_t parent, uint64_t split_seq, int color) {
  uint64_t h = parent ^ 0x9e3779b97f4a7c15ull;
  for (uint64_t v : {split_seq, static_cast<uint64_t>(static_cast<uint32_t>(color))}) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
  }
  return h == 0 ? 1 : h;
}

}  // namespace ringo::transport
