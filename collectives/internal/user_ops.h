// The reduction operators a communicator's user made with
// ringoRedOpCreatePreMulSum: each a datatype and a scalar, either its value
// (ringoScalarHostImmediate: read at creation) or where to read it when a
// collective runs (ringoScalarDevice). Handles are the values NCCL gives
// such operators: ringoNumOps (5) and up, per communicator; a destroyed
// handle's value is given to the next operator made (the lowest free one).
//
// Thread safety: every method is thread-safe (a collective on another
// thread may look an operator up while one is made).
#ifndef RINGO_COLLECTIVES_INTERNAL_USER_OPS_H_
#define RINGO_COLLECTIVES_INTERNAL_USER_OPS_H_

#include <cstdint>
#include <mutex>
#include <vector>

#include "base/device/dtype.h"
#include "base/status.h"

namespace ringo::collectives::internal {

class UserOps {
 public:
  struct Op {
    base::DataType dtype = base::DataType::kFloat32;
    uint64_t bits = 0;            // the scalar's value (immediate)
    const void* ptr = nullptr;    // or where it lives (read when a collective runs)
  };
  static constexpr int kFirstHandle = 5;  // ringoNumOps

  int Create(const Op& op);
  base::Status Destroy(int handle);
  // The operator behind `handle`, or InvalidArgument naming what is wrong.
  base::StatusOr<Op> Find(int handle) const;

 private:
  mutable std::mutex mu_;
  std::vector<Op> ops_;       // GUARDED_BY(mu_), by handle - kFirstHandle
  std::vector<bool> live_;    // GUARDED_BY(mu_)
};

}  // namespace ringo::collectives::internal

#endif  // RINGO_COLLECTIVES_INTERNAL_USER_OPS_H_
