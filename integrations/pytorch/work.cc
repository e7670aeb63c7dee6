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

void HostWork::Run(Comm* comm, std::exception_ptr error) {
  if (!error) {
    try {
      comm->CheckUsable(title_.c_str());
      body_(RunContext{comm, nullptr});
    } catch (...) {
      error = std::current_exception();
    }
  }
  body_ = nullptr;  // drop the body's tensor references now, not with the Work
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(work));
  }
  cv_.notify_one();
}

void Worker::Loop() {
  for (;;) {
    c10::intrusive_ptr<HostWork> work;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything posted has run
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    if (!comm_ && !comm_error_) {
      try {
        comm_ = connect_();
      } catch (...) {
        comm_error_ = std::current_exception();
      }
    }
    work->Run(comm_.get(), comm_error_);
  }
}

}  // namespace ringo::pytorch
