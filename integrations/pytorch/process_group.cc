#include "integrations/pytorch/process_group.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <thread>
#include <utility>

#include "integrations/pytorch/python_gil.h"

namespace ringo::pytorch {
namespace {

#if !RINGO_TORCH_P2P
[[noreturn]] void NotYet(const char* what) {
  TORCH_CHECK(false, "ringo_torch: ", what,
              " is not supported yet: this Ringo has no point-to-point operations "
              "(ringoSend/ringoRecv, ringoAllToAll, ringoGather, ringoScatter)");
}
#endif

#if RINGO_TORCH_P2P
void CheckPeer(int peer, int size, const char* what) {
  TORCH_CHECK(peer >= 0 && peer < size, "ringo_torch: ", what, ": rank ", peer, " is not in [0, ",
              size, ")");
}
#endif

// Each tensor of `tensors` has `numel` elements and `like`'s dtype and device.
void CheckLike(const std::vector<at::Tensor>& tensors, const at::Tensor& like, int64_t numel,
               const char* what) {
  std::vector<at::Tensor> all(tensors);
  all.push_back(like);
  CheckTensors(all, what);
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(t.numel() == numel, "ringo_torch: ", what, ": a tensor of ", t.numel(),
                " elements where ", numel, " are expected");
  }
}

}  // namespace

ProcessGroupRingo::ProcessGroupRingo(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                     int size, std::chrono::milliseconds timeout)
    : GroupBase(rank, size), store_(store), timeout_(timeout) {
  TORCH_CHECK(store_, "ringo_torch: a process group needs a store");
#ifdef RINGO_TORCH_CUDA
  cuda_ = std::make_unique<CudaGroup>(store_, rank, size, timeout);
#endif
  auto connect = [store = store_, rank, size, timeout] {
    return Comm::Create(*store, rank, size, timeout, RINGO_DEVICE_HOST);
  };
  worker_ = std::make_unique<Worker>(std::move(connect), /*eager=*/!RINGO_TORCH_BACKEND_API);
  init();
}

ProcessGroupRingo::ProcessGroupRingo(const c10::intrusive_ptr<c10d::Store>& store, std::unique_ptr<Comm> comm,
                                     std::chrono::milliseconds timeout)
    : GroupBase(comm->rank(), comm->size()), store_(store), timeout_(timeout) {
#ifdef RINGO_TORCH_CUDA
  cuda_ = std::make_unique<CudaGroup>(store_, comm->rank(), comm->size(), timeout);
#endif
  std::shared_ptr<std::unique_ptr<Comm>> held = std::make_shared<std::unique_ptr<Comm>>(std::move(comm));
  worker_ = std::make_unique<Worker>([held] { return std::move(*held); }, /*eager=*/true);
  init();
}

void ProcessGroupRingo::SetWire(int wire) {
  Body body = [wire](const RunContext& ctx) {
    ctx.comm->Check(ringoCommSetWire(ctx.comm->get(), wire), "set_wire");
  };
  WorkPtr work = Launch(c10d::OpType::UNKNOWN, "ringo:set_wire", {}, {}, std::move(body), c10::Device(c10::kCPU));
  work->wait();
}

at::Tensor ProcessGroupRingo::WireRound(const at::Tensor& input, const c10d::ReduceOp& op) {
  TORCH_CHECK(input.device().is_cpu(), "ringo_torch.wire_round: CPU tensors only (GPU communicators do not compress yet)");
  at::Tensor in = input.contiguous();
  at::Tensor out = at::empty_like(in);
  const Reduction r = ReductionFor(in, op);
  TORCH_CHECK(!r.premul, "ringo_torch.wire_round: a premul-sum is not compressed");
  Body body = [in, out, r](const RunContext& ctx) {
    if (in.numel() == 0) return;
    ctx.comm->Check(ringoCommWireRound(in.data_ptr(), out.data_ptr(), in.numel(), r.dtype, r.op, ctx.comm->get()),
                    "wire_round");
  };
  WorkPtr work = Launch(c10d::OpType::UNKNOWN, "ringo:wire_round", {in}, {out}, std::move(body), in.device());
  work->wait();
  return out;
}

