// How a communicator moves data: engines behind one small interface. A
// communicator owns its engines (each engine owns its connections) and, per
// call, runs the first engine that takes it (engines/registry.h's order):
//
//   host memory   wire (compressed sums between hosts, where a wire is
//                 set), recursive doubling (small all-reduces across
//                 hosts), direct (wraps one-shot and ring as its fallback),
//                 one-shot board, host ring (wrapped by the deterministic
//                 ordering under RINGO_DETERMINISTIC)
//   GPU memory    GPU ring
//
// and point-to-point (ringoSend/ringoRecv, all-to-all, gather, scatter) on
// its one PointToPoint engine, host or GPU.
//
// Thread safety: Run is called by the communicator's one user thread at a
// time; Abort from any thread (it must not wait for Run); Shutdown once,
// after the last Run.
#ifndef RINGO_COLLECTIVES_ENGINES_ENGINE_H_
#define RINGO_COLLECTIVES_ENGINES_ENGINE_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "base/cuda.h"
#include "base/device/dtype.h"
#include "base/status.h"
#include "collectives/plan/planner.h"
#include "kernels/coll_args.h"
#include "transport/fifo/counter.h"
#include "transport/signature.h"

namespace ringo::collectives {

// One call, as the communicator hands it to an engine.
struct Call {
  kernels::CollArgs args;
  transport::CallSignature sig;  // seq 0: not checked
  uint64_t seq = 0;              // the communicator's collectives so far, this one included
  void* stream = nullptr;        // GPU engines: the caller's cudaStream_t
  // GPU engines: whether `stream` is capturing a CUDA graph, and into which
  // capture sequence (the residence asks once per call: Residence::Launch).
  bool capturing = false;
  unsigned long long capture_id = 0;
  // How this rank waits (its abort flag, deadline, spin and yield counts, the
  // wait cells of its host's ranks); engines set `channel`.
  transport::WaitContext wait;
  // Host engines share one plan per call (HostPlan).
  std::optional<CollPlan> plan;
  // The call's signature is on the board already (a direct attempt that fell
  // back posted it): the ring does not post it again.
  bool board_posted = false;
  // Set by the engine once a failure could leave the peers waiting for this
  // rank (the communicator then fails and tells them); a call refused before
  // that leaves the communicator as it was.
  bool fatal = false;
  // The communicator's wire format for what crosses the network (a
  // kernels::Wire; 0: none), as set when the call was made.
  int wire = 0;
};

// The plan host engines share for one call, made at its first use.
inline const CollPlan& HostPlan(Call& call, int nranks, const CommGeometry& geometry) {
  if (!call.plan) call.plan = PlanCollective(call.args, nranks, geometry);
  return *call.plan;
}

class Engine {
 public:
  virtual ~Engine() = default;
  virtual const char* name() const = 0;
  // Whether this engine runs `call` (every rank answers alike for the same
  // call: the choice depends only on what every rank agreed on at init and
  // on the call's arguments).
  virtual bool Takes(Call& call) = 0;
  // Host engines: the collective, to completion on this rank. GPU engines:
  // enqueued on call.stream, completion the stream's. A failure may leave
  // the peers waiting: the communicator then fails and aborts.
  virtual base::Status Run(Call& call) = 0;
  // Tells the peers why this rank stops (`why`, in collective `seq`) and
  // ends this rank's waits. Any thread; does not wait.
  virtual void Abort(const base::Status& why, uint64_t seq) = 0;
  // Waits for work the engine enqueued (GPU engines); OK otherwise.
  virtual base::Status Synchronize() { return base::OkStatus(); }
  // What a kernel recorded after its call returned (GPU engines); OK
  // otherwise. Any thread.
  virtual base::Status AsyncError() const { return base::OkStatus(); }
  // Whether AsyncError can report anything (calls complete after they return).
  virtual bool asynchronous() const { return false; }
};

struct P2pOp {
  bool send = true;
  int peer = 0;
  const void* send_buf = nullptr;  // send: the bytes to send
  void* recv_buf = nullptr;        // recv: where they go
  size_t bytes = 0;
};

// One point-to-point call, as the communicator hands it to its engine.
struct P2pCall {
  void* stream = nullptr;        // GPU: the caller's cudaStream_t
  bool capturing = false;        // as Call's
  unsigned long long capture_id = 0;
  transport::WaitContext wait;   // as Call's
  bool fatal = false;            // as Call's
  // The exchanges of a collective (the wire's, recursive doubling's): waits
  // and the hang diagnosis name the collective and its number (wait.coll,
  // wait.seq), not ringoSend/ringoRecv.
  bool collective = false;
};

// ringoScalarDevice on a host communicator: the premul-sum scalar behind
// args->scalar_ptr read into args->scalar now (the host engines read it
// when the collective runs, as NCCL's kernels do); nothing for other calls.
inline base::Status ReadScalarNow(kernels::CollArgs* args) {
  if (args->op != base::RedOp::kPreMulSum || args->scalar_ptr == nullptr) return base::Status();
  args->scalar = 0;
  RETURN_IF_ERROR(base::CopyToHost(&args->scalar, args->scalar_ptr, base::DataTypeSize(args->dtype))
                      .WithContext("reading the premul-sum scalar"));
  args->scalar_ptr = nullptr;
  return base::Status();
}

// A collective's exchange over the point-to-point engine (the wire's,
// recursive doubling's): the call's stream, capture and waits.
inline P2pCall CollectiveExchange(const Call& call) {
  P2pCall p2p_call;
  p2p_call.stream = call.stream;
  p2p_call.capturing = call.capturing;
  p2p_call.capture_id = call.capture_id;
  p2p_call.wait = call.wait;
  p2p_call.collective = true;
  return p2p_call;
}

// Sends and receives: one ringoSend/ringoRecv, or every one a group queued
// for the communicator. Matching is NCCL's: the k-th send from s to r meets
// the k-th receive r posts from s.
class PointToPoint {
 public:
  virtual ~PointToPoint() = default;
  // Whether `ops` can run on rank `rank`: sends to and receives from
  // oneself pair up, with equal sizes (InvalidUsage otherwise). Touches
  // nothing, so a call it refuses leaves the communicator as it was.
  static base::Status CheckSelf(int rank, const std::vector<P2pOp>& ops);
  // Host: to completion; GPU: enqueued on call.stream.
  virtual base::Status Run(const std::vector<P2pOp>& ops, P2pCall& call) = 0;
  virtual void Abort(const base::Status& why, uint64_t seq) = 0;
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_ENGINE_H_
