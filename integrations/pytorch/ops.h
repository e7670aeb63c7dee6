// What each torch.distributed operation does with its tensors, written once
// for host and GPU communicators: argument checks (on the caller's thread, at
// the call), the datatype and operator mapping, and the body that runs the
// Ringo call(s). A body makes non-contiguous tensors contiguous (copies), calls
// Ringo, and copies results back, so in-place semantics are gloo's for every
// layout. A body's tensor operations run on the current stream (the group's
// Ringo stream for GPU communicators; host memory otherwise).
#ifndef RINGO_INTEGRATIONS_PYTORCH_OPS_H_
#define RINGO_INTEGRATIONS_PYTORCH_OPS_H_

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "integrations/pytorch/comm.h"
#include "integrations/pytorch/torch_compat.h"

namespace ringo::pytorch {

// Where a body runs: the communicator and its stream (NULL for host memory).
struct RunContext {
  Comm* comm;
  ringoStream_t stream;
};

using Body = std::function<void(const RunContext&)>;

// A reduction as Ringo runs it. bool runs as uint8 with sum as max (logical
// or) and product as min (logical and), as ProcessGroupNCCL does.
// PREMUL_SUM (torch's factor * input summed over ranks) multiplies the input
// by its factor, then sums.
struct Reduction {
  ringoDataType_t dtype = ringoFloat32;
  ringoRedOp_t op = ringoSum;
  bool premul = false;
  double factor = 1.0;
  at::Tensor factor_tensor;  // defined when the factor is a tensor

  // `input` itself, or input * factor in a new tensor when premul.
  at::Tensor Prepare(const at::Tensor& input) const;
};

// Throws (c10::Error: a RuntimeError in Python) for what Ringo cannot reduce.
Reduction ReductionFor(const at::Tensor& tensor, const c10d::ReduceOp& op);

// Checks that every tensor is dense (strided), on one device, of one dtype.
void CheckTensors(const std::vector<at::Tensor>& tensors, const char* what);
// `tensors` holds exactly one tensor.
void CheckSingle(const std::vector<at::Tensor>& tensors, const char* what);
// Throws unless 0 <= root < size.
void CheckRoot(int64_t root, int size, const char* what);

// The bodies. `size` is the group's rank count where the op needs it.
Body AllReduceBody(at::Tensor tensor, Reduction r);
Body AllReduceCoalescedBody(std::vector<at::Tensor> tensors, Reduction r);
Body BroadcastBody(at::Tensor tensor, int root);
Body ReduceBody(at::Tensor tensor, Reduction r, int root);
Body AllGatherBody(std::vector<at::Tensor> outputs, at::Tensor input);
Body AllGatherBaseBody(at::Tensor output, at::Tensor input);
Body ReduceScatterBody(at::Tensor output, std::vector<at::Tensor> inputs, Reduction r);
Body ReduceScatterBaseBody(at::Tensor output, at::Tensor input, Reduction r);
Body BarrierBody(at::Tensor scratch);
// outputs[r][i] = rank r's inputs[i]: the inputs flattened into one buffer
// (at::cat's dtype), one all-gather, the slices copied out (gloo's way).
Body AllGatherCoalescedBody(std::vector<std::vector<at::Tensor>> outputs, std::vector<at::Tensor> inputs);
// A sparse COO tensor summed over the ranks, as gloo does: coalesced, every
// rank's indices and values gathered (sizes first, then padded to the
// largest), summed and coalesced; copied into `tensor`. Host tensors.
Body SparseAllReduceBody(at::Tensor tensor);

#if RINGO_TORCH_P2P
Body SendBody(at::Tensor tensor, int peer);
Body RecvBody(at::Tensor tensor, int peer);
// A send or receive issued inside an open Ringo group, so that the host
// worker runs the point-to-point operations queued together as one group
// (work.h): issues the call (its result, if it is the first failure, into
// *first) and returns what to do once the group has run (a staged receive
// buffer copied back).
using P2pIssue = std::function<std::function<void()>(const RunContext&, ringoResult_t* first)>;
// Host send and receive, with gloo's matching: tagged (ringoSendTagged,
// ringoRecvTagged); `peer` RINGO_ANY_SOURCE receives from any rank, its
// sender written to *source.
P2pIssue SendIssue(at::Tensor tensor, int peer, int tag);
P2pIssue RecvIssue(at::Tensor tensor, int peer, int tag, std::shared_ptr<std::atomic<int>> source);
// Splits are counts of dim-0 slices per peer; empty: equal splits.
Body AllToAllBaseBody(at::Tensor output, at::Tensor input, std::vector<int64_t> output_splits,
                      std::vector<int64_t> input_splits);
Body AllToAllBody(std::vector<at::Tensor> outputs, std::vector<at::Tensor> inputs);
// `outputs` is empty on every rank but the root.
Body GatherBody(std::vector<at::Tensor> outputs, at::Tensor input, int root);
// `inputs` is empty on every rank but the root.
Body ScatterBody(at::Tensor output, std::vector<at::Tensor> inputs, int root);
#endif

}  // namespace ringo::pytorch

#endif  // RINGO_INTEGRATIONS_PYTORCH_OPS_H_
