// The communicator: one rank's membership (rank, ranks, the control
// exchange its lazy connections and splits use), its lifecycle (ready ->
// finalized, or -> failed; aborted by ringoCommAbort) and error state, and
// the engines that move its data (engines/registry.h's EngineSet). Per call
// it hands the collective to the first engine that takes it; it holds no
// engine's state, and never asks which device it runs on: its residence
// (engines/residence.h) answers what depends on it.
//
// Two kinds, decided at init from every rank's wish (plan/device_choice.h):
// a host communicator's engines run each collective to completion inside
// Run(); a GPU communicator's enqueue a kernel on the caller's stream and
// return at once.
//
// Thread safety: Run() is called by one thread at a time (the C contract);
// Abort() may be called from any thread and waits for a running Run() to
// return (and, on a GPU, for the rank's kernels to stop); AsyncError() from
// any thread.
#ifndef RINGO_COLLECTIVES_COMMUNICATOR_H_
#define RINGO_COLLECTIVES_COMMUNICATOR_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/status.h"
#include "collectives/control/agreement.h"
#include "collectives/control/observer.h"
#include "collectives/engines/registry.h"
#include "collectives/internal/user_ops.h"
#include "kernels/coll_args.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/exchange.h"
#include "transport/connect/connector.h"

namespace ringo::collectives {

enum class DeviceKind : int { kHost = 0, kCuda = 1 };

struct CommOptions {
  int64_t timeout_ms = 0;  // 0: RINGO_TIMEOUT_MS
  // InitRank: this rank's wish (collectives/plan/device_choice.h; an int so this
  // header needs no more) and, when it wishes for a GPU, its CUDA device.
  int32_t device_wish = 0;  // DeviceWish::kHost; Split: kInheritDevice
  int cuda_device = -1;
  // Connect every pair for tagged point-to-point (engines/host_tagged.h) at
  // init; any rank asking is enough. Host communicators only.
  bool tagged = false;
  // The wire format between hosts (a kernels::Wire, ringoWire_t's values);
  // -1: RINGO_WIRE.
  int wire = -1;
};
// CommOptions::device_wish of a split child that lives where its parent does.
inline constexpr int32_t kInheritDevice = -1;

// Communicator::Shrink's flags (NCCL's values).
inline constexpr int kShrinkDefault = 0;
inline constexpr int kShrinkAbort = 1;

// What the flight recorder is told about a call besides its arguments.
struct OpTrace {
  uint64_t called = 0;  // ticks (TraceTicks) of the C call; 0: now
  uint64_t group = 0;   // the group it was queued in; 0: none
};

class Communicator {
 public:
  ~Communicator();

  // Joins the communicator named by `id` as `rank` of `nranks` (collective).
  // The ranks agree on host or GPU memory from every rank's
  // options.device_wish (AgreeOnDevice).
  static base::StatusOr<std::unique_ptr<Communicator>> InitRank(const transport::UniqueId& id, int nranks,
                                                                int rank, const CommOptions& options);
  // Creates all `nranks` ranks of a communicator in this process, each
  // joining as InitRank's ranks do but over an exchange in memory: host
  // memory when `cuda_devices` is empty, else rank r on CUDA device
  // cuda_devices[r] (one entry per rank; devices may repeat). Blocking.
  static base::StatusOr<std::vector<std::unique_ptr<Communicator>>> InitAll(
      int nranks, const CommOptions& options, const std::vector<int>& cuda_devices = {});

  // Host: runs one collective to completion on this rank (`stream` must be
  // null). CUDA: enqueues it on `stream` (a cudaStream_t) and returns;
  // completion is the stream's, a kernel's failure shows in AsyncError(). A
  // failure mid-way (a peer lost, a timeout, a mismatched call) leaves the
  // communicator failed: every later call returns that error, and its peers
  // are told. The C boundary has checked the arguments.
  base::Status Run(const kernels::CollArgs& args, void* stream = nullptr, const OpTrace& trace = OpTrace());

  // Runs a batch of sends and receives (engine.h's PointToPoint): one
  // ringoSend/ringoRecv, or every one a group queued for this communicator.
  // Failures fail the communicator, as Run's.
  base::Status RunP2p(const std::vector<P2pOp>& ops, void* stream = nullptr, const OpTrace& trace = OpTrace());

  // ringoSendTagged (send) and ringoRecvTagged (peer may be kAnySource; the
  // sender in *source): engines/host_tagged.h. InvalidUsage, leaving the
  // communicator as it was, where it was made without tagged pairs or a
  // receive meets a message of another size; other failures fail it, as
  // Run's.
  base::Status RunTagged(bool send, void* buf, size_t bytes, int peer, int32_t tag, int* source,
                         const OpTrace& trace = OpTrace());

