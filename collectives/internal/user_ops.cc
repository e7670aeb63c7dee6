#include "collectives/internal/user_ops.h"

#include <string>

namespace ringo::collectives::internal {

int UserOps::Create(const Op& op) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < live_.size(); ++i) {
    if (!live_[i]) {
      ops_[i] = op;
      live_[i] = true;
      return kFirstHandle + static_cast<int>(i);
    }
  }
  ops_.push_back(op);
  live_.push_back(true);
  return kFirstHandle + static_cast<int>(ops_.size() - 1);
}

base::Status UserOps::Destroy(int handle) {
  std::lock_guard<std::mutex> lock(mu_);
  const int i = handle - kFirstHandle;
  if (i < 0 || i >= static_cast<int>(live_.size()) || !live_[i]) {
    return base::InvalidArgument("op " + std::to_string(handle) +
                                 " is not an operator made by ringoRedOpCreatePreMulSum on this communicator");
  }
  live_[i] = false;
  return base::Status();
}

base::StatusOr<UserOps::Op> UserOps::Find(int handle) const {
  std::lock_guard<std::mutex> lock(mu_);
  const int i = handle - kFirstHandle;
  if (i < 0 || i >= static_cast<int>(live_.size()) || !live_[i]) {
    return base::InvalidArgument("op " + std::to_string(handle) +
                                 " is neither a built-in ringoRedOp_t nor a live operator made by "
                                 "ringoRedOpCreatePreMulSum on this communicator");
  }
  return ops_[i];
}

}  // namespace ringo::collectives::internal
