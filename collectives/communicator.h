// The communicator: one rank's membership in a ring, the FIFO ends of every
// channel, a worker thread per extra channel, and the state machine
// (ready -> finalized, or -> failed; aborted by ringoCommAbort).
//
// Two kinds: a host communicator runs each collective to completion inside
// Run(); a CUDA communicator (ranks that are threads of one process, see
// InitAll, or processes of one host, see InitRank) enqueues a ring kernel on
// the caller's stream and returns at once.
//
// Thread safety: Run() is called by one thread at a time (the C contract);
// Abort() may be called from any thread and waits for a running Run() to
// return (and, on a GPU, for the rank's kernels to stop); AsyncError() from
// any thread.
#ifndef RINGO_COLLECTIVES_COMMUNICATOR_H_
#define RINGO_COLLECTIVES_COMMUNICATOR_H_

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/config.h"
#include "base/status.h"
#include "collectives/internal/user_ops.h"
#include "collectives/planner.h"
#include "kernels/coll_args.h"
#include "transport/shm/board.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/exchange.h"
#include "transport/connect/ring_links.h"
#include "transport/shm/shared_region.h"
#include "transport/signature.h"

namespace ringo::collectives {

namespace internal {
class GpuComm;
class GpuP2p;
struct DirectPost;
}
class P2pEngine;
struct P2pOp;

enum class DeviceKind : int { kHost = 0, kCuda = 1 };

struct CommOptions {
  int64_t timeout_ms = 0;  // 0: RINGO_TIMEOUT_MS
  // InitRank: this rank's wish (collectives/device_choice.h; an int so this
  // header needs no more) and, when it wishes for a GPU, its CUDA device.
  int32_t device_wish = 0;  // DeviceWish::kHost; Split: kInheritDevice
  int cuda_device = -1;
};
// CommOptions::device_wish of a split child that lives where its parent does.
inline constexpr int32_t kInheritDevice = -1;

class Communicator {
 public:
  ~Communicator();

  // Joins the communicator named by `id` as `rank` of `nranks` (collective).
  // The ranks agree on host or GPU memory from every rank's
  // options.device_wish (AgreeOnDevice); GPU communicators across processes
  // connect through CUDA IPC (transport/p2p_ipc.h).
  static base::StatusOr<std::unique_ptr<Communicator>> InitRank(const transport::UniqueId& id, int nranks,
                                                                int rank, const CommOptions& options);
  // Creates all `nranks` ranks of a communicator in this process: host
  // memory when `cuda_devices` is empty, else rank r on CUDA device
  // cuda_devices[r] (one entry per rank; devices may repeat), connected by the
  // p2p transport. Blocking.
  static base::StatusOr<std::vector<std::unique_ptr<Communicator>>> InitAll(
      int nranks, const CommOptions& options, const std::vector<int>& cuda_devices = {});

  // Host: runs one collective to completion on this rank (`stream` must be
  // null). CUDA: checks the buffers, enqueues the collective on `stream` (a
  // cudaStream_t) and returns; completion is the stream's, a kernel's failure
  // shows in AsyncError(). A failure mid-way (a peer lost, a timeout, a
  // mismatched call) leaves the communicator failed: every later call returns
  // that error, and its peers are told.
  base::Status Run(const kernels::CollArgs& args, void* stream = nullptr);

  // Runs a batch of sends and receives (collectives/p2p_engine.h) to
  // completion: one ringoSend/ringoRecv, or every one a group queued for
  // this communicator. Host communicators only (`stream` null). Failures
  // fail the communicator, as Run's.
  base::Status RunP2p(const std::vector<P2pOp>& ops, void* stream = nullptr);

  // ringoCommSplit: collective over this communicator's ranks (each passes
  // its color and key); returns this rank's child (null for a negative
  // color, RINGO_SPLIT_NOCOLOR), ranked by key then by rank here, made over
  // this communicator's exchange (no new unique id). `options` null:
  // inherited (timeout, host or GPU memory and device).
  base::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key, const CommOptions* options);

