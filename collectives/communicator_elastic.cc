// Elastic membership: the agreement on who failed, shrinking to the ranks
// left, revoking what runs, growing with new ranks (communicator.h;
// docs/elastic.md).
#include <algorithm>
#include <set>
#include <string>

#include "base/logging.h"
#include "collectives/communicator.h"
#include "collectives/plan/device_choice.h"

namespace ringo::collectives {

using base::Status;
using base::StatusOr;

namespace {

// Shrinks' children take contexts no split makes (a split's sequence
// numbers count from 1 up, far below this).
constexpr uint64_t kShrinkBase = uint64_t{1} << 40;

// The same on every survivor that excludes the same ranks.
int ExcludeHash(const std::vector<int>& sorted) {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (int r : sorted) h = (h ^ static_cast<uint64_t>(r)) * 0xbf58476d1ce4e5b9ull;
  return static_cast<int>(h & 0x3fffffff);
}

}  // namespace

StatusOr<std::vector<int>> Communicator::AgreeFailed() {
  if (agreement_ == nullptr) {
    return base::InvalidUsage("this communicator has no control connections to agree over");
  }
  std::vector<int> known;
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    const int origin = async_error_.origin();
    if (!async_error_.ok() && origin >= 0 && origin < nranks_ && origin != rank_) known.push_back(origin);
  }
  return agreement_->Agree(known, nullptr);
}

StatusOr<std::unique_ptr<Communicator>> Communicator::Shrink(const std::vector<int>& exclude, int flags,
                                                             const CommOptions* options) {
  if (flags != kShrinkDefault && flags != kShrinkAbort) {
    return base::InvalidArgument("shrinkFlags " + std::to_string(flags) +
                                 " is not RINGO_SHRINK_DEFAULT (0) or RINGO_SHRINK_ABORT (1)");
  }
  std::vector<int> out = exclude;
  std::sort(out.begin(), out.end());
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] < 0 || out[i] >= nranks_) {
      return base::InvalidArgument("excluded rank " + std::to_string(out[i]) + " is not in [0, " +
                                   std::to_string(nranks_) + ")");
    }
    if (i > 0 && out[i] == out[i - 1]) {
      return base::InvalidArgument("rank " + std::to_string(out[i]) + " is excluded twice");
    }
    if (out[i] == rank_) {
      return base::InvalidUsage("rank " + std::to_string(rank_) +
                                " excludes itself: only the ranks that stay call ringoCommShrink");
    }
  }
  if (static_cast<int>(out.size()) >= nranks_) return base::InvalidArgument("every rank is excluded");
  if (flags == kShrinkAbort) {
    // What runs on this communicator stops now (on every rank: the peers
    // hear it); nothing of it is reused.
    const std::string why = "rank " + std::to_string(rank_) + " shrinks the communicator (RINGO_SHRINK_ABORT)";
    abort_.store(true);
    engines_.Abort(base::RemoteError(why).WithOrigin(rank_, why), sequence_);
  }
  uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> run_lock(run_mu_);  // a call still running returns first
    if (flags == kShrinkDefault && !revoked_.load()) {
      if (finalized_) return base::InvalidUsage("the communicator was finalized");
      Status failed = AsyncError();
      if (!failed.ok()) {
        return base::InvalidUsage("the communicator failed (" + failed.message() +
                                  "): shrink it with RINGO_SHRINK_ABORT");
      }
      if (abort_.load()) return base::InvalidUsage("the communicator was aborted");
    }
    seq = ++shrinks_;
  }
  std::vector<int> members;
  for (int r = 0; r < nranks_; ++r) {
    if (!std::binary_search(out.begin(), out.end(), r)) members.push_back(r);
  }
  const int child_rank = static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  const int hash = ExcludeHash(out);
  const uint64_t context = transport::ChildContext(context_, kShrinkBase + seq, hash);
  ASSIGN_OR_RETURN(std::unique_ptr<transport::Exchange> sub, exchange_->Subgroup(context, members));
  const CommOptions child_options = ChildOptions(options);
  std::unique_ptr<Communicator> child(
      new Communicator(child_rank, static_cast<int>(members.size()), config_, child_options));
  child->exchange_ = std::move(sub);
  child->context_ = context;
  child->tag_ = transport::ChildContext(tag_, kShrinkBase + seq, hash);
  RETURN_IF_ERROR(child->Setup(*child->exchange_, child_options).WithContext("ringoCommShrink"));
  RINGO_LOG(INFO) << "rank " << rank_ << " -> " << child_rank << ": shrunk to " << members.size() << " rank(s)";
  return child;
}

