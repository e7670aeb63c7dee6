// The one-shot executor: small collectives among the ranks of one host in a
// single exchange over the board (transport/shm/board.h). Every rank posts what
// the others need (its input; nothing for a non-root Broadcast rank), then
// reads the posts it needs and reduces them in rank order, so every rank
// computes bit-identical results, with fp16/bf16 accumulated in fp32 across
// all ranks.
//
// Blocking, like the ring executor; `seq` numbers the communicator's board
// operations (1, 2, ...), identical on every rank.
#ifndef RINGO_KERNELS_ONESHOT_EXECUTOR_H_
#define RINGO_KERNELS_ONESHOT_EXECUTOR_H_

#include <cstdint>

#include "base/status.h"
#include "kernels/coll_args.h"
#include "transport/shm/board.h"
#include "transport/signature.h"

namespace ringo::kernels {

// Bytes each rank posts for `args` (what must fit a board buffer).
int64_t OneShotPostBytes(const CollArgs& args, int nranks);

// Posts of at most `ll_max_bytes` go in the board's LL format (every rank
// must pass the same value). With sig.seq != 0 every rank reads every other
// rank's post (a Broadcast's root and a Reduce's non-roots too) and compares
// signatures before using any data: a mismatch is InvalidUsage on every
// rank, naming both calls. `ordered`: reduce with the host loops'
// reduce_ordered (RINGO_DETERMINISTIC).
base::Status RunHostOneShot(const CollArgs& args, int rank, int nranks, transport::Board& board, uint64_t seq,
                            const transport::WaitContext& wait, int64_t ll_max_bytes = 0,
                            const transport::CallSignature& sig = transport::CallSignature(), bool ordered = false);

}  // namespace ringo::kernels

#endif  // RINGO_KERNELS_ONESHOT_EXECUTOR_H_