  // InvalidArgument unless `ptr` is memory this communicator can use: host
  // memory for a host communicator, memory of its device for a CUDA one.
  base::Status CheckBuffer(const void* ptr, const char* name) const;

  base::Status Finalize();
  // Wakes and fails a running Run(), tells the peers, waits for Run() to return.
  void Abort();
  base::Status AsyncError() const;

  // ringoRedOpCreatePreMulSum's operators on this communicator.
  internal::UserOps& user_ops() { return user_ops_; }

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  bool finalized() const { return finalized_; }
  DeviceKind kind() const { return gpu_ ? DeviceKind::kCuda : DeviceKind::kHost; }
  int device() const;  // the CUDA device ordinal; -1 for host memory

 private:
  Communicator(int rank, int nranks, const base::Config& config, const CommOptions& options);
  // Everything after the ranks found each other: the peer records, the
  // geometry, the ring or the GPU connectors, the board (collective over
  // `exchange`, whose members are this communicator's ranks).
  base::Status Setup(transport::Exchange& exchange, const CommOptions& options);
  // The point-to-point engine (host communicators); net[p]: pairs with p go
  // over the network (on the transport every rank's verbs fabric, `fabrics`,
  // picks for the pair; sockets where it is empty).
  void StartP2p(const std::vector<bool>& net, const std::vector<uint64_t>& fabrics = {});
  // The GPU communicator's point-to-point engine on `device`.
  void StartGpuP2p(int device);
  static base::StatusOr<std::vector<std::unique_ptr<Communicator>>> InitAllCuda(
      int nranks, const CommOptions& options, const std::vector<int>& cuda_devices);
  // InitRank's GPU half, once the ranks agreed on GPU memory.
  base::Status ConnectGpu(transport::Exchange& bootstrap, const base::Config& shared,
                          const std::vector<int>& order, int device);
  base::Status RunGpu(const kernels::CollArgs& args, void* stream);
  void Start(std::vector<transport::ChannelLinks> links, std::unique_ptr<transport::Board> board,
             const std::vector<int>& order, int local_ranks);
  // Writes `why` as this rank's fault notice into every shared header and
  // raises the abort flags (the peers' waits end and relay the notice).
  void AbortTransports(const base::Status& why);
  void WorkerLoop(int channel);
  void Fail(const base::Status& st);
  // One host collective, by the plan's algorithm; `sig` (seq 0: unchecked)
  // is the call's signature.
  base::Status RunHost(const kernels::CollArgs& args, const transport::CallSignature& sig);
  base::Status RunOneShot(const kernels::CollArgs& args, const transport::CallSignature& sig);
  // Every channel of one ring collective (channel 0 here, the others on the workers).
  base::Status RunRing(const kernels::CollArgs& args, const CollPlan& plan, const transport::CallSignature& sig);
  // RINGO_DETERMINISTIC on the ring: reductions as a chain in rank order
  // (a Reduce to the last rank, then a Broadcast from it).
  base::Status RunRingOrdered(const kernels::CollArgs& args, const transport::CallSignature& sig);
  base::Status RunChannel(int channel, const kernels::CollArgs& args, const CollPlan& plan,
                          const transport::CallSignature& sig);
  // Agrees with the peers over the board on a direct collective and runs it
  // (*ran); returns OK with *ran false when some rank's buffers are out of
  // reach. Every rank that waits for the others' posts compares their
  // signatures and the byte ranges they published.
  base::Status RunDirect(const kernels::CollArgs& args, const CollPlan& plan, const transport::CallSignature& sig,
                         bool* ran);
  // Whether every post in direct_posts_ lies within its region and
  // publishes at least the bytes this rank's call would touch; an error
  // naming the peer otherwise.
  base::Status ValidateDirectPosts(const kernels::CollArgs& args) const;
  // Fills direct_sends_/direct_recvs_ from direct_posts_, mapping peers' regions.
  base::Status MapDirectBuffers(int32_t self_pid);
  void LogDirectFallback(const CollPlan& plan, const std::string& why);  // once per communicator, at INFO
  transport::WaitContext MakeWait(int channel) const;

