// What each rank posts on the board before a direct collective (its
// buffers' addresses and shared regions, and the bytes of them the others
// may touch), and the check every rank makes of every post before touching
// a peer's memory. Private to the communicator; a header so that the
// communicator and its tests see one definition.
#ifndef RINGO_COLLECTIVES_ENGINES_DIRECT_POST_H_
#define RINGO_COLLECTIVES_ENGINES_DIRECT_POST_H_

#include <cstdint>

#include "base/status.h"
#include "kernels/coll_args.h"
#include "transport/shm/shared_region.h"

namespace ringo::collectives::internal {

// Addresses are in the posting rank's process; regions name its
// ringoMemAlloc memory (fd -1: not in one). The byte counts are what the
// other ranks may touch: a peer whose call would reach further (a
// mismatched count or datatype) fails instead.
struct DirectPost {
  uint64_t send_addr;
  uint64_t recv_addr;
  transport::RegionName send_region;  // fd -1: not in a shared region
  transport::RegionName recv_region;
  uint64_t send_offset;
  uint64_t recv_offset;
  uint64_t send_bytes;  // bytes of the send buffer the others may read
  uint64_t recv_bytes;  // bytes of the receive buffer the others may write
  int32_t pid;
  int32_t reserved;
};

// Whether rank `self` may run its direct call `args` on rank q's buffers as
// `post` (written by rank q, so anything at all) describes them: it lies
// within its region and publishes at least the bytes the call touches. An
// error naming rank q otherwise.
base::Status ValidateDirectPost(const kernels::CollArgs& args, int self, int q, int nranks, const DirectPost& post);

}  // namespace ringo::collectives::internal

#endif  // RINGO_COLLECTIVES_ENGINES_DIRECT_POST_H_
