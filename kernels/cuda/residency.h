// Residency arithmetic of the ring kernels: the ranks that share a GPU wait
// on each other inside their kernels, so every block of every one of them
// must be resident on the GPU at the same time, or the blocks that run spin
// forever on blocks that never start. Pure functions of what the device
// reports (LoadRingKernels in launch.h), so they are tested on the CPU.
//
// Thread safety: pure functions.
#ifndef RINGO_KERNELS_CUDA_RESIDENCY_H_
#define RINGO_KERNELS_CUDA_RESIDENCY_H_

#include <cstdint>
#include <string>

#include "base/status.h"

namespace ringo::kernels::gpu {

// What one GPU holds of the ring kernel at once.
struct RingResidency {
  int sms = 0;            // multiprocessors
  int blocks_per_sm = 0;  // ring blocks (kRingThreads threads) one multiprocessor holds at once,
                          // the fewest over every (datatype, op, protocol) instantiation
};

// Ring blocks the whole GPU holds at once: multiprocessors x blocks each.
int64_t ResidentRingBlocks(const RingResidency& r);

// Channels per rank when `ranks_on_gpu` ranks share the GPU: one block per
// multiprocessor split evenly among the ranks (a block streams at most a
// multiprocessor's share of memory bandwidth, so fewer blocks leave
// bandwidth unused), at least 1 and at most `max_channels`.
int ChannelsPerRank(const RingResidency& r, int ranks_on_gpu, int max_channels);

// OK when `ranks_on_gpu` ranks of `nchannels` channels each fit the GPU at
// once; otherwise InvalidUsage naming `gpu`, the figures and what to change.
base::Status CheckResidency(const RingResidency& r, int ranks_on_gpu, int nchannels,
                            const std::string& gpu);

}  // namespace ringo::kernels::gpu

#endif  // RINGO_KERNELS_CUDA_RESIDENCY_H_
