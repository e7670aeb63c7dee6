// Point-to-point bodies: send, recv, all-to-all, gather, scatter. Built only
// where ringo/ringo.h defines RINGO_HAS_P2P (ringoSend, ringoRecv,
// ringoAllToAll, ringoGather and ringoScatter, with NCCL's signatures).
#include "integrations/pytorch/ops.h"

#if RINGO_TORCH_P2P

namespace ringo::pytorch {
namespace {

at::Tensor Dense(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

// Point-to-point moves bytes: any dtype goes.
size_t Bytes(const at::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

// Runs the sends and receives queued by `issue` as one Ringo group, so that a
// rank's sends and receives progress together.
template <typename F>
void Grouped(const RunContext& ctx, const char* what, F issue) {
  ctx.comm->Check(ringoGroupStart(), what);
  ringoResult_t first = ringoSuccess;
  issue([&](ringoResult_t rc) {
    if (first == ringoSuccess) first = rc;
  });
  ringoResult_t end = ringoGroupEnd();
  ctx.comm->Check(first != ringoSuccess ? first : end, what);
}

}  // namespace

Body SendBody(at::Tensor tensor, int peer) {
  return [tensor, peer](const RunContext& ctx) {
    at::Tensor buf = Dense(tensor);
    ctx.comm->Check(
        ringoSend(buf.data_ptr(), Bytes(buf), ringoUint8, peer, ctx.comm->get(), ctx.stream),
        "send");
  };
}

Body RecvBody(at::Tensor tensor, int peer) {
  return [tensor, peer](const RunContext& ctx) {
    at::Tensor buf = Dense(tensor);
    ctx.comm->Check(
        ringoRecv(buf.data_ptr(), Bytes(buf), ringoUint8, peer, ctx.comm->get(), ctx.stream),
        "recv");
    if (!buf.is_same(tensor)) tensor.copy_(buf);
  };
}

P2pIssue SendIssue(at::Tensor tensor, int peer, int tag) {
  return [tensor, peer, tag](const RunContext& ctx, ringoResult_t* first) -> std::function<void()> {
    at::Tensor buf = Dense(tensor);
    const ringoResult_t rc =
        ringoSendTagged(buf.data_ptr(), Bytes(buf), ringoUint8, peer, tag, ctx.comm->get(), ctx.stream);
    if (*first == ringoSuccess) *first = rc;
    return [] {};
  };
}

P2pIssue RecvIssue(at::Tensor tensor, int peer, int tag, std::shared_ptr<std::atomic<int>> source) {
  return [tensor, peer, tag, source](const RunContext& ctx, ringoResult_t* first) -> std::function<void()> {
    at::Tensor buf = Dense(tensor);
    int from = -1;
    const ringoResult_t rc = ringoRecvTagged(buf.data_ptr(), Bytes(buf), ringoUint8, peer, tag, &from,
                                             ctx.comm->get(), ctx.stream);
    if (*first == ringoSuccess) *first = rc;
    if (rc == ringoSuccess && source != nullptr) source->store(from);
    return [tensor, buf]() mutable {
      if (!buf.is_same(tensor)) tensor.copy_(buf);
    };
  };
}

Body AllToAllBaseBody(at::Tensor output, at::Tensor input, std::vector<int64_t> output_splits,
                      std::vector<int64_t> input_splits) {
  return [output, input, output_splits, input_splits](const RunContext& ctx) {
    at::Tensor in = Dense(input);
    at::Tensor out = Dense(output);
    const int size = ctx.comm->size();
    if (output_splits.empty() && input_splits.empty()) {
      const size_t per_peer = Bytes(in) / size;
      if (per_peer > 0) {
        ctx.comm->Check(ringoAllToAll(in.data_ptr(), out.data_ptr(), per_peer, ringoUint8,
                                      ctx.comm->get(), ctx.stream),
                        "alltoall_base");
      }
    } else {
      // Splits count dim-0 slices; a slice is the product of the other dims.
      const size_t in_row = input.dim() > 0 && input.size(0) > 0 ? Bytes(in) / input.size(0) : 0;
      const size_t out_row =
          output.dim() > 0 && output.size(0) > 0 ? Bytes(out) / output.size(0) : 0;
      auto* send = static_cast<char*>(in.data_ptr());
      auto* recv = static_cast<char*>(out.data_ptr());
      Grouped(ctx, "alltoall_base", [&](auto note) {
        size_t in_off = 0, out_off = 0;
        for (int p = 0; p < size; ++p) {
          const size_t sb = static_cast<size_t>(input_splits[p]) * in_row;
          const size_t rb = static_cast<size_t>(output_splits[p]) * out_row;
          if (sb > 0)
            note(ringoSend(send + in_off, sb, ringoUint8, p, ctx.comm->get(), ctx.stream));
          if (rb > 0)
            note(ringoRecv(recv + out_off, rb, ringoUint8, p, ctx.comm->get(), ctx.stream));
          in_off += sb;
          out_off += rb;
        }
      });
    }
    if (!out.is_same(output)) output.copy_(out);
  };
}

Body AllToAllBody(std::vector<at::Tensor> outputs, std::vector<at::Tensor> inputs) {
  return [outputs, inputs](const RunContext& ctx) {
    std::vector<at::Tensor> ins, outs;
    for (const at::Tensor& t : inputs) ins.push_back(Dense(t));
    for (const at::Tensor& t : outputs) outs.push_back(Dense(t));
    Grouped(ctx, "alltoall", [&](auto note) {
      for (int p = 0; p < ctx.comm->size(); ++p) {
        if (Bytes(ins[p]) > 0) {
          note(ringoSend(ins[p].data_ptr(), Bytes(ins[p]), ringoUint8, p, ctx.comm->get(),
                         ctx.stream));
        }
        if (Bytes(outs[p]) > 0) {
          note(ringoRecv(outs[p].data_ptr(), Bytes(outs[p]), ringoUint8, p, ctx.comm->get(),
                         ctx.stream));
        }
      }
    });
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!outs[i].is_same(outputs[i])) outputs[i].copy_(outs[i]);
    }
  };
}

Body GatherBody(std::vector<at::Tensor> outputs, at::Tensor input, int root) {
  return [outputs, input, root](const RunContext& ctx) {
    const size_t bytes = Bytes(input);
    if (bytes == 0) return;
    at::Tensor in = Dense(input);
    at::Tensor flat;
    if (ctx.comm->rank() == root) {
      flat = at::empty({static_cast<int64_t>(bytes) * ctx.comm->size()},
                       input.options().dtype(at::kByte));
    }
    ctx.comm->Check(ringoGather(in.data_ptr(), flat.defined() ? flat.data_ptr() : nullptr, bytes,
                                ringoUint8, root, ctx.comm->get(), ctx.stream),
                    "gather");
    for (size_t i = 0; i < outputs.size(); ++i) {
      at::Tensor part =
          flat.narrow(0, static_cast<int64_t>(i * bytes), static_cast<int64_t>(bytes));
      outputs[i].copy_(part.view(input.scalar_type()).view(outputs[i].sizes()));
    }
  };
}

Body ScatterBody(at::Tensor output, std::vector<at::Tensor> inputs, int root) {
  return [output, inputs, root](const RunContext& ctx) {
    const size_t bytes = Bytes(output);
    if (bytes == 0) return;
    at::Tensor out = Dense(output);
    at::Tensor flat;
    if (ctx.comm->rank() == root) {
      std::vector<at::Tensor> views;
      for (const at::Tensor& t : inputs) views.push_back(t.reshape({-1}));
      flat = at::cat(views);
    }
    ctx.comm->Check(ringoScatter(flat.defined() ? flat.data_ptr() : nullptr, out.data_ptr(), bytes,
                                 ringoUint8, root, ctx.comm->get(), ctx.stream),
                    "scatter");
    if (!out.is_same(output)) output.copy_(out);
  };
}

}  // namespace ringo::pytorch

#endif  // RINGO_TORCH_P2P
