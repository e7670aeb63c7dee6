// Who failed, agreed: a call among the ranks of a communicator that are
// still alive, which returns the same list of failed ranks on every one of
// them (ringoCommAgreeFailed), run over the control service (control.h) so
// that it works whatever state the data path is in.
//
// Each participant brings what it knows (the rank its communicator's error
// names, ranks whose control connection closed). The lowest rank that no
// participant counts as failed coordinates a round: it asks every other
// rank where it is in this agreement (every call on a communicator is
// numbered, the same on every survivor); a rank that does not answer
// within RINGO_CONTROL_TIMEOUT_MS, or whose connection closed, is failed; a
// rank that answers but has not called yet is waited for (up to the
// communicator's timeout). The coordinator then proposes the union of
// everything known, every participant acknowledges it, and the
// coordinator commits it: a participant returns only the committed list.
// A participant that fails during the round is added and the round starts
// again without it. A coordinator that fails is replaced by the next lowest
// rank, which first asks whether anyone already holds a committed list
// (participants keep answering for their agreements after returning) and
// commits that one if so: every survivor returns the same list.
//
// A rank the list names that is in fact alive (a stopped process resumed,
// a rank too slow to answer) is told so and fails every later call on the
// communicator with an error that says it was excluded (Excluded()).
//
// Thread safety: Agree by the communicator's calling thread; the answers
// on the control service's thread.
#ifndef RINGO_COLLECTIVES_CONTROL_AGREEMENT_H_
#define RINGO_COLLECTIVES_CONTROL_AGREEMENT_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "transport/bootstrap/exchange.h"

namespace ringo::collectives {

class FailureAgreement {
 public:
  // Answers on the exchange's control service (which it must have).
  // `on_excluded` runs (on the control service's thread) when this rank
  // hears that it was excluded.
  FailureAgreement(transport::Exchange* exchange, int rank, int nranks, int64_t answer_ms, int64_t timeout_ms,
                   std::function<void()> on_excluded = nullptr);
  ~FailureAgreement();
  FailureAgreement(const FailureAgreement&) = delete;
  FailureAgreement& operator=(const FailureAgreement&) = delete;

  // Collective among the live ranks: the agreed failed ranks, sorted, the
  // same on every survivor; `known` is what this rank knows already.
  // kInvalidUsage on a rank the agreement excluded.
  base::StatusOr<std::vector<int>> Agree(const std::vector<int>& known, const std::atomic<bool>* abort);

  // Set once an agreement named this rank although it is alive: why.
  bool Excluded(std::string* why) const;

  std::string Answer(int src, const std::string& request);

 private:
  struct State;  // one agreement's, on this rank
  base::StatusOr<std::vector<int>> Coordinate(uint64_t k, std::set<int> failed, const std::atomic<bool>* abort);
  base::StatusOr<std::string> Ask(int member, const std::string& request, int64_t ms);

  transport::Exchange* const exchange_;
  const int rank_;
  const int nranks_;
  const int64_t answer_ms_;
  const int64_t timeout_ms_;
  const std::function<void()> on_excluded_;
  uint64_t calls_ = 0;  // the calling thread's: agreements begun on this rank
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, State>* states_;  // GUARDED_BY(mu_)
  std::string excluded_;               // GUARDED_BY(mu_): "" while not excluded
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_CONTROL_AGREEMENT_H_