WorkPtr ProcessGroupRingo::AllReduceWithFeedback(at::Tensor tensor, at::Tensor residual) {
  TORCH_CHECK(tensor.device().is_cpu() && tensor.is_contiguous(),
              "ringo_torch: an all-reduce with error feedback takes a contiguous CPU tensor");
  TORCH_CHECK(residual.sizes() == tensor.sizes() && residual.scalar_type() == tensor.scalar_type() &&
                  residual.is_contiguous(),
              "ringo_torch: the residual must match the tensor");
  const Reduction r = ReductionFor(tensor, c10d::ReduceOp::SUM);
  Body body = [tensor, residual, r](const RunContext& ctx) {
    if (tensor.numel() == 0) return;
    at::Tensor t = tensor;
    t.add_(residual);
    at::Tensor sent = at::empty_like(t);
    ctx.comm->Check(ringoCommWireRound(t.data_ptr(), sent.data_ptr(), t.numel(), r.dtype, r.op, ctx.comm->get()),
                    "wire_round");
    at::sub_out(const_cast<at::Tensor&>(residual), t, sent);
    ctx.comm->Check(ringoAllReduce(t.data_ptr(), t.data_ptr(), t.numel(), r.dtype, r.op, ctx.comm->get(), ctx.stream),
                    "allreduce");
  };
  std::vector<at::Tensor> tensors{tensor};
  return Launch(c10d::OpType::ALLREDUCE, "ringo:all_reduce_feedback", tensors, tensors, std::move(body),
                tensor.device());
}

c10::intrusive_ptr<ProcessGroupRingo> ProcessGroupRingo::Shrink() {
  struct Child {
    ringoComm_t comm = nullptr;
    int rank = -1, size = 0;
  };
  auto child = std::make_shared<Child>();
  Body body = [child](const RunContext& ctx) {
    ringoComm_t comm = ctx.comm->get();
    std::vector<int> failed(ctx.comm->size(), -1);
    int nfailed = 0;
    ringoResult_t rc = ringoCommAgreeFailed(comm, failed.data(), &nfailed);
    if (rc != ringoSuccess) throw std::runtime_error(RingoError(comm, rc, "ringoCommAgreeFailed"));
    rc = ringoCommShrink(comm, failed.data(), nfailed, &child->comm, nullptr, RINGO_SHRINK_ABORT);
    if (rc != ringoSuccess) throw std::runtime_error(RingoError(comm, rc, "ringoCommShrink"));
    ringoCommUserRank(child->comm, &child->rank);
    ringoCommCount(child->comm, &child->size);
  };
  auto work = c10::make_intrusive<HostWork>(getRank(), c10d::OpType::UNKNOWN, "ringo:shrink",
                                            std::vector<at::Tensor>{}, std::vector<at::Tensor>{}, std::move(body));
  work->RunOnFailedCommunicator();
  worker_->Post(work);
  work->wait(std::chrono::milliseconds(0));  // throws the shrink's error
  auto group = c10::make_intrusive<ProcessGroupRingo>(store_, Comm::Adopt(child->comm, child->rank, child->size),
                                                      timeout_);
  // The child shares the store: its keys live apart from this group's (the
  // survivors shrink in the same order, so they agree on the prefix).
  group->key_prefix_ = key_prefix_ + "shrink" + std::to_string(++shrinks_) + "/";
  return group;
}

ProcessGroupRingo::~ProcessGroupRingo() {
  // Runs what is queued first, as gloo's destructor; Python may drop the last
  // reference with the GIL held, which the worker may need to finish.
  WithoutGil no_gil;
  worker_.reset();
}

