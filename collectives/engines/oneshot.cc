#include "collectives/engines/oneshot.h"

#include "collectives/engines/host_ring.h"
#include "kernels/oneshot_executor.h"

namespace ringo::collectives {

base::Status OneShot::Run(Call& call) {
  call.fatal = true;
  return kernels::RunHostOneShot(call.args, rank_, nranks_, board_->board, ++board_->seq, call.wait,
                                 geometry_.oneshot_ll_bytes, call.sig, geometry_.deterministic);
}

}  // namespace ringo::collectives
