// A collective's signature (transport/signature.h) from its arguments, its
// description for error messages, and the error a mismatch becomes: the
// ranks of a collective compare signatures in the exchanges they make
// anyway (board posts, FIFO slots, direct posts), so calls that differ in
// collective, datatype, op, count, root or order fail on the ranks that see
// them instead of returning wrong data or hanging.
#ifndef RINGO_KERNELS_COLL_SIGNATURE_H_
#define RINGO_KERNELS_COLL_SIGNATURE_H_

#include <cstdint>
#include <string>

#include "base/status.h"
#include "kernels/coll_args.h"
#include "transport/signature.h"

namespace ringo::kernels {

// The signature of `args` as the collective numbered `seq` (from 1) on its
// communicator.
transport::CallSignature MakeSignature(const CollArgs& args, uint64_t seq);

// "#5 AllReduce(count 16, float32, sum)", with the root of a Broadcast or
// Reduce; a value that decodes to nothing known is printed as numbers.
std::string DescribeSignature(const transport::CallSignature& sig);

// InvalidUsage naming both calls, with `peer_rank` as the origin: "rank 1
// called #5 AllReduce(count 16, ...) but rank 0 called #5 AllReduce(count 32, ...)".
base::Status SignatureMismatch(int self_rank, const transport::CallSignature& mine, int peer_rank,
                               const transport::CallSignature& theirs);

}  // namespace ringo::kernels

#endif  // RINGO_KERNELS_COLL_SIGNATURE_H_
