#include "collectives/control/agreement.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/logging.h"

namespace ringo::collectives {
namespace {

using base::Status;
using base::StatusOr;
using Clock = std::chrono::steady_clock;

constexpr int64_t kMagic = 0x52474e41;  // "ANGR"
enum Type : int64_t { kQuery = 1, kPropose = 2, kCommit = 3, kExclude = 4 };

// Messages are little vectors of int64: [magic, type, k, round, n, ranks...]
// and answers [magic, entered, decided, acked_round, n_result, result...].
std::string Pack(const std::vector<int64_t>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int64_t));
}

bool Unpack(const std::string& s, std::vector<int64_t>* v, size_t max_words) {
  if (s.size() % sizeof(int64_t) != 0 || s.size() / sizeof(int64_t) > max_words) return false;
  v->resize(s.size() / sizeof(int64_t));
  if (!s.empty()) std::memcpy(v->data(), s.data(), s.size());
  return !v->empty() && (*v)[0] == kMagic;
}

std::vector<int64_t> Request(Type type, uint64_t k, uint64_t round, const std::vector<int>& ranks) {
  std::vector<int64_t> v{kMagic, type, static_cast<int64_t>(k), static_cast<int64_t>(round),
                         static_cast<int64_t>(ranks.size())};
  for (int r : ranks) v.push_back(r);
  return v;
}

std::string List(const std::vector<int>& ranks) {
  if (ranks.empty()) return "none";
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

}  // namespace

struct FailureAgreement::State {
  bool entered = false;
  uint64_t acked_round = 0;
  std::vector<int> acked;
  bool decided = false;
  std::vector<int> result;
};

FailureAgreement::FailureAgreement(transport::Exchange* exchange, int rank, int nranks, int64_t answer_ms,
                                   int64_t timeout_ms, std::function<void()> on_excluded)
    : exchange_(exchange),
      rank_(rank),
      nranks_(nranks),
      answer_ms_(answer_ms),
      timeout_ms_(timeout_ms),
      on_excluded_(std::move(on_excluded)),
      states_(new std::map<uint64_t, State>()) {
  exchange_->control()->Register(exchange_->context(), transport::ControlKind::kAgree,
                                 [this](int src, const std::string& request) { return Answer(src, request); });
}

FailureAgreement::~FailureAgreement() {
  exchange_->control()->Unregister(exchange_->context(), transport::ControlKind::kAgree);
  delete states_;
}

bool FailureAgreement::Excluded(std::string* why) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (excluded_.empty()) return false;
  if (why != nullptr) *why = excluded_;
  return true;
}

std::string FailureAgreement::Answer(int src, const std::string& request) {
  std::vector<int64_t> v;
  if (!Unpack(request, &v, static_cast<size_t>(nranks_) + 8) || v.size() < 5) return "";
  const auto type = static_cast<Type>(v[1]);
  const uint64_t k = static_cast<uint64_t>(v[2]);
  const uint64_t round = static_cast<uint64_t>(v[3]);
  const int64_t n = v[4];
  if (n < 0 || static_cast<size_t>(n) != v.size() - 5) return "";
  std::vector<int> ranks;
  for (int64_t i = 0; i < n; ++i) {
    if (v[5 + i] < 0 || v[5 + i] >= nranks_) return "";
    ranks.push_back(static_cast<int>(v[5 + i]));
  }
  std::lock_guard<std::mutex> lock(mu_);
  State& s = (*states_)[k];
  switch (type) {
    case kQuery:
      break;
    case kPropose:
      if (round >= s.acked_round) {
        s.acked_round = round;
        s.acked = ranks;
      }
      break;
    case kCommit:
      if (!s.decided) {
        s.decided = true;
        s.result = ranks;
      }
      cv_.notify_all();
      break;
    case kExclude:
      if (excluded_.empty()) {
        excluded_ = "this rank was excluded from the communicator: the agreement of its surviving ranks (rank " +
                    std::to_string(src) + " coordinating) counted it as failed (it did not answer within " +
                    std::to_string(answer_ms_) + " ms, or did not join within RINGO_TIMEOUT_MS)";
        RINGO_LOG(WARN) << "rank " << rank_ << ": " << excluded_;
        if (on_excluded_) on_excluded_();
      }
      cv_.notify_all();
      break;
    default:
      return "";
  }
  std::vector<int64_t> a{kMagic, s.entered ? 1 : 0, s.decided ? 1 : 0, static_cast<int64_t>(s.acked_round),
                         static_cast<int64_t>(s.result.size())};
  for (int r : s.result) a.push_back(r);
  return Pack(a);
}

StatusOr<std::string> FailureAgreement::Ask(int member, const std::string& request, int64_t ms) {
  return exchange_->control()->Ask(exchange_->FabricRank(member), exchange_->context(),
                                   transport::ControlKind::kAgree, request, transport::DeadlineAfterMs(ms));
}

