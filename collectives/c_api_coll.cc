// The collectives and groups at the C boundary: argument validation, then
// either run now or queue until the outermost ringoGroupEnd.
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "base/cuda.h"
#include "base/device/dtype.h"
#include "collectives/internal/boundary.h"
#include "ringo/ringo.h"

namespace {

namespace base = ringo::base;
namespace kernels = ringo::kernels;
using base::Status;
using ringo::collectives::Communicator;
using ringo::collectives::internal::Guard;
using ringo::collectives::internal::IsLive;
using ringo::collectives::internal::ResolveReady;

struct Pending {
  ringoComm* comm;
  kernels::CollArgs args;
  ringoStream_t stream;
};

thread_local int t_group_depth = 0;
thread_local std::vector<Pending> t_group;

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
Status Validate(Communicator* c, const kernels::CollArgs& a, int datatype, int op, ringoStream_t stream,
                bool uses_op) {
  if (!base::IsValidDataType(datatype)) return base::InvalidArgument("datatype " + std::to_string(datatype) + " is not a ringoDataType_t");
  if (uses_op && !base::IsValidRedOp(op)) return base::InvalidArgument("op " + std::to_string(op) + " is not a ringoRedOp_t");
  if (stream != nullptr && c->kind() == ringo::collectives::DeviceKind::kHost) {
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

ringoResult_t Issue(kernels::Coll coll, const void* send, void* recv, size_t count, int datatype, int op, int root,
                    ringoComm* comm, ringoStream_t stream) {
  return Guard(CollName(coll), comm, [&]() -> Status {
    ASSIGN_OR_RETURN(Communicator * c, ResolveReady(comm));
    kernels::CollArgs a;
    a.coll = coll;
    a.dtype = static_cast<base::DataType>(datatype);
    a.op = static_cast<base::RedOp>(op);
    a.send = send;
    a.recv = recv;
    a.count = count > static_cast<size_t>(std::numeric_limits<int64_t>::max()) ? -1 : static_cast<int64_t>(count);
    a.root = root;
    const bool uses_op = coll != kernels::Coll::kAllGather && coll != kernels::Coll::kBroadcast;
    if (!uses_op) a.op = base::RedOp::kSum;
    RETURN_IF_ERROR(Validate(c, a, datatype, op, stream, uses_op));
    if (c->finalized()) return base::InvalidUsage("the communicator was finalized");
    if (t_group_depth > 0) {
      t_group.push_back({comm, a, stream});
      return Status();
    }
    return c->Run(a, stream);
  });
}

// Runs (host) or enqueues (GPU) one communicator's queued operations in order.
Status RunQueue(ringoComm* comm, const std::vector<Pending>& ops) {
  auto c = ResolveReady(comm);
  if (!c.ok()) return c.status();
  for (const Pending& p : ops) RETURN_IF_ERROR((*c)->Run(p.args, p.stream).WithContext(CollName(p.args.coll)));
  return Status();
}

}  // namespace

extern "C" {

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
  return Guard("ringoGroupStart", nullptr, []() -> Status {
    ++t_group_depth;
    return Status();
  });
}

ringoResult_t ringoGroupEnd(void) {
  return Guard("ringoGroupEnd", nullptr, []() -> Status {
    if (t_group_depth == 0) return base::InvalidUsage("ringoGroupEnd without a matching ringoGroupStart");
    if (--t_group_depth > 0) return Status();
    std::vector<Pending> queued;
    queued.swap(t_group);
    // Per communicator, in issue order; communicators run side by side, since
    // one thread may be driving every rank of the ring.
    std::vector<ringoComm*> order;
    std::map<ringoComm*, std::vector<Pending>> per_comm;
    for (const Pending& p : queued) {
      if (per_comm.count(p.comm) == 0) order.push_back(p.comm);
      per_comm[p.comm].push_back(p);
    }
    std::vector<Status> results(order.size());
    std::vector<std::thread> threads;
    for (size_t i = 1; i < order.size(); ++i) {
      threads.emplace_back([&, i] { results[i] = RunQueue(order[i], per_comm[order[i]]); });
    }
    if (!order.empty()) results[0] = RunQueue(order[0], per_comm[order[0]]);
    for (auto& t : threads) t.join();
    for (size_t i = 0; i < order.size(); ++i) {
      if (!results[i].ok()) {
        ringo::collectives::internal::Finish(order[i], "ringoGroupEnd", results[i]);
      }
    }
    for (const Status& st : results) {
      if (!st.ok()) return st;
    }
    return Status();
  });
}

}  // extern "C"
