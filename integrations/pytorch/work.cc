#include "integrations/pytorch/work.h"

#include <utility>

namespace ringo::pytorch {

HostWork::HostWork(int rank, c10d::OpType type, const char* title, std::vector<at::Tensor> inputs,
                   std::vector<at::Tensor> outputs, Body body)
    : WorkBase(rank, type, title, std::move(inputs)),
      title_(title),
      outputs_(std::move(outputs)),
      body_(std::move(body)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

#if RINGO_TORCH_P2P
HostWork::HostWork(int rank, c10d::OpType type, const char* title, std::vector<at::Tensor> inputs,
                   std::vector<at::Tensor> outputs, P2pIssue issue)
    : HostWork(rank, type, title, std::move(inputs), std::move(outputs), Body()) {
  p2p_ = true;
  issue_ = std::move(issue);
}
#endif

void HostWork::Want() {
  if (!p2p_ || wanted_.exchange(true)) return;
  if (worker_ != nullptr) worker_->Poke();
}

c10::intrusive_ptr<c10::ivalue::Future> HostWork::getFuture() {
  Want();
  return future_;
}

bool HostWork::wait(std::chrono::milliseconds timeout) {
  Want();
  return WorkBase::wait(timeout);
}

bool HostWork::isCompleted() {
  Want();
  return WorkBase::isCompleted();
}

void HostWork::Run(Comm* comm, std::exception_ptr error) {
  if (!error) {
    try {
      if (!on_failed_) comm->CheckUsable(title_.c_str());
      comm->Label(title_.c_str());
      body_(RunContext{comm, nullptr});
    } catch (...) {
      error = std::current_exception();
    }
  }
  Complete(error);
}

int HostWork::sourceRank() const {
  if (source_ == nullptr) return WorkBase::sourceRank();  // c10d's error
  return source_->load();
}

void HostWork::RunBatch(const std::vector<c10::intrusive_ptr<HostWork>>& batch, Comm* comm,
                        std::exception_ptr error) {
  // Each Work completes with its own outcome, as gloo's: one that failed
  // does not fail the others (after a fatal failure they fail too, the
  // communicator refusing them).
  std::vector<std::exception_ptr> errors(batch.size(), error);
#if RINGO_TORCH_P2P
  if (!error) {
    // The sends, then the receives: a send returns once posted, so each
    // receive's match is on its way whatever order the ranks posted in.
    for (const bool sends : {true, false}) {
      for (size_t i = 0; i < batch.size(); ++i) {
        const auto& w = batch[i];
        if ((w->retrieveOpType() == c10d::OpType::SEND) != sends) continue;
        try {
          comm->CheckUsable(w->title_.c_str());
          comm->Label(w->title_.c_str());
          ringoResult_t rc = ringoSuccess;
          std::function<void()> finish = w->issue_(RunContext{comm, nullptr}, &rc);
          comm->Check(rc, w->title_.c_str());
          finish();
        } catch (...) {
          errors[i] = std::current_exception();
        }
      }
    }
  }
#endif
  for (size_t i = 0; i < batch.size(); ++i) batch[i]->Complete(errors[i]);
}

void HostWork::Complete(std::exception_ptr error) {
  body_ = nullptr;  // drop the body's tensor references now, not with the Work
#if RINGO_TORCH_P2P
  issue_ = nullptr;
#endif
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
  finish(error);
}

Worker::Worker(Connect connect, bool eager) : connect_(std::move(connect)) {
  if (eager) comm_ = connect_();
  thread_ = std::thread([this] { Loop(); });
}

Worker::~Worker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  comm_.reset();
}

void Worker::Post(c10::intrusive_ptr<HostWork> work) {
  work->worker_ = this;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(work));
  }
  cv_.notify_one();
}

void Worker::Poke() {
  { std::lock_guard<std::mutex> lock(mu_); }  // the waiter sees the want after this
  cv_.notify_one();
}

bool Worker::FrontReady() const {
  if (queue_.empty()) return false;
  if (stop_ || !queue_.front()->p2p()) return true;
  // A run of sends and receives goes when one of them is wanted or
  // something else is queued behind it.
  for (const auto& w : queue_) {
    if (!w->p2p() || w->wanted()) return true;
  }
  return false;
}

void Worker::Loop() {
  for (;;) {
    std::vector<c10::intrusive_ptr<HostWork>> batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return (stop_ && queue_.empty()) || FrontReady(); });
      if (queue_.empty()) return;  // stopping, and everything posted has run
      const bool p2p = queue_.front()->p2p();
      do {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      } while (p2p && !queue_.empty() && queue_.front()->p2p());
    }
    if (!comm_ && !comm_error_) {
      try {
        comm_ = connect_();
      } catch (...) {
        comm_error_ = std::current_exception();
      }
    }
    if (batch.front()->p2p()) {
      HostWork::RunBatch(batch, comm_.get(), comm_error_);
    } else {
      batch.front()->Run(comm_.get(), comm_error_);
    }
  }
}

}  // namespace ringo::pytorch
