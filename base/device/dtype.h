// Internal datatype and reduction-op enums (values equal NCCL's and the public
// API's) and their C++ types. __host__ __device__.
#ifndef RINGO_BASE_DEVICE_DTYPE_H_
#define RINGO_BASE_DEVICE_DTYPE_H_

#include <cstddef>
#include <cstdint>

#include "base/device/fp8.h"
#include "base/device/half.h"
#include "base/device/macros.h"

namespace ringo::base {

enum class DataType : int {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kUint32 = 3,
  kInt64 = 4,
  kUint64 = 5,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBFloat16 = 9,
  kFloat8E4M3 = 10,
  kFloat8E5M2 = 11,
};
inline constexpr int kNumDataTypes = 12;

// kPreMulSum: each rank's input times its own scalar, then summed (the
// operators ringoRedOpCreatePreMulSum makes; its public values are handles
// from 5 up, so it is internal only).
enum class RedOp : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4, kPreMulSum = 5 };
inline constexpr int kNumRedOps = 5;     // the built-in operators (public, NCCL's)
inline constexpr int kNumReduceOps = 6;  // with kPreMulSum: what the executors and kernels instantiate

RINGO_HD constexpr bool IsValidDataType(int v) { return v >= 0 && v < kNumDataTypes; }
RINGO_HD constexpr bool IsValidRedOp(int v) { return v >= 0 && v < kNumRedOps; }

RINGO_HD constexpr size_t DataTypeSize(DataType t) {
  switch (t) {
    case DataType::kInt8:
    case DataType::kUint8:
    case DataType::kFloat8E4M3:
    case DataType::kFloat8E5M2: return 1;
    case DataType::kFloat16:
    case DataType::kBFloat16: return 2;
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kFloat32: return 4;
    case DataType::kInt64:
    case DataType::kUint64:
    case DataType::kFloat64: return 8;
  }
  return 0;
}

inline const char* DataTypeName(DataType t) {
  switch (t) {
    case DataType::kInt8: return "int8";
    case DataType::kUint8: return "uint8";
    case DataType::kInt32: return "int32";
    case DataType::kUint32: return "uint32";
    case DataType::kInt64: return "int64";
    case DataType::kUint64: return "uint64";
    case DataType::kFloat16: return "half";
    case DataType::kFloat32: return "float";
    case DataType::kFloat64: return "double";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kFloat8E4M3: return "float8e4m3";
    case DataType::kFloat8E5M2: return "float8e5m2";
  }
  return "?";
}

inline const char* RedOpName(RedOp op) {
  switch (op) {
    case RedOp::kSum: return "sum";
    case RedOp::kProd: return "prod";
    case RedOp::kMax: return "max";
    case RedOp::kMin: return "min";
    case RedOp::kAvg: return "avg";
    case RedOp::kPreMulSum: return "premulsum";
  }
  return "?";
}

// The C++ type stored for each DataType.
template <DataType D> struct TypeOf;
template <> struct TypeOf<DataType::kInt8> { using type = int8_t; };
template <> struct TypeOf<DataType::kUint8> { using type = uint8_t; };
template <> struct TypeOf<DataType::kInt32> { using type = int32_t; };
template <> struct TypeOf<DataType::kUint32> { using type = uint32_t; };
template <> struct TypeOf<DataType::kInt64> { using type = int64_t; };
template <> struct TypeOf<DataType::kUint64> { using type = uint64_t; };
template <> struct TypeOf<DataType::kFloat16> { using type = Half; };
template <> struct TypeOf<DataType::kFloat32> { using type = float; };
template <> struct TypeOf<DataType::kFloat64> { using type = double; };
template <> struct TypeOf<DataType::kBFloat16> { using type = BFloat16; };
template <> struct TypeOf<DataType::kFloat8E4M3> { using type = Fp8E4M3; };
template <> struct TypeOf<DataType::kFloat8E5M2> { using type = Fp8E5M2; };

}  // namespace ringo::base

#endif  // RINGO_BASE_DEVICE_DTYPE_H_
