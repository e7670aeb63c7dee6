// The collectives and groups at the C boundary: argument validation, then
// either run now or queue until the outermost ringoGroupEnd
// (internal/group.h).
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "base/cuda.h"
#include "base/device/dtype.h"
#include "collectives/internal/boundary.h"
#include "collectives/internal/group.h"
#include "ringo/ringo.h"

namespace {

namespace base = ringo::base;
namespace kernels = ringo::kernels;
using base::Status;
using ringo::collectives::Communicator;
using ringo::collectives::internal::CallScope;
using ringo::collectives::internal::Guard;
using ringo::collectives::internal::IsLive;
using ringo::collectives::internal::ResolveReady;

const char* CollName(kernels::Coll c) {
  switch (c) {
    case kernels::Coll::kAllReduce: return "ringoAllReduce";
    case kernels::Coll::kReduceScatter: return "ringoReduceScatter";
    case kernels::Coll::kAllGather: return "ringoAllGather";
    case kernels::Coll::kBroadcast: return "ringoBroadcast";
    case kernels::Coll::kReduce: return "ringoReduce";
  }
  return "?";
}

// Host memory on a host communicator, memory of its device on a GPU one.
Status CheckBuffer(const Communicator* c, const void* p, const char* name, bool needed) {
  if (!needed) return Status();
  return c->CheckBuffer(p, name);
}

// Everything about a call that can be wrong before any data moves.
Status Validate(Communicator* c, const kernels::CollArgs& a, int datatype, ringoStream_t stream) {
  if (!base::IsValidDataType(datatype)) return base::InvalidArgument("datatype " + std::to_string(datatype) + " is not a ringoDataType_t");
  if (stream != nullptr && c->kind() == ringo::collectives::DeviceKind::kHost) {
    RETURN_IF_ERROR(c->CheckCapture(stream));  // a graph being captured: say so
    return base::InvalidArgument("stream must be NULL on a host communicator");
  }
  const uint64_t elem = base::DataTypeSize(a.dtype);
  const bool per_rank = a.coll == kernels::Coll::kReduceScatter || a.coll == kernels::Coll::kAllGather;
  const uint64_t factor = per_rank ? static_cast<uint64_t>(c->nranks()) : 1;
  const uint64_t limit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  const uint64_t count = static_cast<uint64_t>(a.count);
  if (a.count < 0 || count > limit / elem / factor) {
    return base::InvalidArgument("count " + std::to_string(static_cast<uint64_t>(a.count)) + " of " +
                                 base::DataTypeName(a.dtype) + " overflows the addressable size");
  }
  const bool rooted = a.coll == kernels::Coll::kBroadcast || a.coll == kernels::Coll::kReduce;
  if (rooted && (a.root < 0 || a.root >= c->nranks())) {
    return base::InvalidArgument("root " + std::to_string(a.root) + " is not in [0, " + std::to_string(c->nranks()) + ")");
  }
  const bool any = a.count > 0;
  const bool is_root = c->rank() == a.root;
  const bool needs_send = any && (a.coll != kernels::Coll::kBroadcast || is_root);
  const bool needs_recv = any && (a.coll != kernels::Coll::kReduce || is_root);
  RETURN_IF_ERROR(CheckBuffer(c, a.send, "sendbuff", needs_send));
  RETURN_IF_ERROR(CheckBuffer(c, a.recv, "recvbuff", needs_recv));
  return Status();
}

// A built-in operator, or one ringoRedOpCreatePreMulSum made on `c` for
// this call's datatype: a premul-sum with its scalar.
Status ResolveOp(Communicator* c, int op, kernels::CollArgs* a) {
  if (base::IsValidRedOp(op)) {
    a->op = static_cast<base::RedOp>(op);
    return Status();
  }
  if (op < ringoNumOps) return base::InvalidArgument("op " + std::to_string(op) + " is not a ringoRedOp_t");
  ASSIGN_OR_RETURN(const ringo::collectives::internal::UserOps::Op made, c->user_ops().Find(op));
  if (made.dtype != a->dtype) {
    return base::InvalidArgument("op " + std::to_string(op) + " was made by ringoRedOpCreatePreMulSum for " +
                                 base::DataTypeName(made.dtype) + ", but this call's datatype is " +
                                 base::DataTypeName(a->dtype));
  }
  a->op = base::RedOp::kPreMulSum;
  a->scalar = made.bits;
  a->scalar_ptr = made.ptr;
  return Status();
}

ringoResult_t Issue(kernels::Coll coll, const void* send, void* recv, size_t count, int datatype, int op, int root,
                    ringoComm* comm, ringoStream_t stream) {
  return Guard(CollName(coll), comm, [&]() -> Status {
    ASSIGN_OR_RETURN(Communicator * c, ResolveReady(comm));
    kernels::CollArgs a;
    a.coll = coll;
    a.dtype = static_cast<base::DataType>(datatype);
    a.op = base::RedOp::kSum;
    a.send = send;
    a.recv = recv;
    a.count = count > static_cast<size_t>(std::numeric_limits<int64_t>::max()) ? -1 : static_cast<int64_t>(count);
    a.root = root;
    const bool uses_op = coll != kernels::Coll::kAllGather && coll != kernels::Coll::kBroadcast;
    RETURN_IF_ERROR(Validate(c, a, datatype, stream));
    if (uses_op) RETURN_IF_ERROR(ResolveOp(c, op, &a));
    if (c->finalized()) return base::InvalidUsage("the communicator was finalized");
    if (ringo::collectives::internal::InGroup()) {
      using ringo::collectives::internal::QueuedOp;
      QueuedOp& queued =
          ringo::collectives::internal::NextOp(QueuedOp::Kind::kCollective, comm, CollName(coll), stream);
      queued.args = a;
      ringo::collectives::internal::Queue(queued);
      return Status();
    }
    return c->Run(a, stream, ringo::collectives::OpTrace{CallScope::Ticks(), 0});
  });
}

}  // namespace

