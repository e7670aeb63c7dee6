#include "integrations/pytorch/ops.h"

#include <algorithm>
#include <type_traits>
#include <utility>

namespace ringo::pytorch {
namespace {

// Ringo's datatype for a torch dtype; false when Ringo has none.
bool RingoType(at::ScalarType t, ringoDataType_t* out) {
  switch (t) {
    case at::kChar:
      *out = ringoInt8;
      return true;
    case at::kByte:
    case at::kBool:
      *out = ringoUint8;
      return true;
    case at::kInt:
      *out = ringoInt32;
      return true;
    case at::kLong:
      *out = ringoInt64;
      return true;
    case at::kHalf:
      *out = ringoFloat16;
      return true;
    case at::kBFloat16:
      *out = ringoBfloat16;
      return true;
    case at::kFloat:
      *out = ringoFloat32;
      return true;
    case at::kDouble:
      *out = ringoFloat64;
      return true;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
    case at::ScalarType::UInt32:
      *out = ringoUint32;
      return true;
    case at::ScalarType::UInt64:
      *out = ringoUint64;
      return true;
#endif
    default:
      return false;
  }
}

// How a tensor moves when nothing is reduced: in its own datatype where Ringo
// has it, else as bytes (complex, int16, ...).
struct Elements {
  ringoDataType_t dtype;
  size_t count;
};

Elements ElementsOf(const at::Tensor& t) {
  ringoDataType_t dt;
  if (RingoType(t.scalar_type(), &dt)) return {dt, static_cast<size_t>(t.numel())};
  return {ringoUint8, static_cast<size_t>(t.numel()) * t.element_size()};
}

at::Tensor Dense(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

// The premul-sum factor: a tensor in 2.x (tensor_factor), one per input in
// 1.13 (tensor_factors), or a double.
template <typename S>
auto FactorTensor(const S& s, int) -> decltype(s.tensor_factor, at::Tensor()) {
  return s.tensor_factor;
}
template <typename S>
auto FactorTensor(const S& s, long) -> decltype(s.tensor_factors, at::Tensor()) {
  return s.tensor_factors.empty() ? at::Tensor() : s.tensor_factors[0];
}

const char* OpName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::BAND:
      return "BAND";
    case c10d::ReduceOp::BOR:
      return "BOR";
    case c10d::ReduceOp::BXOR:
      return "BXOR";
    default:
      return "this ReduceOp";
  }
}

}  // namespace

at::Tensor Reduction::Prepare(const at::Tensor& input) const {
  if (!premul) return input;
  if (factor_tensor.defined()) {
    return input.mul(factor_tensor.reshape({}).to(input.device())).to(input.scalar_type());
  }
  return input.mul(factor);
}

Reduction ReductionFor(const at::Tensor& tensor, const c10d::ReduceOp& op) {
  Reduction r;
  TORCH_CHECK(RingoType(tensor.scalar_type(), &r.dtype), "ringo_torch: Ringo cannot reduce ",
              tensor.scalar_type(),
              " tensors (it reduces int8, uint8, int32, int64, float16, bfloat16, float32, "
              "float64, and bool with sum/max or product/min)");
  const bool is_bool = tensor.scalar_type() == at::kBool;
  const auto kind = static_cast<c10d::ReduceOp::RedOpType>(op);
  switch (kind) {
    case c10d::ReduceOp::SUM:
      r.op = is_bool ? ringoMax : ringoSum;
      break;
    case c10d::ReduceOp::PRODUCT:
      r.op = is_bool ? ringoMin : ringoProd;
      break;
    case c10d::ReduceOp::MIN:
      r.op = ringoMin;
      break;
    case c10d::ReduceOp::MAX:
      r.op = ringoMax;
      break;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(!is_bool, "ringo_torch: ReduceOp.AVG is not defined for bool tensors");
      r.op = ringoAvg;
      break;
    case c10d::ReduceOp::PREMUL_SUM: {
      TORCH_CHECK(tensor.is_floating_point(),
                  "ringo_torch: PREMUL_SUM needs a floating-point tensor, got ",
                  tensor.scalar_type());
      TORCH_CHECK(op.supplement_.defined(), "ringo_torch: PREMUL_SUM without its factor");
      // PREMUL_SUM always carries this supplement (torch's makeNCCLPreMulSum).
      const auto& s = *static_cast<const c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
      r.op = ringoSum;
      r.premul = true;
      r.factor = s.double_factor;
      r.factor_tensor = FactorTensor(s, 0);
      break;
    }
    default:
      TORCH_CHECK(false, "ringo_torch: ReduceOp.", OpName(kind),
                  " is not supported by Ringo (sum, product, min, max, avg, premul_sum are)");
  }
  return r;
}