  // ringoCommSplit: collective over this communicator's ranks (each passes
  // its color and key); returns this rank's child (null for a negative
  // color, RINGO_SPLIT_NOCOLOR), ranked by key then by rank here, made over
  // this communicator's exchange (no new unique id). `options` null:
  // inherited (timeout, host or GPU memory and device).
  base::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key, const CommOptions* options);

  // Elastic membership (communicator_elastic.cc, docs/elastic.md).
  // AgreeFailed: collective among the live ranks, the same
  // sorted list of failed ranks on each (control/agreement.h).
  base::StatusOr<std::vector<int>> AgreeFailed();
  // ringoCommShrink: collective among the ranks not in `exclude` (only they
  // call it); this rank's child, ranked in order of the ranks left, over
  // this communicator's exchange. kShrinkAbort first aborts what runs on
  // this communicator (a failed one needs it); kShrinkDefault needs a
  // healthy or revoked one. `options` null: inherited.
  base::StatusOr<std::unique_ptr<Communicator>> Shrink(const std::vector<int>& exclude, int flags,
                                                       const CommOptions* options);
  // ringoCommRevoke: stops what runs on this communicator on every rank
  // (the peers' calls fail naming this rank) and waits for this rank's to
  // return; nothing is freed, and later collectives are InvalidUsage.
  base::Status Revoke();
  // ringoCommGrow: collective over every rank of the grown communicator.
  // Existing ranks pass their communicator (exactly one of them the id from
  // ringoCommGetUniqueId) and keep their ranks; new ranks pass none, the
  // id and their rank (from the old rank count up).
  static base::StatusOr<std::unique_ptr<Communicator>> Grow(Communicator* parent, int nranks,
                                                            const transport::UniqueId* id, int rank,
                                                            const CommOptions* options);

  // InvalidArgument unless `ptr` is memory this communicator can use: host
  // memory for a host communicator, memory of its device for a CUDA one.
  base::Status CheckBuffer(const void* ptr, const char* name) const;
  // InvalidUsage when `stream` is capturing a CUDA graph and this is a host
  // communicator (its work runs in the call; a graph could not replay it).
  base::Status CheckCapture(void* stream) const;

  base::Status Finalize();
  // Wakes and fails a running Run(), tells the peers, waits for Run() to return.
  void Abort();
  base::Status AsyncError() const;

  // ringoRedOpCreatePreMulSum's operators on this communicator.
  internal::UserOps& user_ops() { return user_ops_; }

  // The flight recorder, the hang diagnosis and the trace dumps
  // (control/observer.h); null before Setup finished.
  Observer* observer() { return observer_.get(); }
  // Names the operations that follow (the flight recorder's label; null
  // or "": none). The calling thread's, as the calls.
  void SetTraceLabel(const char* label);

  // The wire format of floating-point sums between hosts (engines/wire.h),
  // from the next collective on: every rank sets the same between the same
  // two collectives. InvalidArgument for a value that is not a
  // ringoWire_t; InvalidUsage on a GPU communicator (not yet there).
  base::Status SetWire(int wire);
  int wire() const { return wire_.load(std::memory_order_relaxed); }
  // ringoCommWireRound: what this rank's input to `args` (an all-reduce or
  // a reduce-scatter) amounts to after the wire, into `out`; a copy where
  // the call would not compress. Local: no peer is involved.
  base::Status WireRound(const kernels::CollArgs& args, void* out);

  // The same on every rank of this communicator, and different from every
  // other communicator's (its shared memory is named by it).
  uint64_t id() const { return tag_; }
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  bool finalized() const { return finalized_; }
  DeviceKind kind() const { return device() >= 0 ? DeviceKind::kCuda : DeviceKind::kHost; }
  // The CUDA device ordinal; -1 for host memory (the residence's).
  int device() const { return engines_.residence->device(); }

 private:
  Communicator(int rank, int nranks, const base::Config& config, const CommOptions& options);

