// The communicator: one rank's membership in a ring, the FIFO ends of every
// channel, a worker thread per extra channel, and the state machine
// (ready -> finalized, or -> failed; aborted by ringoCommAbort).
//
// Thread safety: Run() is called by one thread at a time (the C contract);
// Abort() may be called from any thread and waits for a running Run() to
// return; AsyncError() from any thread.
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
#include "collectives/planner.h"
#include "kernels/host_executor.h"
#include "transport/board.h"
#include "transport/bootstrap.h"
#include "transport/ring_links.h"

namespace ringo::collectives {

struct CommOptions {
  int64_t timeout_ms = 0;  // 0: RINGO_TIMEOUT_MS
};

class Communicator {
 public:
  ~Communicator();

  // Joins the communicator named by `id` as `rank` of `nranks` (collective).
  static base::StatusOr<std::unique_ptr<Communicator>> InitRank(const transport::UniqueId& id, int nranks,
                                                                int rank, const CommOptions& options);
  // Creates all `nranks` ranks of a communicator in this process.
  static base::StatusOr<std::vector<std::unique_ptr<Communicator>>> InitAll(int nranks,
                                                                            const CommOptions& options);

  // Runs one collective to completion on this rank. A failure mid-way (a
  // peer lost, a timeout, a mismatched call) leaves the communicator failed:
  // every later call returns that error, and its peers are told.
  base::Status Run(const kernels::CollArgs& args);

  base::Status Finalize();
  // Wakes and fails a running Run(), tells the peers, waits for Run() to return.
  void Abort();
  base::Status AsyncError() const;

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  bool finalized() const { return finalized_; }

 private:
  Communicator(int rank, int nranks, const base::Config& config, const CommOptions& options);
  void Start(std::vector<transport::ChannelLinks> links, std::unique_ptr<transport::Board> board,
             const std::vector<int>& order, int local_ranks);
  void AbortTransports();
  void WorkerLoop(int channel);
  void Fail(const base::Status& st);
  base::Status RunChannel(int channel, const kernels::CollArgs& args, const CollPlan& plan);
  transport::WaitContext MakeWait(int channel) const;
  // RINGO_CHECK: compares this call's signature with the previous rank's.
  base::Status CheckSignature(const kernels::CollArgs& args);

  const int rank_;
  const int nranks_;
  const base::Config config_;  // snapshot taken at init
  const int64_t timeout_ms_;
  std::vector<int> order_;     // ring position -> rank
  int pos_ = 0;
  CommGeometry geometry_;
  std::vector<transport::ChannelLinks> links_;
  std::unique_ptr<transport::Board> board_;  // one-shot exchange; null across hosts
  uint64_t board_seq_ = 0;                   // board operations run so far
  std::atomic<bool> abort_{false};
  bool finalized_ = false;
  uint64_t sequence_ = 0;  // collectives run so far

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
  std::vector<base::Status> job_status_;  // GUARDED_BY(job_mu_), one per channel
  std::vector<std::thread> workers_;

  mutable std::mutex error_mu_;
  base::Status async_error_;  // GUARDED_BY(error_mu_)
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_COMMUNICATOR_H_
