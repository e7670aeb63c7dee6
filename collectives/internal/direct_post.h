// What each rank posts on the board before a direct collective (its
// buffers' addresses and shared regions). Private to the communicator; a
// header so that communicator.cc (which owns the vector of them) and
// communicator_direct.cc (which fills it) see one definition.
#ifndef RINGO_COLLECTIVES_INTERNAL_DIRECT_POST_H_
#define RINGO_COLLECTIVES_INTERNAL_DIRECT_POST_H_

#include <cstdint>

#include "collectives/communicator.h"
#include "transport/shared_region.h"

namespace ringo::collectives {

// What each rank posts on the board before a direct collective: its buffers'
// addresses in its own process, and their shared regions where they lie in one.
// The byte counts are what the other ranks may touch: a peer whose call
// would reach further (a mismatched count or datatype) fails instead.
struct Communicator::DirectPost {
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

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_INTERNAL_DIRECT_POST_H_
