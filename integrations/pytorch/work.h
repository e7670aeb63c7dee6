// Asynchronous operations on host memory: a Work per operation and the one
// worker thread per process group that runs them in issue order, as
// ProcessGroupGloo does. wait(), isCompleted(), exception() and result() are
// c10d's (the base class's) over the state set here; getFuture() returns a
// future completed with the output tensors (or the error) before the Work
// itself completes, as gloo's, which is what DDP's buckets wait on.
//
// Sends and receives (isend/irecv, recv from any source) wait in the queue
// until something needs one of them (its wait(), isCompleted() or
// getFuture()) or another operation is queued behind them; then the worker
// runs every send and receive queued together: the sends first, then the
// receives, in the order posted. They are Ringo's tagged calls (gloo's
// matching: a receive takes the first send with its tag from its source, or
// from any rank), and a tagged send returns once posted while taking in
// what arrives meanwhile, so an irecv posted before its isend on both ranks
// does not deadlock.
#ifndef RINGO_INTEGRATIONS_PYTORCH_WORK_H_
#define RINGO_INTEGRATIONS_PYTORCH_WORK_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "integrations/pytorch/comm.h"
#include "integrations/pytorch/ops.h"
#include "integrations/pytorch/torch_compat.h"

namespace ringo::pytorch {

class Worker;

class HostWork : public WorkBase {
 public:
  // `title` is what the profiler shows ("ringo:all_reduce"); `inputs` are
  // recorded with it; `outputs` are the future's value and result().
  HostWork(int rank, c10d::OpType type, const char* title, std::vector<at::Tensor> inputs,
           std::vector<at::Tensor> outputs, Body body);
#if RINGO_TORCH_P2P
  // A send or receive, batched with its neighbours in the queue.
  HostWork(int rank, c10d::OpType type, const char* title, std::vector<at::Tensor> inputs,
           std::vector<at::Tensor> outputs, P2pIssue issue);
#endif

  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  bool wait(std::chrono::milliseconds timeout) override;
  bool isCompleted() override;

  // Runs the body on `comm`, then completes the future and the Work, with the
  // exception when the body (or `error`, a failure to set up the
  // communicator) failed. Called once, by the worker thread.
  void Run(Comm* comm, std::exception_ptr error);
  // Runs a batch of point-to-point Works as one Ringo group. Worker thread.
  static void RunBatch(const std::vector<c10::intrusive_ptr<HostWork>>& batch, Comm* comm,
                       std::exception_ptr error);

  bool p2p() const { return p2p_; }
  // A CPU receive: where its issue writes the sender.
  void SetSource(std::shared_ptr<std::atomic<int>> source) { source_ = std::move(source); }
  // The sender of a CPU receive (from any source: once completed); c10d's
  // error for any other Work.
  int sourceRank() const override;
  // Runs even on a communicator that failed earlier (a shrink after a
  // failure); set before Post.
  void RunOnFailedCommunicator() { on_failed_ = true; }
  bool wanted() const { return wanted_.load(); }

 private:
  friend class Worker;
  void Complete(std::exception_ptr error);
  void Want();  // something needs this Work: its batch may run

  const std::string title_;
  std::vector<at::Tensor> outputs_;
  Body body_;
  bool p2p_ = false;
  bool on_failed_ = false;
#if RINGO_TORCH_P2P
  P2pIssue issue_;
#endif
  std::atomic<bool> wanted_{false};
  std::shared_ptr<std::atomic<int>> source_;
  Worker* worker_ = nullptr;  // set by Worker::Post
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// One thread running posted Works in order on the group's host communicator.
class Worker {
 public:
  using Connect = std::function<std::unique_ptr<Comm>()>;

  // `connect` makes the host communicator: now, on the caller's thread, when
  // `eager` (its exception propagates), else on the worker thread before the
  // first Work (its exception fails that Work and every later one).
  Worker(Connect connect, bool eager);
  // Runs what is queued, then stops the thread and releases the communicator.
  ~Worker();

  void Post(c10::intrusive_ptr<HostWork> work);
  // A Work's batch is wanted: wakes the thread.
  void Poke();

 private:
  void Loop();
  // Whether the front of the queue may run (GUARDED_BY(mu_)).
  bool FrontReady() const;

  Connect connect_;
  std::unique_ptr<Comm> comm_;     // owned by the worker thread once it runs
  std::exception_ptr comm_error_;  // worker thread only
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<HostWork>> queue_;  // GUARDED_BY(mu_)
  bool stop_ = false;                               // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace ringo::pytorch

#endif  // RINGO_INTEGRATIONS_PYTORCH_WORK_H_