WorkPtr ProcessGroupRingo::Launch(c10d::OpType type, const char* title,
                                  std::vector<at::Tensor> inputs, std::vector<at::Tensor> outputs,
                                  Body body, c10::Device device) {
  if (device.is_cuda()) {
#ifdef RINGO_TORCH_CUDA
    ++sequence_;
    return cuda_->Launch(type, title, inputs, std::move(outputs), body, device);
#else
    TORCH_CHECK(false, "ringo_torch: ", title,
                ": this build runs host (CPU) tensors only; CUDA tensors need ringo_torch "
                "built against PyTorch 2.x with CUDA");
#endif
  }
  TORCH_CHECK(device.is_cpu(), "ringo_torch: ", title, ": tensors on ", device,
              " are not supported");
  ++sequence_;
  auto work = c10::make_intrusive<HostWork>(getRank(), type, title, std::move(inputs),
                                            std::move(outputs), std::move(body));
  worker_->Post(work);
  return work;
}

WorkPtr ProcessGroupRingo::broadcast(std::vector<at::Tensor>& tensors,
                                     const c10d::BroadcastOptions& opts) {
  CheckSingle(tensors, "broadcast");
  CheckRoot(opts.rootRank, getSize(), "broadcast");
  TORCH_CHECK(opts.rootTensor == 0, "ringo_torch: broadcast: rootTensor must be 0");
  const at::Tensor& t = tensors[0];
  return Launch(c10d::OpType::BROADCAST, "ringo:broadcast", tensors, tensors,
                BroadcastBody(t, static_cast<int>(opts.rootRank)), t.device());
}

WorkPtr ProcessGroupRingo::allreduce(std::vector<at::Tensor>& tensors,
                                     const c10d::AllreduceOptions& opts) {
  if (tensors.size() == 1 && tensors[0].defined() && tensors[0].is_sparse()) {
    const at::Tensor& t = tensors[0];
    TORCH_CHECK(opts.reduceOp == c10d::ReduceOp::SUM,
                "ringo_torch: unsupported reduction operation (allreduce of sparse tensors only works with "
                "ReduceOp.SUM)");
    TORCH_CHECK(t.device().is_cpu(), "ringo_torch: allreduce of sparse tensors runs on CPU tensors, got ",
                t.device());
    return Launch(c10d::OpType::ALLREDUCE, "ringo:all_reduce", tensors, tensors, SparseAllReduceBody(t),
                  t.device());
  }
  CheckSingle(tensors, "allreduce");
  const at::Tensor& t = tensors[0];
  return Launch(c10d::OpType::ALLREDUCE, "ringo:all_reduce", tensors, tensors,
                AllReduceBody(t, ReductionFor(t, opts.reduceOp)), t.device());
}

WorkPtr ProcessGroupRingo::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                               const c10d::AllreduceCoalescedOptions& opts) {
  CheckTensors(tensors, "allreduce_coalesced");
  const at::Tensor& t = tensors[0];
  return Launch(c10d::OpType::ALLREDUCE_COALESCED, "ringo:all_reduce_coalesced", tensors, tensors,
                AllReduceCoalescedBody(tensors, ReductionFor(t, opts.reduceOp)), t.device());
}

WorkPtr ProcessGroupRingo::reduce(std::vector<at::Tensor>& tensors,
                                  const c10d::ReduceOptions& opts) {
  CheckSingle(tensors, "reduce");
  CheckRoot(opts.rootRank, getSize(), "reduce");
  TORCH_CHECK(opts.rootTensor == 0, "ringo_torch: reduce: rootTensor must be 0");
  const at::Tensor& t = tensors[0];
  return Launch(c10d::OpType::REDUCE, "ringo:reduce", tensors, tensors,
                ReduceBody(t, ReductionFor(t, opts.reduceOp), static_cast<int>(opts.rootRank)),
                t.device());
}

WorkPtr ProcessGroupRingo::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                     std::vector<at::Tensor>& inputs,
                                     const c10d::AllgatherOptions& /*opts*/) {
  CheckSingle(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1, "ringo_torch: allgather takes one output list, got ",
              outputs.size());
  TORCH_CHECK(static_cast<int>(outputs[0].size()) == getSize(),
              "ringo_torch: allgather: ", outputs[0].size(), " output tensors for ", getSize(),
              " ranks");
  const at::Tensor& in = inputs[0];
  CheckLike(outputs[0], in, in.numel(), "allgather");
  return Launch(c10d::OpType::ALLGATHER, "ringo:all_gather", inputs, outputs[0],
                AllGatherBody(outputs[0], in), in.device());
}