  // Setup, after the ranks found each other over `exchange` (whose members
  // are this communicator's ranks), in three steps:
  base::Status Setup(transport::Exchange& exchange, const CommOptions& options);
  // 1. every rank's record and settings (rank 0's shared ones apply), host
  //    or GPU memory, the memory domains;
  struct Agreement;
  base::StatusOr<Agreement> Agree(transport::Exchange& exchange, const CommOptions& options);
  // 2. the ring and the geometry;
  base::Status Plan(const Agreement& agreed, EngineSetup* setup);
  //    (every rank runs the same channels: the fewest any rank's cores allow)
  int ChannelsEveryRankAllows(const std::vector<transport::PeerInfo>& peers) const;
  // 3. the connector (ConnectorSpecFor), then the residence and every
  //    engine (engines/registry.h), then how this rank's calls wait.
  base::Status Connect(transport::Exchange& exchange, const Agreement& agreed, EngineSetup* setup);
  base::StatusOr<transport::ConnectorSpec> ConnectorSpecFor(transport::Exchange& exchange, const Agreement& agreed,
                                                            const EngineSetup& setup,
                                                            int* net_devices) const;
  void ConfigureWait(const EngineSetup& setup);
  // 4. what explains this rank from then on (observer.h) and the failure
  //    agreement.
  void Observe(transport::Exchange& exchange, const Agreement& agreed);

  // The preamble every call shares: the lock is held; refuses a finalized,
  // failed or aborted communicator.
  base::Status CheckUsable() const {
    if (!finalized_ && !async_engines_ && !failed_.load(std::memory_order_acquire) && !abort_.load()) {
      return base::Status();
    }
    return CheckUsableSlow();
  }
  base::Status CheckUsableSlow() const;
  // A call's end: a failure that may leave the peers waiting (call.fatal)
  // fails the communicator, and the first failure of any thread is returned.
  base::Status Finish(const base::Status& st, bool fatal);
  // `st` with this rank's own hang diagnosis of collective #`seq` appended
  // when it made one and `st` (a failure relayed from another rank) lacks it.
  base::Status WithDiagnosis(base::Status st, uint64_t seq) const;
  // A split's or shrink's options: `options`, or (null) this communicator's
  // timeout; a child inheriting the device lives where this one does.
  CommOptions ChildOptions(const CommOptions* options) const;
  // The tagged engine, or InvalidUsage saying why there is none.
  base::Status CheckTagged(bool send) const;
  // This call's wait context (abort flag, patience, wait cells).
  transport::WaitContext MakeWait(const char* coll) const;
  // Records `st` as the communicator's error (the first one sticks), raises
  // the abort flag and tells the peers. Any thread.
  void Fail(const base::Status& st);
  // Writes the flight record to RINGO_TRACE_DIR, if set (a fault, an abort).
  void DumpTrace(const char* reason);

  // Membership.
  const int rank_;
  const int nranks_;
  const base::Config config_;  // snapshot taken at init
  const int64_t timeout_ms_;
  // The control exchange (mesh.h across processes, a LocalFabric between
  // threads) that lazy connections and splits use, the context its messages
  // travel in, the tag that names this communicator's shared memory.
  std::unique_ptr<transport::Exchange> exchange_;
  uint64_t context_ = 0;
  uint64_t tag_ = 0;
  uint64_t splits_ = 0;  // ringoCommSplit calls so far (each child's context)

  // The connector (and its proxy) every engine connects through, then the
  // residence and the engines (the collective ones asked in their order,
  // point-to-point, tagged pairs where some rank asked for them).
  std::unique_ptr<transport::Connector> connector_;
  EngineSet engines_;
  transport::WaitContext wait_;  // the patience every call starts from
  bool check_ = true;            // RINGO_CHECK as the ranks agreed: calls carry signatures
  internal::UserOps user_ops_;

  // Lifecycle and errors.
  std::atomic<bool> abort_{false};
  bool finalized_ = false;
  uint64_t sequence_ = 0;  // collectives run so far
  std::mutex run_mu_;      // held by every call; Abort() takes it to wait for one
  mutable std::mutex error_mu_;
  base::Status async_error_;  // GUARDED_BY(error_mu_)
  // async_error_ is set (release, after it): the lock-free check each call makes.
  std::atomic<bool> failed_{false};
  // Some engine reports errors after its call returned (GPU kernels).
  bool async_engines_ = false;

  // What explains this rank: the flight recorder, the hang diagnosis, dumps.
  std::unique_ptr<Observer> observer_;
  // Elastic membership: the failure agreement (null without a message
  // fabric), shrinks so far (each child's context), revoked by this rank.
  std::unique_ptr<FailureAgreement> agreement_;
  uint64_t shrinks_ = 0;
  std::atomic<bool> revoked_{false};
  char label_[24] = {};  // SetTraceLabel's
  std::atomic<int> wire_{0};  // SetWire's; set at init from the options or RINGO_WIRE
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_COMMUNICATOR_H_
