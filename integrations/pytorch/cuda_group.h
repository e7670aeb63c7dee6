// CUDA tensors (PyTorch 2.x built with CUDA; compiled only with
// RINGO_TORCH_CUDA): each device gets a Ringo GPU communicator and a stream of
// its own, with ProcessGroupNCCL's stream semantics. An operation's Ringo
// stream first waits for the caller's current stream, runs the collective
// (and any copies) there, and records an end event; the Work's wait() makes
// the caller's current stream wait for that event (the host does not block),
// and its future completes on the Ringo stream (c10's CUDA futures then sync
// the consumer's streams). Tensors used are recorded on the Ringo stream with
// the caching allocator, so freeing them early is safe.
//
// Thread safety: Launch and Synchronize may be called from any thread; calls
// for one device are serialised (a Ringo communicator is used by one thread at
// a time).
#ifndef RINGO_INTEGRATIONS_PYTORCH_CUDA_GROUP_H_
#define RINGO_INTEGRATIONS_PYTORCH_CUDA_GROUP_H_

#include "integrations/pytorch/torch_compat.h"

#ifdef RINGO_TORCH_CUDA

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "integrations/pytorch/comm.h"
#include "integrations/pytorch/ops.h"

namespace ringo::pytorch {

class CudaWork : public WorkBase {
 public:
  CudaWork(int rank, c10d::OpType type, const char* title, std::vector<at::Tensor> inputs,
           std::vector<at::Tensor> outputs, std::shared_ptr<Comm> comm, c10::Device device);

  // True once the Ringo stream has passed the operation, or the communicator
  // reports an asynchronous error (a peer failed or timed out).
  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  // The caller's current stream waits for the operation; throws the
  // communicator's asynchronous error if it has one. `timeout` bounds nothing
  // here (the communicator's timeout does), as with ProcessGroupNCCL's
  // default non-blocking wait.
  bool wait(std::chrono::milliseconds timeout) override;
  void synchronize() override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  friend class CudaGroup;
  std::exception_ptr AsyncFailure() const;

  std::vector<at::Tensor> outputs_;
  std::shared_ptr<Comm> comm_;
  c10::Device device_;
  at::cuda::CUDAEvent end_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class CudaGroup {
 public:
  CudaGroup(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
            std::chrono::milliseconds timeout);

  // Runs `body` for tensors on `device` as described above. The first call for
  // a device creates its communicator (collective: every rank's first call on
  // CUDA tensors makes it). Throws when Ringo refuses the operation.
  WorkPtr Launch(c10d::OpType type, const char* title, const std::vector<at::Tensor>& inputs,
                 std::vector<at::Tensor> outputs, const Body& body, c10::Device device);

  // Blocks the host until every device's Ringo stream is idle (barrier).
  void Synchronize();

 private:
  struct PerDevice {
    std::shared_ptr<Comm> comm;
    c10::cuda::CUDAStream stream;
    std::mutex mu;  // one thread at a time on the communicator
  };
  PerDevice& Get(c10::DeviceIndex index);

  c10::intrusive_ptr<c10d::Store> store_;
  const int rank_;
  const int size_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::map<c10::DeviceIndex, std::unique_ptr<PerDevice>> devices_;  // GUARDED_BY(mu_)
};

}  // namespace ringo::pytorch

#endif  // RINGO_TORCH_CUDA
#endif  // RINGO_INTEGRATIONS_PYTORCH_CUDA_GROUP_H_
