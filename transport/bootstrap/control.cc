#include "transport/bootstrap/control.h"

#include <exception>

#include "base/logging.h"
#include "transport/bootstrap/exchange.h"

namespace ringo::transport {
namespace {

constexpr uint64_t kIdMask = (uint64_t{1} << 48) - 1;
// How long the service tries to hand an answer back (a stopped asker's
// connection may not drain).
constexpr int64_t kReplyDeadlineMs = 2000;

// An answer's first byte: whether a handler answered.
constexpr char kAnswered = 'A';
constexpr char kNoHandler = 'N';

}  // namespace

ControlService::ControlService(MessageFabric* fabric) : fabric_(fabric) {
  thread_ = std::thread([this] { Serve(); });
}

ControlService::~ControlService() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ControlService::Register(uint64_t context, ControlKind kind, Handler handler) {
  std::lock_guard<std::mutex> lock(mu_);
  handlers_[{context, kind}] = std::move(handler);
}

void ControlService::Unregister(uint64_t context, ControlKind kind) {
  std::unique_lock<std::mutex> lock(mu_);
  handlers_.erase({context, kind});
  idle_cv_.wait(lock, [&] { return !busy_ || running_ != std::make_pair(context, kind); });
}

void ControlService::Deliver(int src, uint64_t context, uint64_t tag, std::string data) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    queue_.push_back(Request{src, context, tag, std::move(data)});
  }
  cv_.notify_one();
}

void ControlService::Serve() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    Request req = std::move(queue_.front());
    queue_.pop_front();
    const auto kind = static_cast<ControlKind>((req.tag >> 48) & 0xff);
    auto it = handlers_.find({req.context, kind});
    std::string answer(1, kNoHandler);
    if (it != handlers_.end()) {
      Handler handler = it->second;  // a copy: Unregister may erase it meanwhile
      running_ = {req.context, kind};
      busy_ = true;
      lock.unlock();
      try {
        answer = std::string(1, kAnswered) + handler(req.src, req.data);
      } catch (const std::exception& e) {
        RINGO_LOG(WARN) << "control service of rank " << fabric_->rank() << ": a handler failed: " << e.what();
        answer = std::string(1, kNoHandler);
      }
      lock.lock();
      busy_ = false;
      idle_cv_.notify_all();
    }
    lock.unlock();
    if ((req.tag & kIdMask) == 0) {  // a Tell: nobody waits for the answer
      lock.lock();
      continue;
    }
    const base::Status sent = fabric_->Send(req.src, req.context, kTagControlReply | (req.tag & kIdMask),
                                            answer.data(), answer.size(), DeadlineAfterMs(kReplyDeadlineMs));
    if (!sent.ok()) {
      RINGO_LOG(INFO) << "control service of rank " << fabric_->rank() << ": no answer reached rank " << req.src
                      << ": " << sent.message();
    }
    lock.lock();
  }
}

namespace {

base::StatusOr<std::string> Unwrap(int dst, std::string answer) {
  if (answer.empty() || answer[0] != kAnswered) {
    return base::RemoteError("rank " + std::to_string(dst) +
                             " has no answer to this request (no such communicator there)");
  }
  return answer.substr(1);
}

}  // namespace

base::Status ControlService::Tell(int dst, uint64_t context, ControlKind kind, const std::string& request,
                                  Deadline deadline) {
  const uint64_t tag = kTagControlRequest | (static_cast<uint64_t>(kind) << 48);  // id 0: no answer
  return fabric_->Send(dst, context, tag, request.data(), request.size(), deadline);
}

std::vector<base::StatusOr<std::string>> ControlService::AskAll(const std::vector<int>& dsts, uint64_t context,
                                                                ControlKind kind, const std::string& request,
                                                                Deadline deadline) {
  std::vector<base::StatusOr<std::string>> out;
  std::vector<uint64_t> ids(dsts.size(), 0);
  std::vector<base::Status> sent(dsts.size());
  for (size_t i = 0; i < dsts.size(); ++i) {
    ids[i] = (next_id_.fetch_add(1) + 1) & kIdMask;
    if (ids[i] == 0) ids[i] = 1;
    const uint64_t tag = kTagControlRequest | (static_cast<uint64_t>(kind) << 48) | ids[i];
    sent[i] = fabric_->Send(dsts[i], context, tag, request.data(), request.size(), deadline);
  }
  for (size_t i = 0; i < dsts.size(); ++i) {
    if (!sent[i].ok()) {
      out.emplace_back(sent[i]);
      continue;
    }
    std::string answer;
    const base::Status got = fabric_->Recv(dsts[i], context, kTagControlReply | ids[i], &answer, deadline, nullptr);
    if (!got.ok()) {
      out.emplace_back(got);
      continue;
    }
    out.emplace_back(Unwrap(dsts[i], std::move(answer)));
  }
  return out;
}

base::StatusOr<std::string> ControlService::Ask(int dst, uint64_t context, ControlKind kind,
                                                const std::string& request, Deadline deadline,
                                                const std::atomic<bool>* abort) {
  uint64_t id = (next_id_.fetch_add(1) + 1) & kIdMask;
  if (id == 0) id = 1;  // 0 means a Tell
  const uint64_t tag = kTagControlRequest | (static_cast<uint64_t>(kind) << 48) | id;
  RETURN_IF_ERROR(fabric_->Send(dst, context, tag, request.data(), request.size(), deadline));
  std::string answer;
  RETURN_IF_ERROR(fabric_->Recv(dst, context, kTagControlReply | id, &answer, deadline, abort));
  return Unwrap(dst, std::move(answer));
}

}  // namespace ringo::transport