WorkPtr ProcessGroupRingo::_allgather_base(at::Tensor& output, at::Tensor& input,
                                           const c10d::AllgatherOptions& /*opts*/) {
  CheckLike({output}, input, input.numel() * getSize(), "_allgather_base");
  return Launch(c10d::OpType::_ALLGATHER_BASE, "ringo:_all_gather_base", {input}, {output},
                AllGatherBaseBody(output, input), input.device());
}

WorkPtr ProcessGroupRingo::reduce_scatter(std::vector<at::Tensor>& outputs,
                                          std::vector<std::vector<at::Tensor>>& inputs,
                                          const c10d::ReduceScatterOptions& opts) {
  CheckSingle(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1, "ringo_torch: reduce_scatter takes one input list, got ",
              inputs.size());
  TORCH_CHECK(static_cast<int>(inputs[0].size()) == getSize(),
              "ringo_torch: reduce_scatter: ", inputs[0].size(), " input tensors for ", getSize(),
              " ranks");
  const at::Tensor& out = outputs[0];
  CheckLike(inputs[0], out, out.numel(), "reduce_scatter");
  return Launch(c10d::OpType::REDUCE_SCATTER, "ringo:reduce_scatter", inputs[0], outputs,
                ReduceScatterBody(out, inputs[0], ReductionFor(out, opts.reduceOp)), out.device());
}

WorkPtr ProcessGroupRingo::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                const c10d::ReduceScatterOptions& opts) {
  CheckLike({input}, output, output.numel() * getSize(), "_reduce_scatter_base");
  return Launch(c10d::OpType::_REDUCE_SCATTER_BASE, "ringo:_reduce_scatter_base", {input}, {output},
                ReduceScatterBaseBody(output, input, ReductionFor(output, opts.reduceOp)),
                output.device());
}

WorkPtr ProcessGroupRingo::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                               std::vector<at::Tensor>& inputs,
                                               const c10d::AllgatherOptions& /*opts*/) {
  TORCH_CHECK(!inputs.empty(), "ringo_torch: allgather_coalesced requires non-empty input tensor list");
  TORCH_CHECK(static_cast<int>(outputs.size()) == getSize(),
              "ringo_torch: allgather_coalesced: output lists should be equal to world size");
  for (const at::Tensor& t : inputs) {
    TORCH_CHECK(t.defined() && t.layout() == at::kStrided,
                "ringo_torch: allgather_coalesced supports dense (strided) tensors only");
    TORCH_CHECK(t.device() == inputs[0].device(), "ringo_torch: allgather_coalesced: tensors on different devices");
  }
  std::vector<at::Tensor> all_outputs;
  for (const std::vector<at::Tensor>& list : outputs) {
    TORCH_CHECK(list.size() == inputs.size(), "ringo_torch: allgather_coalesced: invalid output size: (expected length ",
                inputs.size(), ", got ", list.size(), ")");
    for (size_t i = 0; i < list.size(); ++i) {
      TORCH_CHECK(list[i].defined() && list[i].options().type_equal(inputs[i].options()) &&
                      list[i].sizes() == inputs[i].sizes(),
                  "ringo_torch: allgather_coalesced: invalid tensor type or size at index ", i);
      all_outputs.push_back(list[i]);
    }
  }
  return Launch(c10d::OpType::ALLGATHER_COALESCED, "ringo:all_gather_coalesced", inputs, all_outputs,
                AllGatherCoalescedBody(outputs, inputs), inputs[0].device());
}