void CheckTensors(const std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(!tensors.empty(), "ringo_torch: ", what, " needs at least one tensor");
  const at::Tensor& first = tensors[0];
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(t.defined(), "ringo_torch: ", what, ": undefined tensor");
    TORCH_CHECK(t.layout() == at::kStrided, "ringo_torch: ", what,
                " supports dense (strided) tensors only, got ", t.layout());
    TORCH_CHECK(t.device() == first.device(), "ringo_torch: ", what,
                ": tensors on different devices (", first.device(), ", ", t.device(), ")");
    TORCH_CHECK(t.scalar_type() == first.scalar_type(), "ringo_torch: ", what,
                ": tensors of different dtypes (", first.scalar_type(), ", ", t.scalar_type(), ")");
  }
}

void CheckSingle(const std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "ringo_torch: ", what, " takes one tensor per call, got ",
              tensors.size());
  CheckTensors(tensors, what);
}

void CheckRoot(int64_t root, int size, const char* what) {
  TORCH_CHECK(root >= 0 && root < size, "ringo_torch: ", what, ": root ", root, " is not in [0, ",
              size, ")");
}

Body AllReduceBody(at::Tensor tensor, Reduction r) {
  return [tensor, r](const RunContext& ctx) {
    if (tensor.numel() == 0) return;
    at::Tensor buf = Dense(tensor);
    at::Tensor send = r.Prepare(buf);
    ctx.comm->Check(ringoAllReduce(send.data_ptr(), buf.data_ptr(), buf.numel(), r.dtype, r.op,
                                   ctx.comm->get(), ctx.stream),
                    "allreduce");
    if (!buf.is_same(tensor)) tensor.copy_(buf);
  };
}

