#include "collectives/internal/group.h"

#include <cstring>
#include <map>
#include <string>
#include <thread>

#include "collectives/internal/boundary.h"

namespace ringo::collectives::internal {
namespace {

using base::Status;

thread_local int t_group_depth = 0;
thread_local std::vector<QueuedOp> t_group;

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

// One communicator's share of a group: collectives and splits in order,
// then every send and receive as one batch.
Status RunComm(ringoComm* comm, const std::vector<QueuedOp*>& ops) {
  ASSIGN_OR_RETURN(Communicator * c, ResolveReady(comm));
  std::vector<P2pOp> batch;
  ringoStream_t stream = nullptr;
  std::string names;
  for (QueuedOp* op : ops) {
    switch (op->kind) {
      case QueuedOp::Kind::kCollective:
        RETURN_IF_ERROR(c->Run(op->args, op->stream).WithContext(op->name));
        break;
      case QueuedOp::Kind::kSplit:
        RETURN_IF_ERROR(RunSplit(c, *op).WithContext(op->name));
        break;
      case QueuedOp::Kind::kP2p:
        if (names.find(op->name) == std::string::npos) names += std::string(names.empty() ? "" : "/") + op->name;
        if (batch.empty()) stream = op->stream;
        batch.insert(batch.end(), op->ops.begin(), op->ops.end());
        break;
    }
  }
  for (QueuedOp* op : ops) {
    if (op->kind == QueuedOp::Kind::kP2p) Stage(*op);
  }
  if (!batch.empty()) RETURN_IF_ERROR(c->RunP2p(batch, stream).WithContext(names));
  return Status();
}

}  // namespace

bool InGroup() { return t_group_depth > 0; }

void Queue(QueuedOp op) { t_group.push_back(std::move(op)); }

Status RunNow(QueuedOp& op) {
  ASSIGN_OR_RETURN(Communicator * c, ResolveReady(op.comm));
  switch (op.kind) {
    case QueuedOp::Kind::kCollective:
      return c->Run(op.args, op.stream);
    case QueuedOp::Kind::kSplit:
      return RunSplit(c, op);
    case QueuedOp::Kind::kP2p:
      Stage(op);
      return c->RunP2p(op.ops, op.stream);
  }
  return base::Internal("unknown queued operation");
}

Status GroupStart() {
  ++t_group_depth;
  return Status();
}

Status GroupEnd() {
  if (t_group_depth == 0) return base::InvalidUsage("ringoGroupEnd without a matching ringoGroupStart");
  if (--t_group_depth > 0) return Status();
  std::vector<QueuedOp> queued;
  queued.swap(t_group);
  // Per communicator, in issue order; communicators run side by side, since
  // one thread may be driving every rank of the ring.
  std::vector<ringoComm*> order;
  std::map<ringoComm*, std::vector<QueuedOp*>> per_comm;
  for (QueuedOp& op : queued) {
    if (per_comm.count(op.comm) == 0) order.push_back(op.comm);
    per_comm[op.comm].push_back(&op);
  }
  std::vector<Status> results(order.size());
  std::vector<std::thread> threads;
  for (size_t i = 1; i < order.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = RunComm(order[i], per_comm[order[i]]); });
  }
  if (!order.empty()) results[0] = RunComm(order[0], per_comm[order[0]]);
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