// gloo's monitored barrier, in gloo's words (programs and PyTorch's own tests
// match on them): rank 0 waits for each rank in order, within what is left of
// `timeout` (each rank the whole of it with wait_all_ranks), and raises
// "[Rank 0]: Rank R failed to pass monitoredBarrier in T ms", or "[Rank 0]:
// Ranks A, B failed ..." with wait_all_ranks, with "Rank 0 timed out in
// monitoredBarrier after T ms." below it when the time ran out before rank R
// was waited for. The other ranks hear rank 0's verdict through the store at
// once (gloo's wait until their own timeout) and raise "Rank N successfully
// reached monitoredBarrier, but received errors while waiting for send/recv
// from rank 0", with rank 0's words below.
void ProcessGroupRingo::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  using Clock = std::chrono::steady_clock;
  using std::chrono::milliseconds;
  const milliseconds timeout =
      opts.timeout == c10d::kUnsetTimeout ? timeout_ : std::chrono::duration_cast<milliseconds>(opts.timeout);
  const std::string base =
      "ringo/" + key_prefix_ + "monitored_barrier/" + std::to_string(++monitored_barriers_) + "/";
  const std::string verdict_key = base + "verdict";
  const std::string in_time = " failed to pass monitoredBarrier in " + std::to_string(timeout.count()) + " ms";
  const int rank = getRank();
  if (rank != 0) {
    const std::string reached = "Rank " + std::to_string(rank) +
                                " successfully reached monitoredBarrier, but received errors while waiting for "
                                "send/recv from rank 0. Please check rank 0 logs for faulty rank.\n Original "
                                "exception: \n";
    store_->set(base + "arrived/" + std::to_string(rank), std::vector<uint8_t>{1});
    // Only rank 0 enforces `timeout`: the others wait at least the group's
    // own timeout, so that rank 0 names the missing rank first.
    try {
      store_->wait({verdict_key}, std::max(timeout, timeout_));
    } catch (const std::exception& e) {
      TORCH_CHECK(false, reached, e.what());
    }
    const std::vector<uint8_t> v = store_->get(verdict_key);
    const std::string verdict(v.begin(), v.end());
    TORCH_CHECK(verdict == "ok", reached, verdict);
    return;
  }
  const Clock::time_point start = Clock::now();
  std::vector<int> processed;
  std::vector<int> failed;
  std::string error;
  for (int r = 1; r < getSize() && error.empty(); ++r) {
    const milliseconds left =
        wait_all_ranks ? timeout : timeout - std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    if (left.count() <= 0) {
      std::string done;
      for (int p : processed) done += (done.empty() ? "" : ", ") + std::to_string(p);
      error = "[Rank 0]: Rank " + std::to_string(r) + in_time + "\n Original exception: \nRank 0 timed out in " +
              "monitoredBarrier after " + std::to_string(timeout.count()) + " ms.\n" +
              (done.empty() ? "No ranks successfully processed in monitoredBarrier."
                            : "Successfully processed ranks: " + done);
      break;
    }
    const std::string key = base + "arrived/" + std::to_string(r);
    const Clock::time_point until = Clock::now() + left;
    bool arrived = store_->check({key});
    while (!arrived && Clock::now() < until) {
      std::this_thread::sleep_for(milliseconds(1));
      arrived = store_->check({key});
    }
    if (arrived) {
      processed.push_back(r);
    } else if (wait_all_ranks) {
      failed.push_back(r);
    } else {
      error = "[Rank 0]: Rank " + std::to_string(r) + in_time + "\n Original exception: \nrank " +
              std::to_string(r) + " did not reach monitoredBarrier within " + std::to_string(left.count()) + " ms";
    }
  }
  if (error.empty() && !failed.empty()) {
    std::string ranks;
    for (int r : failed) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    error = "[Rank 0]: Ranks " + ranks + in_time;
  }
  if (error.empty()) {
    store_->set(verdict_key, std::vector<uint8_t>{'o', 'k'});
    return;
  }
  store_->set(verdict_key, std::vector<uint8_t>(error.begin(), error.end()));
  TORCH_CHECK(false, error);
}

