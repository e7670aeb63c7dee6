// The direct executor: all-reduce among the ranks of one host when every
// rank can address every rank's buffers (ranks that are threads of one
// process, or buffers from ringoMemAlloc mapped by every rank). Rank r
// reduces part r of the elements, reading it from every rank's input, and
// writes the result into every rank's output: each input byte is read once
// and each output byte written once, with none of the ring's FIFO copies and
// only two synchronisations per call instead of 2(N-1) steps.
//
// The caller synchronises: no rank may start before every rank has entered
// the collective (the others write its output), and none may return before
// every rank has finished (the others read its input). Results are
// bit-identical on every rank (each part is reduced once, in rank order).
#ifndef RINGO_KERNELS_HOST_DIRECT_H_
#define RINGO_KERNELS_HOST_DIRECT_H_

#include <cstdint>

#include "base/status.h"
#include "kernels/host_executor.h"
#include "kernels/schedule.h"

namespace ringo::kernels {

// The elements [lo, hi) rank `rank` reduces: parts start at multiples of 64 bytes.
Range DirectPart(const CollArgs& args, int rank, int nranks);

// `sends[q]` / `recvs[q]`: rank q's buffers, addressed from this process.
// `stream`: write the outputs with non-temporal stores (large collectives).
// AllReduce only (InvalidUsage otherwise).
base::Status RunHostDirect(const CollArgs& args, int rank, int nranks, const void* const* sends,
                           void* const* recvs, bool stream);

}  // namespace ringo::kernels

#endif  // RINGO_KERNELS_HOST_DIRECT_H_
