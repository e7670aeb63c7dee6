// Plain data of the point-to-point kernel (kernels/cuda/ring_p2p.cu): a
// batch of sends and receives (one ringoSend/ringoRecv, or a group's),
// grouped into lanes, one CUDA block each. A lane is one direction of one
// pair (every operation on it in issue order, since one block owns the
// connector's counter) or this rank's copies to itself. No CUDA headers.
//
// Protocol on a lane's connector (transport/fifo/layout.h, the same FIFO
// as a ring edge): a message of B bytes is max(1, ceil(B / slot_bytes))
// slots; the sender writes a slot, stores its size in meta[slot].bytes and
// release-stores tail + 1; the receiver acquires tail, checks the size
// against what it expects (a mismatch is KernelError::kSizeMismatch),
// copies the slot out and release-stores head + 1. Each end starts from the
// counter it owns (the previous kernel on the stream left it), so
// connections persist across launches.
#ifndef RINGO_KERNELS_CUDA_P2P_TYPES_H_
#define RINGO_KERNELS_CUDA_P2P_TYPES_H_

#include <cstdint>

#include "kernels/cuda/device_types.h"

namespace ringo::kernels::gpu {

// Lanes (blocks) and operations one launch carries; a group with more is
// refused (ringoInvalidUsage).
inline constexpr int kMaxP2pLanes = 64;
inline constexpr int kMaxP2pOps = 256;
// Threads per block of the point-to-point kernel.
inline constexpr int kP2pThreads = 256;

enum class P2pLaneKind : int32_t { kSend = 0, kRecv = 1, kSelf = 2 };

struct P2pLane {
  DeviceFifo fifo;  // kSend: the connector to the peer; kRecv: from it; kSelf: unused
  P2pLaneKind kind = P2pLaneKind::kSend;
  int32_t peer = -1;
  int32_t first_op = 0;  // this lane's operations: ops[first_op, first_op + nops)
  int32_t nops = 0;
};

struct P2pOpSpan {
  const void* send = nullptr;  // kSend, kSelf: the bytes to send
  void* recv = nullptr;        // kRecv, kSelf: where they go
  uint64_t bytes = 0;
};

// The kernel's only parameter (about 13 KB: CUDA 12.1 or later, as the
// toolkit this project builds with, takes kernel parameters up to 32 KB).
struct P2pKernelArgs {
  P2pLane lanes[kMaxP2pLanes];
  P2pOpSpan ops[kMaxP2pOps];
  int32_t nlanes = 0;
  int32_t rank = 0;
};

}  // namespace ringo::kernels::gpu

#endif  // RINGO_KERNELS_CUDA_P2P_TYPES_H_