extern "C" {

ringoResult_t ringoCommWireRound(const void* sendbuff, void* recvbuff, size_t count, ringoDataType_t datatype,
                                 ringoRedOp_t op, ringoComm_t comm) {
  return Guard("ringoCommWireRound", comm, [&]() -> Status {
    ASSIGN_OR_RETURN(Communicator * c, ResolveReady(comm));
    if (c->kind() != ringo::collectives::DeviceKind::kHost) {
      return base::InvalidUsage("ringoCommWireRound takes host communicators");
    }
    kernels::CollArgs a;
    a.coll = kernels::Coll::kAllReduce;
    a.dtype = static_cast<base::DataType>(datatype);
    a.send = sendbuff;
    a.recv = recvbuff;
    a.count = count > static_cast<size_t>(std::numeric_limits<int64_t>::max()) ? -1 : static_cast<int64_t>(count);
    RETURN_IF_ERROR(Validate(c, a, datatype, nullptr));
    RETURN_IF_ERROR(ResolveOp(c, op, &a));
    return c->WireRound(a, recvbuff);
  });
}

ringoResult_t ringoAllReduce(const void* sendbuff, void* recvbuff, size_t count, ringoDataType_t datatype,
                             ringoRedOp_t op, ringoComm_t comm, ringoStream_t stream) {
  return Issue(kernels::Coll::kAllReduce, sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
}

ringoResult_t ringoReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ringoDataType_t datatype,
                                 ringoRedOp_t op, ringoComm_t comm, ringoStream_t stream) {
  return Issue(kernels::Coll::kReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream);
}

ringoResult_t ringoAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ringoDataType_t datatype,
                             ringoComm_t comm, ringoStream_t stream) {
  return Issue(kernels::Coll::kAllGather, sendbuff, recvbuff, sendcount, datatype, 0, 0, comm, stream);
}

ringoResult_t ringoBroadcast(const void* sendbuff, void* recvbuff, size_t count, ringoDataType_t datatype, int root,
                             ringoComm_t comm, ringoStream_t stream) {
  return Issue(kernels::Coll::kBroadcast, sendbuff, recvbuff, count, datatype, 0, root, comm, stream);
}

ringoResult_t ringoReduce(const void* sendbuff, void* recvbuff, size_t count, ringoDataType_t datatype,
                          ringoRedOp_t op, int root, ringoComm_t comm, ringoStream_t stream) {
  return Issue(kernels::Coll::kReduce, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

ringoResult_t ringoGroupStart(void) {
  return Guard("ringoGroupStart", nullptr, [] { return ringo::collectives::internal::GroupStart(); });
}

ringoResult_t ringoGroupEnd(void) {
  return Guard("ringoGroupEnd", nullptr, [] { return ringo::collectives::internal::GroupEnd(); });
}

}  // extern "C"
