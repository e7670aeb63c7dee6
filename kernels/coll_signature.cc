#include "kernels/coll_signature.h"

#include "base/device/dtype.h"

namespace ringo::kernels {
namespace {

// shape: bits 0-7 the collective + 1, 8-15 the datatype, 16-23 the op.
constexpr uint32_t Shape(Coll coll, base::DataType dtype, base::RedOp op) {
  return (static_cast<uint32_t>(coll) + 1) | (static_cast<uint32_t>(dtype) << 8) | (static_cast<uint32_t>(op) << 16);
}

const char* CollName(int coll) {
  static const char* const kNames[] = {"AllReduce", "ReduceScatter", "AllGather", "Broadcast", "Reduce"};
  return coll >= 0 && coll < 5 ? kNames[coll] : nullptr;
}

}  // namespace

transport::CallSignature MakeSignature(const CollArgs& args, uint64_t seq) {
  transport::CallSignature s;
  s.seq = seq;
  s.count = args.count;
  const bool uses_op = args.coll != Coll::kAllGather && args.coll != Coll::kBroadcast;
  const bool rooted = args.coll == Coll::kBroadcast || args.coll == Coll::kReduce;
  s.shape = Shape(args.coll, args.dtype, uses_op ? args.op : base::RedOp::kSum);
  s.root = rooted ? args.root : 0;
  return s;
}

std::string DescribeSignature(const transport::CallSignature& sig) {
  const int coll = static_cast<int>(sig.shape & 0xff) - 1;
  const int dtype = static_cast<int>((sig.shape >> 8) & 0xff);
  const int op = static_cast<int>((sig.shape >> 16) & 0xff);
  const char* name = CollName(coll);
  std::string s = "#" + std::to_string(sig.seq) + " ";
  if (name == nullptr || !base::IsValidDataType(dtype) || op >= base::kNumReduceOps || (sig.shape >> 24) != 0) {
    return s + "an unknown call (shape " + std::to_string(sig.shape) + ", count " + std::to_string(sig.count) + ")";
  }
  s += std::string(name) + "(count " + std::to_string(sig.count) + ", " +
       base::DataTypeName(static_cast<base::DataType>(dtype));
  const Coll c = static_cast<Coll>(coll);
  if (c != Coll::kAllGather && c != Coll::kBroadcast) s += std::string(", ") + base::RedOpName(static_cast<base::RedOp>(op));
  if (c == Coll::kBroadcast || c == Coll::kReduce) s += ", root " + std::to_string(sig.root);
  return s + ")";
}

base::Status SignatureMismatch(int self_rank, const transport::CallSignature& mine, int peer_rank,
                               const transport::CallSignature& theirs) {
  const std::string msg = "mismatched collectives: rank " + std::to_string(self_rank) + " called " +
                          DescribeSignature(mine) + " but rank " + std::to_string(peer_rank) + " called " +
                          DescribeSignature(theirs);
  return base::InvalidUsage(msg).WithOrigin(peer_rank, msg);
}

}  // namespace ringo::kernels
