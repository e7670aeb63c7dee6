// What each collective means to the benchmark, as in nccl-tests: element
// counts for a message size, where the in-place buffers sit, and the
// bus-bandwidth factor. Pure functions.
#ifndef RINGO_TOOLS_PERF_COLLECTIVE_H_
#define RINGO_TOOLS_PERF_COLLECTIVE_H_

#include <cstddef>

#include "base/device/dtype.h"
#include "tools/perf/options.h"

namespace ringo::perf {

// Element counts of one run (nccl-tests' getCollByteCount).
struct CollCounts {
  size_t send_count = 0;   // elements in sendbuff
  size_t recv_count = 0;   // elements in recvbuff
  size_t param_count = 0;  // the count argument of the call; the "count" column
  // In place, rank r's sendbuff / recvbuff start this many elements times r
  // into the one buffer.
  size_t send_inplace_offset = 0;
  size_t recv_inplace_offset = 0;

  // The "size" column: bytes of the larger buffer.
  size_t Bytes(size_t type_size) const {
    return (send_count > recv_count ? send_count : recv_count) * type_size;
  }
};

// Counts for a message of `bytes` bytes (rounded down to whole elements, and
// for reducescatter/allgather to a multiple of nranks).
CollCounts ComputeCounts(Collective c, size_t bytes, size_t type_size, int nranks);

// busbw = algbw * BusFactor: the fraction of the data each link carries in
// the ring algorithm, so busbw compares with the link bandwidth.
double BusFactor(Collective c, int nranks);

}  // namespace ringo::perf

#endif  // RINGO_TOOLS_PERF_COLLECTIVE_H_
