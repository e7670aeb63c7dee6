// Groups at the C boundary: what ringoGroupStart/End queue (collectives,
// point-to-point batches, splits) and how the outermost ringoGroupEnd runs
// them: per communicator, the collectives and splits in issue order, then
// every send and receive of the group as one batch (so they progress
// together, as NCCL fuses a group's point-to-point operations); the
// communicators side by side on threads of their own, since one thread may
// drive every rank of a ringoCommInitAll set.
//
// Thread safety: the queue is per thread.
#ifndef RINGO_COLLECTIVES_INTERNAL_GROUP_H_
#define RINGO_COLLECTIVES_INTERNAL_GROUP_H_

#include <memory>
#include <vector>

#include "base/status.h"
#include "collectives/communicator.h"
#include "collectives/engines/engine.h"
#include "kernels/coll_args.h"
#include "ringo/ringo.h"

namespace ringo::collectives::internal {

struct QueuedOp {
  enum class Kind { kCollective, kP2p, kSplit };
  Kind kind = Kind::kCollective;
  ringoComm* comm = nullptr;
  const char* name = "";  // the C function, for messages
  ringoStream_t stream = nullptr;
  OpTrace trace;  // when it was called and in which group (the flight recorder)
  // kCollective
  kernels::CollArgs args;
  // kP2p: the sends and receives of one call (an all-to-all makes many).
  // An in-place all-to-all sends from `staged`, a copy of `stage_from`
  // taken when the batch runs.
  std::vector<P2pOp> ops;
  std::shared_ptr<std::vector<char>> staged;
  const void* stage_from = nullptr;
  // kSplit
  int color = 0;
  int key = 0;
  ringoComm_t* newcomm = nullptr;
  bool inherit = true;  // config NULL: the child inherits the parent's options
  CommOptions options;

  // Back to a fresh operation of `kind` (the fields of other kinds are left
  // as they were and never read), keeping what `ops` allocated.
  void Reset(Kind k, ringoComm* c, const char* n, ringoStream_t s);
};

bool InGroup();
// The group this thread is in (its count of outermost ringoGroupStart
// calls), 0 outside one.
uint64_t CurrentGroup();
// This thread's operation to fill for the next call, reset to `kind`: the
// group's next entry inside a group, a scratch entry outside one. Entries
// are reused, so a call in steady state allocates nothing.
QueuedOp& NextOp(QueuedOp::Kind kind, ringoComm* comm, const char* name, ringoStream_t stream);
// Queues the operation NextOp just returned (InGroup() must be true).
void Queue(QueuedOp& op);
// Runs `op` now (outside a group), on its communicator.
base::Status RunNow(QueuedOp& op);

base::Status GroupStart();
base::Status GroupEnd();

}  // namespace ringo::collectives::internal

#endif  // RINGO_COLLECTIVES_INTERNAL_GROUP_H_