WorkPtr ProcessGroupRingo::barrier(const c10d::BarrierOptions& /*opts*/) {
  // On the host communicator, after everything this group queued there (and,
  // with CUDA, after its GPU streams drain), as gloo's barrier waits for the
  // group's earlier work.
  Body body = BarrierBody(at::zeros({1}, at::kByte));
#ifdef RINGO_TORCH_CUDA
  body = [this, host = std::move(body)](const RunContext& ctx) {
    cuda_->Synchronize();
    host(ctx);
  };
#endif
  return Launch(c10d::OpType::BARRIER, "ringo:barrier", {}, {}, std::move(body), at::kCPU);
}

#if RINGO_TORCH_P2P

WorkPtr ProcessGroupRingo::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  CheckSingle(tensors, "send");
  CheckPeer(dst_rank, getSize(), "send");
  if (tensors[0].device().is_cpu()) {
    ++sequence_;
    auto work = c10::make_intrusive<HostWork>(getRank(), c10d::OpType::SEND, "ringo:send", tensors,
                                              std::vector<at::Tensor>{}, SendIssue(tensors[0], dst_rank, tag));
    worker_->Post(work);
    return work;
  }
  return Launch(c10d::OpType::SEND, "ringo:send", tensors, {}, SendBody(tensors[0], dst_rank),
                tensors[0].device());
}

WorkPtr ProcessGroupRingo::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  CheckSingle(tensors, "recv");
  CheckPeer(src_rank, getSize(), "recv");
  if (tensors[0].device().is_cpu()) {
    ++sequence_;
    auto source = std::make_shared<std::atomic<int>>(src_rank);  // sourceRank(), as gloo's
    auto work = c10::make_intrusive<HostWork>(getRank(), c10d::OpType::RECV, "ringo:recv",
                                              std::vector<at::Tensor>{}, tensors,
                                              RecvIssue(tensors[0], src_rank, tag, source));
    work->SetSource(source);
    worker_->Post(work);
    return work;
  }
  return Launch(c10d::OpType::RECV, "ringo:recv", {}, tensors, RecvBody(tensors[0], src_rank),
                tensors[0].device());
}

WorkPtr ProcessGroupRingo::alltoall_base(at::Tensor& output, at::Tensor& input,
                                         std::vector<int64_t>& output_splits,
                                         std::vector<int64_t>& input_splits,
                                         const c10d::AllToAllOptions& /*opts*/) {
  CheckTensors({output, input}, "alltoall_base");
  const int size = getSize();
  if (output_splits.empty() && input_splits.empty()) {
    TORCH_CHECK(input.numel() == output.numel() && input.numel() % size == 0,
                "ringo_torch: alltoall_base: equal splits need input and output of one size, a "
                "multiple of the rank count");
  } else {
    auto check = [&](const std::vector<int64_t>& splits, const at::Tensor& t, const char* name) {
      TORCH_CHECK(static_cast<int>(splits.size()) == size,
                  "ringo_torch: alltoall_base: ", splits.size(), " ", name, " splits for ", size,
                  " ranks");
      const int64_t rows = t.dim() > 0 ? t.size(0) : 0;
      TORCH_CHECK(std::accumulate(splits.begin(), splits.end(), int64_t{0}) == rows,
                  "ringo_torch: alltoall_base: ", name, " splits do not add up to ", rows);
    };
    check(output_splits, output, "output");
    check(input_splits, input, "input");
  }
  return Launch(c10d::OpType::ALLTOALL_BASE, "ringo:all_to_all", {input}, {output},
                AllToAllBaseBody(output, input, output_splits, input_splits), input.device());
}

WorkPtr ProcessGroupRingo::alltoall(std::vector<at::Tensor>& outputs,
                                    std::vector<at::Tensor>& inputs,
                                    const c10d::AllToAllOptions& /*opts*/) {
  const int size = getSize();
  TORCH_CHECK(static_cast<int>(outputs.size()) == size && static_cast<int>(inputs.size()) == size,
              "ringo_torch: alltoall needs one input and one output tensor per rank");
  std::vector<at::Tensor> all(outputs);
  all.insert(all.end(), inputs.begin(), inputs.end());
  CheckTensors(all, "alltoall");
  return Launch(c10d::OpType::ALLTOALL, "ringo:all_to_all", inputs, outputs,
                AllToAllBody(outputs, inputs), inputs[0].device());
}

