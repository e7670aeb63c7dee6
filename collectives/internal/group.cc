#include "collectives/internal/group.h"

#include <cstring>
#include <algorithm>
#include <string>
#include <thread>

#include "base/check.h"
#include "collectives/internal/boundary.h"

namespace ringo::collectives::internal {
namespace {

using base::Status;

thread_local int t_group_depth = 0;
thread_local uint64_t t_groups = 0;  // outermost groups started on this thread
// The queued operations are t_group[0, t_group_size); later entries are
// spent ones kept for their allocations.
thread_local std::vector<QueuedOp> t_group;
thread_local size_t t_group_size = 0;
thread_local QueuedOp t_scratch;

Status RunSplit(Communicator* c, QueuedOp& op) {
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> child,
                   c->Split(op.color, op.key, op.inherit ? nullptr : &op.options));
  if (child == nullptr) {
    *op.newcomm = nullptr;
    return Status();
  }
  auto* handle = new ringoComm();
  handle->Set(std::move(child));
  *op.newcomm = Register(handle);
  return Status();
}

void Stage(QueuedOp& op) {
  if (op.staged != nullptr && !op.staged->empty()) std::memcpy(op.staged->data(), op.stage_from, op.staged->size());
}

// The names of a batch's calls, for a message ("ringoSend/ringoRecv").
std::string Names(const std::vector<QueuedOp*>& ops) {
  std::string names;
  for (QueuedOp* op : ops) {
    if (op->kind != QueuedOp::Kind::kP2p || names.find(op->name) != std::string::npos) continue;
    names += std::string(names.empty() ? "" : "/") + op->name;
  }
  return names;
}

// One communicator's share of a group: collectives and splits in order,
// then every send and receive as one batch.
Status RunComm(ringoComm* comm, const std::vector<QueuedOp*>& ops) {
  ASSIGN_OR_RETURN(Communicator * c, ResolveReady(comm));
  thread_local std::vector<P2pOp> batch;  // each thread its own: communicators run side by side
  batch.clear();
  ringoStream_t stream = nullptr;
  OpTrace trace;
  for (QueuedOp* op : ops) {
    switch (op->kind) {
      case QueuedOp::Kind::kCollective:
        RETURN_IF_ERROR(c->Run(op->args, op->stream, op->trace).WithContext(op->name));
        break;
      case QueuedOp::Kind::kSplit:
        RETURN_IF_ERROR(RunSplit(c, *op).WithContext(op->name));
        break;
      case QueuedOp::Kind::kP2p:
        if (batch.empty()) {
          stream = op->stream;
          trace = op->trace;
        }
        batch.insert(batch.end(), op->ops.begin(), op->ops.end());
        break;
    }
  }
  for (QueuedOp* op : ops) {
    if (op->kind == QueuedOp::Kind::kP2p) Stage(*op);
  }
  if (!batch.empty()) {
    const Status st = c->RunP2p(batch, stream, trace);
    if (!st.ok()) return st.WithContext(Names(ops));
  }
  return Status();
}

}  // namespace

void QueuedOp::Reset(Kind k, ringoComm* c, const char* n, ringoStream_t s) {
  kind = k;
  comm = c;
  name = n;
  stream = s;
  trace = OpTrace{CallScope::Ticks(), CurrentGroup()};
  staged.reset();
  // Only the fields of `k` are read: the others keep what they held.
  switch (k) {
    case Kind::kCollective:
      args = kernels::CollArgs();
      break;
    case Kind::kP2p:
      ops.clear();
      stage_from = nullptr;
      break;
    case Kind::kSplit:
      color = key = 0;
      newcomm = nullptr;
      inherit = true;
      options = CommOptions();
      break;
  }
}

bool InGroup() { return t_group_depth > 0; }

uint64_t CurrentGroup() { return t_group_depth > 0 ? t_groups : 0; }

QueuedOp& NextOp(QueuedOp::Kind kind, ringoComm* comm, const char* name, ringoStream_t stream) {
  QueuedOp* op = &t_scratch;
  if (InGroup()) {
    if (t_group_size == t_group.size()) t_group.emplace_back();
    op = &t_group[t_group_size];
  }
  op->Reset(kind, comm, name, stream);
  return *op;
}

void Queue(QueuedOp& op) {
  RINGO_CHECK(InGroup() && t_group_size < t_group.size() && &op == &t_group[t_group_size],
              "Queue takes the entry NextOp returned inside a group");
  ++t_group_size;
}

Status RunNow(QueuedOp& op) {
  ASSIGN_OR_RETURN(Communicator * c, ResolveReady(op.comm));
  switch (op.kind) {
    case QueuedOp::Kind::kCollective:
      return c->Run(op.args, op.stream, op.trace);
    case QueuedOp::Kind::kSplit:
      return RunSplit(c, op);
    case QueuedOp::Kind::kP2p:
      Stage(op);
      return c->RunP2p(op.ops, op.stream, op.trace);
  }
  return base::Internal("unknown queued operation");
}

Status GroupStart() {
  if (t_group_depth == 0) ++t_groups;
  ++t_group_depth;
  return Status();
}

Status GroupEnd() {
  if (t_group_depth == 0) return base::InvalidUsage("ringoGroupEnd without a matching ringoGroupStart");
  if (--t_group_depth > 0) return Status();
  const size_t queued = t_group_size;
  t_group_size = 0;  // the entries stay allocated for the next group
  if (queued == 0) return Status();
  bool one_comm = true;
  for (size_t k = 1; k < queued && one_comm; ++k) one_comm = t_group[k].comm == t_group[0].comm;
  if (one_comm) {  // the common case, on this thread alone
    thread_local std::vector<QueuedOp*> ops;
    ops.clear();
    for (size_t k = 0; k < queued; ++k) ops.push_back(&t_group[k]);
    const Status st = RunComm(t_group[0].comm, ops);
    if (!st.ok()) Finish(t_group[0].comm, "ringoGroupEnd", st);
    return st;
  }
  // Per communicator, in issue order; communicators run side by side, since
  // one thread may be driving every rank of the ring.
  // Kept per thread for their allocations; bound to references, which the
  // threads below capture (a lambda names another thread's thread_locals).
  thread_local std::vector<ringoComm*> t_order;
  thread_local std::vector<std::vector<QueuedOp*>> t_per_comm;
  thread_local std::vector<Status> t_results;
  std::vector<ringoComm*>& order = t_order;
  std::vector<std::vector<QueuedOp*>>& per_comm = t_per_comm;
  std::vector<Status>& results = t_results;
  order.clear();
  for (auto& list : per_comm) list.clear();
  for (size_t k = 0; k < queued; ++k) {
    QueuedOp& op = t_group[k];
    size_t i = std::find(order.begin(), order.end(), op.comm) - order.begin();
    if (i == order.size()) {
      order.push_back(op.comm);
      if (per_comm.size() < order.size()) per_comm.emplace_back();
    }
    per_comm[i].push_back(&op);
  }
  results.assign(order.size(), Status());
  std::vector<std::thread> threads;
  for (size_t i = 1; i < order.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = RunComm(order[i], per_comm[i]); });
  }
  if (!order.empty()) results[0] = RunComm(order[0], per_comm[0]);
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < order.size(); ++i) {
    if (!results[i].ok()) Finish(order[i], "ringoGroupEnd", results[i]);
  }
  for (const Status& st : results) {
    if (!st.ok()) return st;
  }
  return Status();
}

}  // namespace ringo::collectives::internal
