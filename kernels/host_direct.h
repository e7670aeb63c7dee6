// The direct executor: collectives among the ranks of one host when every
// rank can address the buffers it needs of every other rank (ranks that are
// threads of one process, or buffers from ringoMemAlloc mapped by every
// rank). No FIFO copies, and two synchronisations per call instead of the
// ring's 2(N-1) steps:
// - AllReduce: rank r reduces part r of the elements, reading it from every
//   rank's input, and writes the result into every rank's output (each input
//   byte read once, each output byte written once).
// - Reduce: the same parts, written into the root's output only.
// - ReduceScatter: each rank reduces its own block of every rank's input.
// - AllGather, Broadcast: each rank copies what it receives straight from the
//   senders' inputs into its output.
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

// AllReduce, Reduce: the elements [lo, hi) rank `rank` reduces; parts start at multiples of 64 bytes.
Range DirectPart(const CollArgs& args, int rank, int nranks);

// `sends[q]` / `recvs[q]`: rank q's buffers, addressed from this process
// (only those DirectBuffersNeeded names must be valid for q != rank).
// `stream`: write the outputs with non-temporal stores (large collectives).
base::Status RunHostDirect(const CollArgs& args, int rank, int nranks, const void* const* sends,
                           void* const* recvs, bool stream);

// The bytes of `rank`'s send and receive buffers that other ranks read or
// write in a direct collective (0: not reached by any other rank).
struct DirectNeeds {
  int64_t send_bytes = 0;
  int64_t recv_bytes = 0;
};
DirectNeeds DirectBuffersNeeded(const CollArgs& args, int rank, int nranks);

}  // namespace ringo::kernels

#endif  // RINGO_KERNELS_HOST_DIRECT_H_
