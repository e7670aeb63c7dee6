// The host ring engine: every channel of a ring collective on host memory,
// channel 0 on the calling thread and the others on a worker thread each,
// over the ring's FIFO ends (one pair per channel, connected at init), each
// channel running kernels/ring_executor.h's loop. Takes every call it is asked.
//
// Where the communicator has a board (its ranks share one memory domain),
// the ring posts each call's signature there first, so that a rank whose
// same call went one-shot or direct finds the mismatch instead of waiting.
#ifndef RINGO_COLLECTIVES_ENGINES_HOST_RING_H_
#define RINGO_COLLECTIVES_ENGINES_HOST_RING_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "collectives/engines/engine.h"
#include "collectives/engines/board_state.h"
#include "collectives/engines/channel_balance.h"
#include "collectives/engines/setup.h"
#include "kernels/ring_executor.h"
#include "transport/fifo/fifo.h"

namespace ringo::collectives {

class HostRing : public Engine {
 public:
  // Connects this rank's ends of every channel (collective over the ranks)
  // and starts its worker threads. `board`: the board to post signatures
  // on, or null.
  static base::StatusOr<std::unique_ptr<HostRing>> Connect(const EngineSetup& setup,
                                                           std::shared_ptr<BoardState> board);
  ~HostRing() override;

  const char* name() const override { return "ring"; }
  bool Takes(Call& call) override { return true; }
  base::Status Run(Call& call) override;
  void Abort(const base::Status& why, uint64_t seq) override;

  // Posts the call's signature on the board (where there is one and it is
  // not there yet), as Run does first.
  base::Status PostSignature(Call& call);
  // `args` on the ring with `plan`, without the board's signature post (the
  // deterministic ordering runs two of these for one call).
  base::Status RunPlanned(const kernels::CollArgs& args, const CollPlan& plan, Call& call);
  const std::vector<int>& order() const { return order_; }
  int nranks() const { return nranks_; }
  int rank() const { return rank_; }

 private:
  struct Channel {
    std::unique_ptr<transport::RecvEnd> recv;  // from the previous rank on the ring
    std::unique_ptr<transport::SendEnd> send;  // to the next
  };
  HostRing(const EngineSetup& setup, std::shared_ptr<BoardState> board);
  base::Status RunChannel(int channel, const kernels::CollArgs& args, const CollPlan& plan, const Call& call);
  void WorkerLoop(int channel);
  static int64_t ChannelBytes(const kernels::RingArgs& ring, int channel);
  // After a call that measured its channels: at an agreed point, the ranks
  // pool their measurements (an all-reduce on channel 0) and adopt a new split.
  base::Status Rebalance(int64_t bytes, Call& call);

  const int rank_;
  const int nranks_;
  const int pos_;
  const std::vector<int> order_;
  const CommGeometry geometry_;
  std::shared_ptr<BoardState> board_;
  const std::function<void(const base::Status&)> on_fault_;
  std::vector<Channel> channels_;
  // Where channels cross links of unequal speed (CommGeometry::balance): the
  // split of calls over every channel, and their measurement.
  std::unique_ptr<ChannelBalance> balance_;
  // The call in flight: its split (null: equal parts), whether its channels
  // are timed, and when it started. Set before the workers wake.
  const uint32_t* call_split_ = nullptr;
  bool call_measured_ = false;
  std::chrono::steady_clock::time_point call_start_;
  uint32_t logged_first_part_ = 0;  // the split last said at INFO

  // Worker threads (channels 1..n-1): a job generation and its results.
  std::mutex job_mu_;
  std::condition_variable job_cv_;
  std::condition_variable done_cv_;
  uint64_t job_gen_ = 0;                      // GUARDED_BY(job_mu_)
  int job_pending_ = 0;                       // GUARDED_BY(job_mu_)
  bool stop_ = false;                         // GUARDED_BY(job_mu_)
  const kernels::CollArgs* job_args_ = nullptr;  // GUARDED_BY(job_mu_)
  const CollPlan* job_plan_ = nullptr;        // GUARDED_BY(job_mu_)
  const Call* job_call_ = nullptr;            // GUARDED_BY(job_mu_)
  std::vector<base::Status> job_status_;      // GUARDED_BY(job_mu_), one per channel
  std::vector<std::thread> workers_;
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_HOST_RING_H_
