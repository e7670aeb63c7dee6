// The direct engine: a collective run straight on every rank's buffers
// (kernels/direct_executor.h) where every rank can address the ones it needs:
// ranks that are threads of one process, or buffers from ringoMemAlloc
// mapped by every rank. The ranks agree per call over the board: each posts
// where its buffers are, and when some rank's are out of reach every rank
// takes the plan's fallback (the one-shot engine or the ring) instead; the
// next calls then skip the attempt for a while (the skip doubles with each
// fallback in a row, up to kMaxDirectSkip, and resets when the direct path
// runs; a forced RINGO_ALGO=direct tries every call). Every rank saw the same
// posts, so every rank decides and counts alike.
//
// Every rank that waits for the others' posts compares their signatures and
// the byte ranges they published: a mismatched call fails on every rank
// before anything is written.
#ifndef RINGO_COLLECTIVES_ENGINES_DIRECT_H_
#define RINGO_COLLECTIVES_ENGINES_DIRECT_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "collectives/engines/engine.h"
#include "collectives/engines/board_state.h"
#include "collectives/engines/setup.h"
#include "collectives/engines/direct_post.h"
#include "transport/shm/shared_region.h"

namespace ringo::collectives {

class Direct : public Engine {
 public:
  // `oneshot` (may be null where there is none) and `ring`: the fallbacks,
  // owned by the communicator as this engine is.
  Direct(const EngineSetup& setup, std::shared_ptr<BoardState> board, Engine* oneshot, Engine* ring);

  const char* name() const override { return "direct"; }
  bool Takes(Call& call) override {
    return HostPlan(call, nranks_, geometry_).algorithm == Algorithm::kDirect;
  }
  base::Status Run(Call& call) override;
  void Abort(const base::Status& why, uint64_t seq) override { board_->board.WakeAll(); }

 private:
  // Agrees with the peers on running `call` directly and runs it (*ran);
  // OK with *ran false when some rank's buffers are out of reach.
  base::Status Attempt(Call& call, bool* ran);
  // Whether every post lies within its region and publishes at least the
  // bytes this rank's call would touch; an error naming the peer otherwise.
  base::Status ValidatePosts(const kernels::CollArgs& args) const;
  // Fills sends_/recvs_ from posts_, mapping peers' regions.
  base::Status MapBuffers(int32_t self_pid);
  void LogFallback(const CollPlan& plan, const std::string& why);  // once, at INFO
  Engine* Fallback(const CollPlan& plan) const;

  const int rank_;
  const int nranks_;
  const CommGeometry geometry_;
  const bool one_process_;  // every rank is a thread of this process
  std::shared_ptr<BoardState> board_;
  std::shared_ptr<transport::HostPages> pages_;
  Engine* const oneshot_;
  Engine* const ring_;
  transport::PeerRegions peer_regions_;          // peers' ringoMemAlloc regions mapped here
  std::vector<internal::DirectPost> posts_;      // per rank, reused by every call
  std::vector<const void*> sends_;
  std::vector<void*> recvs_;
  std::vector<std::atomic<uint64_t>*> words_;    // every rank's claim word
  std::vector<const std::atomic<int32_t>*> cpus_;  // the core every rank last ran on
  bool logged_ = false;           // the first direct collective was logged
  bool fallback_logged_ = false;
  int64_t skip_ = 0;     // calls left to skip
  int64_t backoff_ = 0;  // the skip after the next fallback / 2
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_DIRECT_H_