  const int rank_;
  const int nranks_;
  const base::Config config_;  // snapshot taken at init
  const int64_t timeout_ms_;
  std::vector<int> order_;     // ring position -> rank
  int pos_ = 0;
  CommGeometry geometry_;
  std::vector<transport::ChannelLinks> links_;
  std::unique_ptr<transport::net::Proxy> proxy_;  // edges across hosts; null without
  std::unique_ptr<transport::Board> board_;  // one-shot exchange; null across hosts
  uint64_t board_seq_ = 0;                   // board operations run so far
  transport::PeerRegions peer_regions_;      // peers' ringoMemAlloc regions mapped here
  std::vector<internal::DirectPost> direct_posts_;  // per rank, reused by every direct collective
  std::vector<const void*> direct_sends_;
  std::vector<void*> direct_recvs_;
  std::vector<std::atomic<uint64_t>*> direct_words_;  // every rank's claim word, on the board
  std::vector<const std::atomic<int32_t>*> direct_cpus_;
  bool direct_logged_ = false;           // the first direct collective was logged
  bool direct_fallback_logged_ = false;
  // After direct attempts that fell back, the next direct-planned calls skip
  // the attempt (RINGO_ALGO unset): every rank saw the same posts, so every
  // rank counts alike. The skip doubles with each fallback in a row, up to
  // kMaxDirectSkip, and resets when the direct path runs.
  int64_t direct_skip_ = 0;     // calls left to skip
  int64_t direct_backoff_ = 0;  // the skip after the next fallback / 2
  bool one_process_ = false;  // every rank is a thread of this process
  std::atomic<bool> abort_{false};
  bool finalized_ = false;
  uint64_t sequence_ = 0;          // collectives run so far
  const char* coll_name_ = nullptr;  // the running collective's, for messages
  std::vector<char> ordered_scratch_;  // RINGO_DETERMINISTIC's temporary results

  std::mutex run_mu_;  // held by Run(); Abort() takes it to wait for Run()

  // Worker threads (channels 1..n-1): a job generation and its results.
  std::mutex job_mu_;
  std::condition_variable job_cv_;
  std::condition_variable done_cv_;
  uint64_t job_gen_ = 0;             // GUARDED_BY(job_mu_)
  int job_pending_ = 0;              // GUARDED_BY(job_mu_)
  bool stop_ = false;                // GUARDED_BY(job_mu_)
  const kernels::CollArgs* job_args_ = nullptr;  // GUARDED_BY(job_mu_)
  CollPlan job_plan_;                // GUARDED_BY(job_mu_)
  transport::CallSignature job_sig_;  // GUARDED_BY(job_mu_)
  std::vector<base::Status> job_status_;  // GUARDED_BY(job_mu_), one per channel
  std::vector<std::thread> workers_;

  std::unique_ptr<internal::GpuComm> gpu_;  // CUDA communicators only

  // Membership after init: the exchange that lazy connections and splits
  // use (mesh.h across processes, a LocalFabric between threads), the
  // context its messages travel in, the tag that names this communicator's
  // shared memory, and every rank's record.
  std::unique_ptr<transport::Exchange> exchange_;
  uint64_t context_ = 0;
  uint64_t tag_ = 0;
  std::vector<transport::PeerInfo> peer_infos_;
  uint64_t splits_ = 0;  // ringoCommSplit calls so far (each child's context)
  internal::UserOps user_ops_;
  std::unique_ptr<P2pEngine> p2p_;  // host communicators
  std::unique_ptr<internal::GpuP2p> gpu_p2p_;  // GPU communicators

  mutable std::mutex error_mu_;
  base::Status async_error_;  // GUARDED_BY(error_mu_)
  // async_error_ is set (release, after it): the lock-free check each
  // collective makes twice.
  std::atomic<bool> failed_{false};
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_COMMUNICATOR_H_