StatusOr<std::vector<int>> FailureAgreement::Agree(const std::vector<int>& known, const std::atomic<bool>* abort) {
  const uint64_t k = ++calls_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!excluded_.empty()) return base::InvalidUsage(excluded_);
    (*states_)[k].entered = true;
  }
  // Ranks this rank counts as failed: what it was told, and coordinators
  // that stopped answering it.
  std::set<int> failed;
  for (int r : known) {
    if (r >= 0 && r < nranks_ && r != rank_) failed.insert(r);
  }
  const auto give_up = Clock::now() + std::chrono::milliseconds(timeout_ms_ + 2 * answer_ms_);
  while (true) {
    int coordinator = 0;
    while (coordinator < nranks_ && failed.count(coordinator) != 0) ++coordinator;
    if (coordinator == rank_) return Coordinate(k, failed, abort);
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(answer_ms_), [&] {
        return (*states_)[k].decided || !excluded_.empty();
      });
      if (!excluded_.empty()) return base::InvalidUsage(excluded_);
      if ((*states_)[k].decided) return (*states_)[k].result;
    }
    if (abort != nullptr && abort->load()) return base::InvalidUsage("the communicator was aborted");
    if (Clock::now() > give_up) {
      return base::Timeout("rank " + std::to_string(rank_) + ": no agreement on the failed ranks within " +
                           std::to_string(timeout_ms_) + " ms (coordinator rank " + std::to_string(coordinator) + ")");
    }
    // Nothing yet: is the coordinator still there?
    auto ping = Ask(coordinator, Pack(Request(kQuery, k, 0, {})), answer_ms_);
    if (!ping.ok()) {
      RINGO_LOG(INFO) << "rank " << rank_ << ": agreement #" << k << ": coordinator rank " << coordinator
                      << " is silent (" << ping.status().message() << "); the next rank takes over";
      failed.insert(coordinator);
    }
  }
}

StatusOr<std::vector<int>> FailureAgreement::Coordinate(uint64_t k, std::set<int> failed,
                                                        const std::atomic<bool>* abort) {
  const auto give_up = Clock::now() + std::chrono::milliseconds(timeout_ms_);
  uint64_t round = 0;
  while (true) {
    if (abort != nullptr && abort->load()) return base::InvalidUsage("the communicator was aborted");
    std::vector<int> live, dsts;
    for (int r = 0; r < nranks_; ++r) {
      if (failed.count(r) == 0) {
        live.push_back(r);
        dsts.push_back(exchange_->FabricRank(r));
      }
    }
    // 1. Where every rank not counted failed is in this agreement.
    auto answers = exchange_->control()->AskAll(dsts, exchange_->context(), transport::ControlKind::kAgree,
                                                Pack(Request(kQuery, k, 0, {})),
                                                transport::DeadlineAfterMs(answer_ms_));
    bool lost = false, waiting = false;
    std::vector<int> decided;
    bool have_decided = false;
    for (size_t i = 0; i < live.size(); ++i) {
      std::vector<int64_t> a;
      if (!answers[i].ok() || !Unpack(*answers[i], &a, static_cast<size_t>(nranks_) + 8) || a.size() < 5) {
        if (live[i] != rank_) {
          RINGO_LOG(INFO) << "rank " << rank_ << ": agreement #" << k << ": rank " << live[i] << " counts as failed: "
                          << (answers[i].ok() ? "a malformed answer" : answers[i].status().message());
          failed.insert(live[i]);
          lost = true;
        }
        continue;
      }
      round = std::max(round, static_cast<uint64_t>(a[3]));
      if (a[2] == 1 && !have_decided) {  // someone holds a committed list: that one stands
        have_decided = true;
        for (size_t j = 5; j < a.size(); ++j) decided.push_back(static_cast<int>(a[j]));
      }
      if (a[1] == 0) waiting = true;
    }
    if (!have_decided && (lost || waiting)) {
      if (waiting && Clock::now() > give_up) {
        // Ranks that answer but never join: failed too (their program went
        // elsewhere); the coordinator says which.
        for (size_t i = 0; i < live.size(); ++i) {
          std::vector<int64_t> a;
          if (answers[i].ok() && Unpack(*answers[i], &a, static_cast<size_t>(nranks_) + 8) && a.size() >= 5 &&
              a[1] == 0 && live[i] != rank_) {
            failed.insert(live[i]);
          }
        }
      } else if (waiting) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      continue;  // ask again, without the ranks lost
    }
    std::vector<int> result = have_decided ? decided : std::vector<int>(failed.begin(), failed.end());
    std::sort(result.begin(), result.end());
    std::vector<int> members, member_dsts;
    for (int r = 0; r < nranks_; ++r) {
      if (!std::binary_search(result.begin(), result.end(), r)) {
        members.push_back(r);
        member_dsts.push_back(exchange_->FabricRank(r));
      }
    }
    // 2. Every member acknowledges the list (unless one is committed already).
    if (!have_decided) {
      ++round;
      auto acks = exchange_->control()->AskAll(member_dsts, exchange_->context(), transport::ControlKind::kAgree,
                                               Pack(Request(kPropose, k, round, result)),
                                               transport::DeadlineAfterMs(answer_ms_));
      bool acked = true;
      for (size_t i = 0; i < members.size(); ++i) {
        if (!acks[i].ok() && members[i] != rank_) {
          failed.insert(members[i]);
          acked = false;
        }
      }
      if (!acked) continue;
    }
    // 3. Commit: a member that returns has the list every member will get.
    (void)exchange_->control()->AskAll(member_dsts, exchange_->context(), transport::ControlKind::kAgree,
                                       Pack(Request(kCommit, k, round, result)),
                                       transport::DeadlineAfterMs(answer_ms_));
    // The excluded that may be alive hear it (a stopped one when it resumes).
    std::vector<int> out_dsts;
    for (int r : result) out_dsts.push_back(exchange_->FabricRank(r));
    for (int d : out_dsts) {
      (void)exchange_->control()->Tell(d, exchange_->context(), transport::ControlKind::kAgree,
                                       Pack(Request(kExclude, k, round, result)), transport::DeadlineAfterMs(200));
    }
    RINGO_LOG(INFO) << "rank " << rank_ << ": agreement #" << k << " (coordinator): failed ranks " << List(result);
    std::lock_guard<std::mutex> lock(mu_);
    State& s = (*states_)[k];
    if (!s.decided) {
      s.decided = true;
      s.result = result;
    }
    return s.result;
  }
}

}  // namespace ringo::collectives
