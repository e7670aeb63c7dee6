// The one place where a runtime (datatype, op) becomes a template
// instantiation for the host executors: Fn<T, kOp>::Run(args...).
#ifndef RINGO_KERNELS_INTERNAL_DISPATCH_H_
#define RINGO_KERNELS_INTERNAL_DISPATCH_H_

#include <cstdint>
#include <utility>

#include "base/device/dtype.h"
#include "base/status.h"

namespace ringo::kernels::internal {

template <typename T, template <typename, base::RedOp> class Fn, typename... Args>
base::Status DispatchOp(base::RedOp op, Args&&... args) {
  switch (op) {
    case base::RedOp::kSum: return Fn<T, base::RedOp::kSum>::Run(std::forward<Args>(args)...);
    case base::RedOp::kProd: return Fn<T, base::RedOp::kProd>::Run(std::forward<Args>(args)...);
    case base::RedOp::kMax: return Fn<T, base::RedOp::kMax>::Run(std::forward<Args>(args)...);
    case base::RedOp::kMin: return Fn<T, base::RedOp::kMin>::Run(std::forward<Args>(args)...);
    case base::RedOp::kAvg: return Fn<T, base::RedOp::kAvg>::Run(std::forward<Args>(args)...);
  }
  return base::InvalidArgument("unknown reduction op");
}

template <template <typename, base::RedOp> class Fn, typename... Args>
base::Status DispatchTypeOp(base::DataType dtype, base::RedOp op, Args&&... args) {
  using base::DataType;
  switch (dtype) {
    case DataType::kInt8: return DispatchOp<int8_t, Fn>(op, std::forward<Args>(args)...);
    case DataType::kUint8: return DispatchOp<uint8_t, Fn>(op, std::forward<Args>(args)...);
    case DataType::kInt32: return DispatchOp<int32_t, Fn>(op, std::forward<Args>(args)...);
    case DataType::kUint32: return DispatchOp<uint32_t, Fn>(op, std::forward<Args>(args)...);
    case DataType::kInt64: return DispatchOp<int64_t, Fn>(op, std::forward<Args>(args)...);
    case DataType::kUint64: return DispatchOp<uint64_t, Fn>(op, std::forward<Args>(args)...);
    case DataType::kFloat16: return DispatchOp<base::Half, Fn>(op, std::forward<Args>(args)...);
    case DataType::kFloat32: return DispatchOp<float, Fn>(op, std::forward<Args>(args)...);
    case DataType::kFloat64: return DispatchOp<double, Fn>(op, std::forward<Args>(args)...);
    case DataType::kBFloat16: return DispatchOp<base::BFloat16, Fn>(op, std::forward<Args>(args)...);
  }
  return base::InvalidArgument("unknown datatype");
}

}  // namespace ringo::kernels::internal

#endif  // RINGO_KERNELS_INTERNAL_DISPATCH_H_
