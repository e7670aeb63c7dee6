// ProcessGroupRingo: torch.distributed's backend "ringo" over Ringo's public
// C API. A c10d::ProcessGroup with PyTorch 1.x, a c10d::Backend with 2.x
// (torch_compat.h).
//
// Host (CPU) tensors: every operation is checked on the caller's thread, then
// queued to the group's worker thread, which runs them in issue order on the
// group's host communicator; the returned Work behaves as gloo's (work.h).
// CUDA tensors (2.x with RINGO_TORCH_CUDA): run on Ringo's GPU communicators
// on a Ringo stream per device (cuda_group.h).
//
// The timeout given at construction (init_process_group's or new_group's)
// becomes every communicator's: a peer that dies or stops makes the operation
// fail with a RuntimeError naming it within that time, on every rank. The
// per-operation timeouts of c10d's options are not used.
//
// Thread safety: as c10d's: any thread may issue operations; each rank must
// issue the same operations in the same order.
#ifndef RINGO_INTEGRATIONS_PYTORCH_PROCESS_GROUP_H_
#define RINGO_INTEGRATIONS_PYTORCH_PROCESS_GROUP_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "integrations/pytorch/cuda_group.h"
#include "integrations/pytorch/ops.h"
#include "integrations/pytorch/torch_compat.h"
#include "integrations/pytorch/work.h"

namespace ringo::pytorch {

class ProcessGroupRingo : public GroupBase {
 public:
  // With 1.x the host communicator is made here (collective over the group's
  // ranks: every rank constructs its group); with 2.x, where the same object
  // may serve only CUDA tensors, on the first host operation.
  ProcessGroupRingo(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                    std::chrono::milliseconds timeout);
  // A group over a host communicator made already (Shrink's child).
  ProcessGroupRingo(const c10::intrusive_ptr<c10d::Store>& store, std::unique_ptr<Comm> comm,
                    std::chrono::milliseconds timeout);

  // The survivors' group, in the same processes: every surviving rank calls
  // it (after an operation failed because a rank died or stopped, or to
  // leave none out); they agree on the lost ranks over this group's control
  // connections (ringoCommAgreeFailed) and shrink its host communicator
  // (ringoCommShrink, RINGO_SHRINK_ABORT), renumbered in order. This group
  // stays failed; the new one shares its store (which must outlive a lost
  // rank: a FileStore, or a TCPStore not hosted by it). Host tensors; with
  // PyTorch 1.x. Blocking.
  c10::intrusive_ptr<ProcessGroupRingo> Shrink();

  // The host communicator's wire format between hosts (ringoCommSetWire, a
  // ringoWire_t), in order with the operations queued before it: every
  // rank sets the same. Blocking.
  void SetWire(int wire);
  // What this rank's `input` (a CPU tensor) amounts to once sent in the
  // wire as its contribution to an all-reduce with `op`
  // (ringoCommWireRound): input - result is what the wire loses of it, for
  // error feedback. Blocking.
  at::Tensor WireRound(const at::Tensor& input, const c10d::ReduceOp& op);
  // A sum all-reduce of `tensor` (CPU, contiguous) with error feedback, in
  // order with the group's other operations: adds `residual` to it, keeps
  // in `residual` what the wire will lose of it (ringoCommWireRound), then
  // all-reduces it. For a DDP communication hook: nothing blocks the caller.
  WorkPtr AllReduceWithFeedback(at::Tensor tensor, at::Tensor residual);
  ~ProcessGroupRingo() override;

  const std::string getBackendName() const override { return "ringo"; }

  WorkPtr broadcast(std::vector<at::Tensor>& tensors,
                    const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override;
  WorkPtr allreduce(std::vector<at::Tensor>& tensors,
                    const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;
  WorkPtr allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts = c10d::AllreduceCoalescedOptions()) override;
  WorkPtr reduce(std::vector<at::Tensor>& tensors,
                 const c10d::ReduceOptions& opts = c10d::ReduceOptions()) override;
  WorkPtr allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                    const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  WorkPtr _allgather_base(at::Tensor& output, at::Tensor& input,
                          const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  WorkPtr reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  WorkPtr _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  WorkPtr barrier(const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override;
  // gloo's semantics: outputs[r][i] is rank r's inputs[i]; a non-empty input
  // list whose tensors match each output list's in type and size.
  WorkPtr allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  // gloo's: rank 0 waits for every rank's arrival within the timeout (the
  // options', else the group's) and raises naming the first rank missing (or
  // all, with wait_all_ranks) in gloo's words; the others wait for rank 0's
  // verdict and raise when it reports a failure or does not come. Through the
  // group's store, so a rank stuck elsewhere in Ringo cannot block it.
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks = false) override;

  // Point-to-point and the collectives built on it: Ringo's once it has them
  // (RINGO_HAS_P2P); until then a RuntimeError saying so.
  WorkPtr send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  WorkPtr recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
  // Refused, saying so: Ringo's C API has no receive from any source yet.
  WorkPtr recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  WorkPtr alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                        std::vector<int64_t>& input_splits,
                        const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  WorkPtr alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                   const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  WorkPtr gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                 const c10d::GatherOptions& opts = c10d::GatherOptions()) override;
  WorkPtr scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                  const c10d::ScatterOptions& opts = c10d::ScatterOptions()) override;

  // Every rank starts counting at 0 and counts the operations it issues, so
  // the numbers agree while the ranks issue the same operations.
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return sequence_.load(); }

  // Whether point-to-point operations are available in this build.
  static constexpr bool kHasP2P = RINGO_TORCH_P2P;

 private:
  // Queues `body` for the worker (host tensors) or runs it on the device's
  // Ringo stream (CUDA tensors; `device` says which).
  WorkPtr Launch(c10d::OpType type, const char* title, std::vector<at::Tensor> inputs,
                 std::vector<at::Tensor> outputs, Body body, c10::Device device);

  c10::intrusive_ptr<c10d::Store> store_;
  const std::chrono::milliseconds timeout_;
  std::atomic<uint64_t> sequence_{0};
  uint64_t monitored_barriers_ = 0;  // this rank's monitoredBarrier calls, naming each one's keys
  std::string key_prefix_;           // this group's store keys: "" or, for a shrunk group, its lineage
  uint64_t shrinks_ = 0;             // children made by Shrink (their key prefixes)
#ifdef RINGO_TORCH_CUDA
  std::unique_ptr<CudaGroup> cuda_;
#endif
  std::unique_ptr<Worker> worker_;  // last: stops (running what is queued) first
};

}  // namespace ringo::pytorch

#endif  // RINGO_INTEGRATIONS_PYTORCH_PROCESS_GROUP_H_
