// What a rank's GPU engines share: its CUDA device, the abort flag its
// kernels poll and the error record they fill (mapped host memory), the
// completion event that orders its launches (internal/gpu_order.h: every
// launch waits for the previous one, whatever stream it is on), the stream
// rule for ranks that share a GPU in one process, and the writes that raise
// this rank's abort words in its device FIFOs.
//
// Thread safety: Enqueue and Synchronize by the communicator's one user
// thread at a time; RaiseAbort, RaiseAbortWords and KernelError from any.
#ifndef RINGO_COLLECTIVES_ENGINES_GPU_RANK_H_
#define RINGO_COLLECTIVES_ENGINES_GPU_RANK_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "base/cuda.h"
#include "base/status.h"
#include "collectives/engines/gpu_order.h"
#include "kernels/cuda/device_types.h"
#include "transport/cuda/gpu_fifo.h"

namespace ringo::collectives {

class GpuRank {
 public:
  // Blocking: allocates mapped host memory and events on `device`.
  // `track_replays`: RINGO_GPU_TRACK_REPLAYS (gpu_order.h).
  static base::StatusOr<std::shared_ptr<GpuRank>> Create(int rank, int device, int64_t timeout_ms,
                                                         int ranks_sharing_gpu, bool track_replays);
  ~GpuRank();

  int device() const { return device_; }
  int rank() const { return rank_; }
  // This rank's abort flag, error record and deadline, as its kernels check
  // them, and the number of the launch being enqueued (inside Enqueue's
  // `launch`: KernelGuard::launch, for MarkDeviceLaunch).
  kernels::gpu::KernelGuard Guard() const;

  // Runs `launch` (which enqueues on `stream`) after the previous launch's
  // completion, with `device` current; refuses a stream the stream rule
  // forbids (null: the legacy default stream, refused where other ranks of
  // this process share the GPU, as are blocking streams). `capturing` and
  // `capture_id` say whether `stream` is capturing a graph (the call asked
  // once: Call::capturing). An eager launch on the stream of the previous
  // one makes one query (its stream id), the launch and one event record.
  base::Status Enqueue(void* stream, bool capturing, unsigned long long capture_id,
                       const std::function<base::Status()>& launch);
  // Blocks until everything enqueued so far has completed, and, where
  // replays are tracked, the last replay of a graph holding this rank's
  // launches.
  base::Status Synchronize();
  // Stops this rank's running kernels (its mapped flag). Does not wait.
  void RaiseAbort();
  // Sets these abort words of device FIFOs (this rank's ends of its links,
  // which its peers' kernels poll). Does not wait.
  void RaiseAbortWords(const std::vector<uint32_t*>& words);
  // What a kernel recorded (OK if nothing); may be read while kernels run.
  base::Status KernelError() const;

 private:
  GpuRank() = default;
  int rank_ = 0;
  int device_ = 0;
  uint64_t timeout_ns_ = 0;
  int ranks_sharing_gpu_ = 1;
  uint64_t launches_ = 0;         // Enqueue calls so far, the one running included
  base::MappedHostMemory error_;  // a kernels::gpu::ErrorRecord
  base::DeviceCopy claim_;        // an int in device memory: which kernel writes error_
  base::MappedHostMemory abort_;  // an int, non-zero: stop
  base::CudaEvent done_;          // recorded after each eager launch
  base::CudaEvent captured_;      // recorded after each launch captured in a graph, inside its capture
  base::CudaEvent replayed_;      // recorded by each replay of such a launch (tracked replays only)
  bool track_replays_ = false;
  bool ruled_ = false;                   // the stream rule has accepted a stream
  unsigned long long ruled_stream_ = 0;  // its id, where ruled_
  LaunchOrder order_;
  std::mutex words_mu_;
  std::unique_ptr<transport::DeviceWords> words_;  // GUARDED_BY(words_mu_)
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_GPU_RANK_H_