Status Communicator::Revoke() {
  if (revoked_.exchange(true)) return base::InvalidArgument("the communicator was revoked already");
  const std::string why = "rank " + std::to_string(rank_) + " revoked the communicator (ringoCommRevoke)";
  // The first error of this rank from now on, its running call's included;
  // Fail raises the abort flag and tells the peers.
  const Status revoked = base::RemoteError(why).WithOrigin(rank_, why);
  Fail(revoked);
  abort_.store(true);     // also where an earlier failure made Fail return at once
  engines_.Abort(revoked, sequence_);
  std::lock_guard<std::mutex> run_lock(run_mu_);  // this rank's running call returns
  for (const auto& engine : engines_.engines) (void)engine->Synchronize();  // GPU kernels see the flag and return
  return Status();
}

StatusOr<std::unique_ptr<Communicator>> Communicator::Grow(Communicator* parent, int nranks,
                                                           const transport::UniqueId* id, int rank,
                                                           const CommOptions* options) {
  CommOptions grown;
  if (options != nullptr) grown = *options;
  if (parent == nullptr) {
    if (id == nullptr) return base::InvalidArgument("a new rank passes the unique id (ringoCommGetUniqueId)");
    if (rank < 0 || rank >= nranks) {
      return base::InvalidArgument("rank " + std::to_string(rank) + " is not in [0, " + std::to_string(nranks) + ")");
    }
    return InitRank(*id, nranks, rank, grown);
  }
  if (rank != -1) return base::InvalidArgument("an existing rank passes rank -1 (it keeps its own)");
  if (nranks <= parent->nranks_) {
    return base::InvalidArgument("nRanks " + std::to_string(nranks) + " does not grow a communicator of " +
                                 std::to_string(parent->nranks_));
  }
  if (options == nullptr) grown.timeout_ms = parent->timeout_ms_;
  if (options == nullptr || grown.device_wish == kInheritDevice) {
    grown.device_wish = static_cast<int32_t>(WishToStay(parent->device()));
    grown.cuda_device = parent->device();
  }
  // The existing ranks learn the id from the one that holds it.
  struct Offer {
    int32_t has;
    char id[transport::kUniqueIdBytes];
  };
  Offer mine{};
  if (id != nullptr) {
    mine.has = 1;
    id->Encode(mine.id);
  }
  std::vector<Offer> all(parent->nranks_);
  {
    std::lock_guard<std::mutex> run_lock(parent->run_mu_);
    RETURN_IF_ERROR(parent->CheckUsable().WithContext("ringoCommGrow"));
    RETURN_IF_ERROR(parent->exchange_->AllGather(&mine, sizeof(mine), all.data()).WithContext("ringoCommGrow"));
  }
  int holders = 0;
  const Offer* offer = nullptr;
  for (const Offer& o : all) {
    if (o.has == 1) {
      ++holders;
      offer = &o;
    }
  }
  if (holders != 1) {
    return base::InvalidUsage(std::to_string(holders) +
                              " existing ranks passed a unique id to ringoCommGrow: exactly one passes the id "
                              "from ringoCommGetUniqueId, the others NULL");
  }
  ASSIGN_OR_RETURN(transport::UniqueId shared, transport::UniqueId::Decode(offer->id));
  return InitRank(shared, nranks, parent->rank_, grown);
}

}  // namespace ringo::collectives