WorkPtr ProcessGroupRingo::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                  std::vector<at::Tensor>& inputs,
                                  const c10d::GatherOptions& opts) {
  CheckSingle(inputs, "gather");
  CheckRoot(opts.rootRank, getSize(), "gather");
  const int root = static_cast<int>(opts.rootRank);
  const at::Tensor& in = inputs[0];
  std::vector<at::Tensor> outs;
  if (getRank() == root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
                "ringo_torch: gather: the root needs one output tensor per rank");
    outs = outputs[0];
    CheckLike(outs, in, in.numel(), "gather");
  } else {
    TORCH_CHECK(outputs.empty(), "ringo_torch: gather: only the root has outputs");
  }
  return Launch(c10d::OpType::GATHER, "ringo:gather", inputs, outs, GatherBody(outs, in, root),
                in.device());
}

WorkPtr ProcessGroupRingo::scatter(std::vector<at::Tensor>& outputs,
                                   std::vector<std::vector<at::Tensor>>& inputs,
                                   const c10d::ScatterOptions& opts) {
  CheckSingle(outputs, "scatter");
  CheckRoot(opts.rootRank, getSize(), "scatter");
  const int root = static_cast<int>(opts.rootRank);
  const at::Tensor& out = outputs[0];
  std::vector<at::Tensor> ins;
  if (getRank() == root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
                "ringo_torch: scatter: the root needs one input tensor per rank");
    ins = inputs[0];
    CheckLike(ins, out, out.numel(), "scatter");
  } else {
    TORCH_CHECK(inputs.empty(), "ringo_torch: scatter: only the root has inputs");
  }
  return Launch(c10d::OpType::SCATTER, "ringo:scatter", ins, outputs, ScatterBody(out, ins, root),
                out.device());
}

#else  // !RINGO_TORCH_P2P

WorkPtr ProcessGroupRingo::send(std::vector<at::Tensor>&, int, int) { NotYet("send"); }
WorkPtr ProcessGroupRingo::recv(std::vector<at::Tensor>&, int, int) { NotYet("recv"); }
WorkPtr ProcessGroupRingo::alltoall_base(at::Tensor&, at::Tensor&, std::vector<int64_t>&,
                                         std::vector<int64_t>&, const c10d::AllToAllOptions&) {
  NotYet("alltoall_base");
}
WorkPtr ProcessGroupRingo::alltoall(std::vector<at::Tensor>&, std::vector<at::Tensor>&,
                                    const c10d::AllToAllOptions&) {
  NotYet("alltoall");
}
WorkPtr ProcessGroupRingo::gather(std::vector<std::vector<at::Tensor>>&, std::vector<at::Tensor>&,
                                  const c10d::GatherOptions&) {
  NotYet("gather");
}
WorkPtr ProcessGroupRingo::scatter(std::vector<at::Tensor>&, std::vector<std::vector<at::Tensor>>&,
                                   const c10d::ScatterOptions&) {
  NotYet("scatter");
}

#endif  // RINGO_TORCH_P2P

WorkPtr ProcessGroupRingo::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
#if RINGO_TORCH_P2P
  CheckSingle(tensors, "recv");
  TORCH_CHECK(tensors[0].device().is_cpu(),
              "ringo_torch: recv from any source takes CPU tensors (GPU receives name their source)");
  ++sequence_;
  auto source = std::make_shared<std::atomic<int>>(-1);
  auto work = c10::make_intrusive<HostWork>(getRank(), c10d::OpType::RECVANYSOURCE, "ringo:recv",
                                            std::vector<at::Tensor>{}, tensors,
                                            RecvIssue(tensors[0], RINGO_ANY_SOURCE, tag, source));
  work->SetSource(source);
  worker_->Post(work);
  return work;
#else
  (void)tensors;
  (void)tag;
  NotYet("recvAnysource");
#endif
}

}  // namespace ringo::pytorch