Body AllReduceCoalescedBody(std::vector<at::Tensor> tensors, Reduction r) {
  return [tensors, r](const RunContext& ctx) {
    std::vector<at::Tensor> flat_views;
    int64_t total = 0;
    for (const at::Tensor& t : tensors) {
      flat_views.push_back(t.reshape({-1}));
      total += t.numel();
    }
    if (total == 0) return;
    at::Tensor flat = at::cat(flat_views);
    at::Tensor send = r.Prepare(flat);
    ctx.comm->Check(ringoAllReduce(send.data_ptr(), flat.data_ptr(), total, r.dtype, r.op,
                                   ctx.comm->get(), ctx.stream),
                    "allreduce_coalesced");
    int64_t offset = 0;
    for (const at::Tensor& t : tensors) {
      t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  };
}

Body BroadcastBody(at::Tensor tensor, int root) {
  return [tensor, root](const RunContext& ctx) {
    if (tensor.numel() == 0) return;
    at::Tensor buf = Dense(tensor);
    const Elements e = ElementsOf(buf);
    ctx.comm->Check(ringoBroadcast(buf.data_ptr(), buf.data_ptr(), e.count, e.dtype, root,
                                   ctx.comm->get(), ctx.stream),
                    "broadcast");
    if (!buf.is_same(tensor)) tensor.copy_(buf);
  };
}

Body ReduceBody(at::Tensor tensor, Reduction r, int root) {
  return [tensor, r, root](const RunContext& ctx) {
    if (tensor.numel() == 0) return;
    at::Tensor buf = Dense(tensor);
    at::Tensor send = r.Prepare(buf);
    // Ringo writes the result on the root only: the other ranks' tensors
    // keep their input.
    ctx.comm->Check(ringoReduce(send.data_ptr(), buf.data_ptr(), buf.numel(), r.dtype, r.op, root,
                                ctx.comm->get(), ctx.stream),
                    "reduce");
    if (ctx.comm->rank() == root && !buf.is_same(tensor)) tensor.copy_(buf);
  };
}

Body AllGatherBody(std::vector<at::Tensor> outputs, at::Tensor input) {
  return [outputs, input](const RunContext& ctx) {
    const int64_t n = input.numel();
    if (n == 0) return;
    at::Tensor in = Dense(input);
    at::Tensor flat = at::empty({static_cast<int64_t>(outputs.size()) * n}, input.options());
    const Elements e = ElementsOf(in);
    ctx.comm->Check(ringoAllGather(in.data_ptr(), flat.data_ptr(), e.count, e.dtype,
                                   ctx.comm->get(), ctx.stream),
                    "allgather");
    for (size_t i = 0; i < outputs.size(); ++i) {
      outputs[i].copy_(flat.narrow(0, static_cast<int64_t>(i) * n, n).view(outputs[i].sizes()));
    }
  };
}

Body AllGatherBaseBody(at::Tensor output, at::Tensor input) {
  return [output, input](const RunContext& ctx) {
    if (input.numel() == 0) return;
    at::Tensor in = Dense(input);
    at::Tensor out = Dense(output);
    const Elements e = ElementsOf(in);
    ctx.comm->Check(ringoAllGather(in.data_ptr(), out.data_ptr(), e.count, e.dtype, ctx.comm->get(),
                                   ctx.stream),
                    "_allgather_base");
    if (!out.is_same(output)) output.copy_(out);
  };
}

Body AllGatherCoalescedBody(std::vector<std::vector<at::Tensor>> outputs, std::vector<at::Tensor> inputs) {
  return [outputs, inputs](const RunContext& ctx) {
    std::vector<at::Tensor> flat_views;
    for (const at::Tensor& t : inputs) flat_views.push_back(t.reshape({-1}));
    at::Tensor in = at::cat(flat_views);
    const int64_t per_rank = in.numel();
    if (per_rank == 0) return;
    at::Tensor out = at::empty({per_rank * static_cast<int64_t>(outputs.size())}, in.options());
    AllGatherBaseBody(out, in)(ctx);
    for (size_t r = 0; r < outputs.size(); ++r) {
      int64_t offset = static_cast<int64_t>(r) * per_rank;
      for (const at::Tensor& o : outputs[r]) {
        o.copy_(out.narrow(0, offset, o.numel()).view(o.sizes()));
        offset += o.numel();
      }
    }
  };
}

Body SparseAllReduceBody(at::Tensor tensor) {
  return [tensor](const RunContext& ctx) {
    const int n = ctx.comm->size();
    at::Tensor input = tensor.coalesce();
    at::Tensor indices = input._indices().contiguous();  // sparse_dim x nnz, int64
    at::Tensor values = input._values().contiguous();    // nnz x dense sizes
    const int64_t nnz = input._nnz();
    // Each rank's shape and count, so that the ranks check they agree and
    // know how much of the padded gathers is real.
    const int64_t dims = input.dim();
    at::Tensor meta = at::empty({3 + dims}, at::kLong);
    meta[0] = nnz;
    meta[1] = input.sparse_dim();
    meta[2] = input.dense_dim();
    for (int64_t d = 0; d < dims; ++d) meta[3 + d] = input.size(d);
    at::Tensor metas = at::empty({n * (3 + dims)}, at::kLong);
    AllGatherBaseBody(metas, meta)(ctx);
    metas = metas.view({n, 3 + dims});
    int64_t max_nnz = 0;
    for (int r = 0; r < n; ++r) {
      TORCH_CHECK(at::equal(metas[r].narrow(0, 1, 2 + dims), meta.narrow(0, 1, 2 + dims)),
                  "ringo_torch: allreduce of sparse tensors: rank ", r,
                  "'s tensor differs in its sizes or sparse and dense dimensions");
      max_nnz = std::max(max_nnz, metas[r][0].item<int64_t>());
    }
    // Pad to the largest count and gather indices and values.
    std::vector<int64_t> value_rest(values.sizes().begin() + 1, values.sizes().end());
    std::vector<int64_t> padded_values_shape{max_nnz};
    padded_values_shape.insert(padded_values_shape.end(), value_rest.begin(), value_rest.end());
    at::Tensor my_indices = at::zeros({indices.size(0), max_nnz}, indices.options());
    at::Tensor my_values = at::zeros(padded_values_shape, values.options());
    if (nnz > 0) {
      my_indices.narrow(1, 0, nnz).copy_(indices);
      my_values.narrow(0, 0, nnz).copy_(values);
    }
    std::vector<int64_t> all_indices_shape{n, indices.size(0), max_nnz};
    std::vector<int64_t> all_values_shape{n};
    all_values_shape.insert(all_values_shape.end(), padded_values_shape.begin(), padded_values_shape.end());
    at::Tensor all_indices = at::empty(all_indices_shape, indices.options());
    at::Tensor all_values = at::empty(all_values_shape, values.options());
    if (max_nnz > 0) {
      AllGatherBaseBody(all_indices.view({-1}), my_indices.view({-1}))(ctx);
      AllGatherBaseBody(all_values.view({-1}), my_values.reshape({-1}))(ctx);
    }
    at::Tensor sum;
    for (int r = 0; r < n; ++r) {
      const int64_t k = metas[r][0].item<int64_t>();
      at::Tensor part = at::sparse_coo_tensor(all_indices[r].narrow(1, 0, k), all_values[r].narrow(0, 0, k),
                                              input.sizes(), input.options());
      sum = r == 0 ? part : sum + part;
    }
    tensor.copy_(sum.coalesce());
  };
}

Body ReduceScatterBody(at::Tensor output, std::vector<at::Tensor> inputs, Reduction r) {
  return [output, inputs, r](const RunContext& ctx) {
    const int64_t n = output.numel();
    if (n == 0) return;
    std::vector<at::Tensor> flat_views;
    for (const at::Tensor& t : inputs) flat_views.push_back(t.reshape({-1}));
    at::Tensor send = r.Prepare(at::cat(flat_views));
    at::Tensor out = Dense(output);
    ctx.comm->Check(ringoReduceScatter(send.data_ptr(), out.data_ptr(), n, r.dtype, r.op,
                                       ctx.comm->get(), ctx.stream),
                    "reduce_scatter");
    if (!out.is_same(output)) output.copy_(out);
  };
}

Body ReduceScatterBaseBody(at::Tensor output, at::Tensor input, Reduction r) {
  return [output, input, r](const RunContext& ctx) {
    const int64_t n = output.numel();
    if (n == 0) return;
    at::Tensor send = r.Prepare(Dense(input));
    at::Tensor out = Dense(output);
    ctx.comm->Check(ringoReduceScatter(send.data_ptr(), out.data_ptr(), n, r.dtype, r.op,
                                       ctx.comm->get(), ctx.stream),
                    "_reduce_scatter_base");
    if (!out.is_same(output)) output.copy_(out);
  };
}

Body BarrierBody(at::Tensor scratch) {
  return [scratch](const RunContext& ctx) {
    ctx.comm->Check(ringoAllReduce(scratch.data_ptr(), scratch.data_ptr(), 1, ringoUint8, ringoMax,
                                   ctx.comm->get(), ctx.stream),
                    "barrier");
  };
}

}  // namespace ringo::pytorch
