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
#ifndef RINGO_KERNELS_DIRECT_EXECUTOR_H_
#define RINGO_KERNELS_DIRECT_EXECUTOR_H_

#include <atomic>
#include <cstdint>

#include "base/status.h"
#include "kernels/coll_args.h"
#include "kernels/schedule.h"

namespace ringo::kernels {

// AllReduce, Reduce: the elements [lo, hi) rank `rank` reduces; parts start at multiples of 64 bytes.
Range DirectPart(const CollArgs& args, int rank, int nranks);

// Work sharing (AllReduce and Reduce). Each rank's part is cut into chunks
// of DirectChunkElems, and the chunks of part q are claimed through words[q]:
// a 64-bit word every rank can reach (shared memory), holding the next chunk
// from the front in its low half and the end of the unclaimed chunks in its
// high half. A rank reduces the chunks of its own part from the front, then
// takes what is left from the back of the parts of ranks that last ran on its
// core (they are not running while it is) or on a core that carries more
// ranks than its own (`cpus[q]`: the core rank q last ran on; null: take from
// every rank). So ranks that outnumber cores do not leave a core waiting for
// a rank that is switched out, while ranks that each have a core keep
// reducing their own part (their caches keep the same lines from call to
// call). Each chunk is reduced once, in rank order, so results do not depend
// on who reduced it.
//
// Rank q stores DirectShareWord(args, q, nranks) into words[q] before it
// publishes that it entered the collective; the others claim only after
// seeing every rank enter, and every claim ends before the rank's final
// synchronisation, which the next call's reset follows.
struct DirectShare {
  std::atomic<uint64_t>* const* words = nullptr;  // per rank; null: each rank reduces its own part
  const std::atomic<int32_t>* const* cpus = nullptr;
  // Reduce with the host loops' reduce_ordered (RINGO_DETERMINISTIC): the
  // bits a ring chain in rank order computes.
  bool ordered = false;
};
int64_t DirectChunkElems(const CollArgs& args, int nranks);
uint64_t DirectShareWord(const CollArgs& args, int rank, int nranks);
// Claims on a word: the owner's from the front, the others' from the back;
// the chunk index, or -1 when none is left. Claims are atomic (relaxed: the
// collective's synchronisations order the data), so each chunk goes to
// exactly one claimer.
int64_t DirectClaimFront(std::atomic<uint64_t>& word);
int64_t DirectClaimBack(std::atomic<uint64_t>& word);

// `sends[q]` / `recvs[q]`: rank q's buffers, addressed from this process
// (only those DirectBuffersNeeded names must be valid for q != rank).
// `stream`: write the outputs with non-temporal stores (large collectives).
// `share`: claim AllReduce and Reduce chunks through the words (above).
base::Status RunHostDirect(const CollArgs& args, int rank, int nranks, const void* const* sends,
                           void* const* recvs, bool stream, const DirectShare& share = {});

// The bytes of `rank`'s send and receive buffers that other ranks read or
// write in a direct collective (0: not reached by any other rank).
struct DirectNeeds {
  int64_t send_bytes = 0;
  int64_t recv_bytes = 0;
};
DirectNeeds DirectBuffersNeeded(const CollArgs& args, int rank, int nranks);

}  // namespace ringo::kernels

#endif  // RINGO_KERNELS_DIRECT_EXECUTOR_H_
