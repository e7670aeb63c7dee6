// The host ring: one channel of a ring collective on host memory, run by
// the ring loop the GPU kernels run (ring_loop.h) over primitives that move
// chunks through this channel's FIFO ends (transport/fifo/fifo.h) and check,
// in every slot they receive, the signature of the collective it belongs to.
// The (datatype, op) pair becomes a template instantiation in exactly one
// place (ring_executor.cc).
//
// Blocking: returns when this channel's part of the collective is done on
// this rank, or with the first error (a peer that died, aborted or stalled
// past the timeout; a peer that sent a chunk of the wrong size or of another
// collective).
// Thread safety: each channel runs on its own thread with its own ends.
#ifndef RINGO_KERNELS_RING_EXECUTOR_H_
#define RINGO_KERNELS_RING_EXECUTOR_H_

#include <cstdint>

#include "base/status.h"
#include "kernels/coll_args.h"
#include "kernels/ring_loop.h"
#include "transport/fifo/fifo.h"
#include "transport/signature.h"

namespace ringo::kernels {

// How a host channel writes.
struct HostStores {
  bool stream_output = false;  // the output with non-temporal stores (large collectives)
  // The FIFO slots with non-temporal stores. They go to memory, and
  // the receiver reads them from there; cached stores leave the lines in the
  // writer's cache, where the receiver's prefetch (internal/prefetch.h) finds
  // them. Cached stores, ring forced, medians of 4 interleaved ringo-perf
  // launches on the 2-core AMD EPYC (Zen 5) VM: 2 ranks 64 KiB 4.5 us against
  // 6.8, 1 MiB 68 / 94, 16 MiB 1.77 / 2.66 ms, 256 MiB 30 / 45 ms; 4 ranks 1
  // MiB 161 / 322 us, 256 MiB 62 / 114 ms. (An earlier 2-core AMD VM, before
  // the prefetch, had streamed stores 1.4x to 2.2x faster.)
  bool stream_fifo = false;
};

// `sig`: the collective's signature (kernels/coll_signature.h), carried in every
// slot this channel posts. With sig.seq != 0 every slot received must carry
// the same signature (a mismatch is InvalidUsage naming both calls), and on
// channel 0 a rank that receives nothing in this collective (a Broadcast's
// root, a Reduce's first rank, every rank of an empty one) waits at its end
// for an empty slot from its ring predecessor, which sends it once its own
// first receive matched (or at once when it receives nothing either): so
// every rank of two, and the root of any ring, learns of a mismatch in the
// call itself.
struct ChannelEnds {
  transport::RecvEnd* recv = nullptr;
  transport::SendEnd* send = nullptr;
  transport::WaitContext wait;
  transport::CallSignature sig;
};

// Channel `channel` of `ring` (as MakeRingArgs builds it: counts in the
// datatype's elements) on this rank.
base::Status RunHostChannel(const RingArgs& ring, int channel, const HostStores& stores, ChannelEnds& ends);

}  // namespace ringo::kernels

#endif  // RINGO_KERNELS_RING_EXECUTOR_H_
