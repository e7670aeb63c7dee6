// The one place where a runtime (datatype, op) becomes a template
// instantiation, for the host executors and the CUDA kernel launchers alike:
// Fn<T, kOp>::Run(args...). Header-only, no CUDA.
#ifndef RINGO_KERNELS_INTERNAL_DISPATCH_H_
#define RINGO_KERNELS_INTERNAL_DISPATCH_H_

#include <cstdint>
#include <utility>

#include "base/device/dtype.h"
#include "base/status.h"

namespace ringo::kernels::internal {

// Fn<T, op>::Run(args...) for the runtime `op`; `unknown()` (called only for a
// value outside the enum) gives the result otherwise. Every Fn<T, op>::Run
// returns the type `unknown()` returns.
template <typename T, template <typename, base::RedOp> class Fn, typename Unknown, typename... Args>
auto DispatchOpOr(Unknown unknown, base::RedOp op, Args&&... args) -> decltype(unknown()) {
  switch (op) {
    case base::RedOp::kSum: return Fn<T, base::RedOp::kSum>::Run(std::forward<Args>(args)...);
    case base::RedOp::kProd: return Fn<T, base::RedOp::kProd>::Run(std::forward<Args>(args)...);
    case base::RedOp::kMax: return Fn<T, base::RedOp::kMax>::Run(std::forward<Args>(args)...);
    case base::RedOp::kMin: return Fn<T, base::RedOp::kMin>::Run(std::forward<Args>(args)...);
    case base::RedOp::kAvg: return Fn<T, base::RedOp::kAvg>::Run(std::forward<Args>(args)...);
    case base::RedOp::kPreMulSum: return Fn<T, base::RedOp::kPreMulSum>::Run(std::forward<Args>(args)...);
  }
  return unknown();
}

// Fn<T, op>::Run(args...) for the runtime (dtype, op).
template <template <typename, base::RedOp> class Fn, typename Unknown, typename... Args>
auto DispatchTypeOpOr(Unknown unknown, base::DataType dtype, base::RedOp op, Args&&... args)
    -> decltype(unknown()) {
  using base::DataType;
  switch (dtype) {
    case DataType::kInt8: return DispatchOpOr<int8_t, Fn>(unknown, op, std::forward<Args>(args)...);
    case DataType::kUint8: return DispatchOpOr<uint8_t, Fn>(unknown, op, std::forward<Args>(args)...);
    case DataType::kInt32: return DispatchOpOr<int32_t, Fn>(unknown, op, std::forward<Args>(args)...);
    case DataType::kUint32: return DispatchOpOr<uint32_t, Fn>(unknown, op, std::forward<Args>(args)...);
    case DataType::kInt64: return DispatchOpOr<int64_t, Fn>(unknown, op, std::forward<Args>(args)...);
    case DataType::kUint64: return DispatchOpOr<uint64_t, Fn>(unknown, op, std::forward<Args>(args)...);
    case DataType::kFloat16: return DispatchOpOr<base::Half, Fn>(unknown, op, std::forward<Args>(args)...);
    case DataType::kFloat32: return DispatchOpOr<float, Fn>(unknown, op, std::forward<Args>(args)...);
    case DataType::kFloat64: return DispatchOpOr<double, Fn>(unknown, op, std::forward<Args>(args)...);
    case DataType::kBFloat16: return DispatchOpOr<base::BFloat16, Fn>(unknown, op, std::forward<Args>(args)...);
    case DataType::kFloat8E4M3: return DispatchOpOr<base::Fp8E4M3, Fn>(unknown, op, std::forward<Args>(args)...);
    case DataType::kFloat8E5M2: return DispatchOpOr<base::Fp8E5M2, Fn>(unknown, op, std::forward<Args>(args)...);
  }
  return unknown();
}

// The host form: Fn<T, op>::Run returns a base::Status.
template <template <typename, base::RedOp> class Fn, typename... Args>
base::Status DispatchTypeOp(base::DataType dtype, base::RedOp op, Args&&... args) {
  return DispatchTypeOpOr<Fn>([] { return base::InvalidArgument("unknown datatype or reduction op"); }, dtype, op,
                              std::forward<Args>(args)...);
}

}  // namespace ringo::kernels::internal

#endif  // RINGO_KERNELS_INTERNAL_DISPATCH_H_
