// The GPU half of a communicator: one rank's channels over a p2p ring (its
// two ends of each channel, from an in-process P2pRing or a cross-process
// P2pIpcRing) and their table in device memory, its mapped abort flag and
// error record, and the enqueueing of ring kernels on the caller's stream.
// Owned by a Communicator of kind kCuda.
//
// Ordering: every collective of the communicator waits for the previous
// one's completion event, whatever stream each was enqueued on
// (gpu_order.h). Where other ranks of this process share the GPU, streams
// must be non-blocking (gpu_placement.h's GpuStreamRule). A one-rank
// communicator copies on the device (kernels::gpu::LaunchRingKernel).
//
// Thread safety: Enqueue, Synchronize and the destructor are called by the
// communicator's one user thread at a time; RaiseAbort and KernelError from
// any thread (mapped host memory with plain loads/stores; across processes
// RaiseAbort also enqueues copies on the ring's private stream).
#ifndef RINGO_COLLECTIVES_INTERNAL_GPU_COMM_H_
#define RINGO_COLLECTIVES_INTERNAL_GPU_COMM_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "base/cuda.h"
#include "base/status.h"
#include "collectives/internal/gpu_order.h"
#include "collectives/planner.h"
#include "kernels/cuda/device_types.h"
#include "kernels/cuda/p2p_types.h"
#include "kernels/coll_args.h"
#include "transport/cuda/p2p.h"

namespace ringo::collectives::internal {

// One end of a connector as the kernels address it (`receiving`: this rank
// receives on it), the other end being `peer_rank`.
kernels::gpu::DeviceFifo ToDeviceFifo(const transport::P2pFifo& f, bool receiving, int peer_rank);

class GpuComm {
 public:
  // `ends` are this rank's connectors (null for one rank; owned from now
  // on); `order` maps ring position to rank; `ranks_sharing_gpu` counts the
  // ranks of this process on this GPU, itself included (the stream rule).
  // Blocking: allocates mapped host memory, the channel table and an event on
  // `device`.
  static base::StatusOr<std::unique_ptr<GpuComm>> Create(int rank, int nranks, int device,
                                                         const std::vector<int>& order,
                                                         std::unique_ptr<transport::P2pEnds> ends,
                                                         const DeviceGeometry& geometry,
                                                         uint64_t timeout_ns,
                                                         int ranks_sharing_gpu);
  // Waits for the work this rank enqueued, then frees its memory and its
  // ends (an in-process ring's memory goes with the last rank that holds it;
  // a cross-process ring's waits for the predecessor's release, see
  // transport/p2p_ipc.h).
  ~GpuComm();

  int device() const { return device_; }

  // The plan Enqueue would use for `args`.
  DevicePlan Plan(const kernels::CollArgs& args) const;
  // Enqueues `args` on `stream` (a cudaStream_t; null: the legacy default
  // stream, refused where other ranks of this process share the GPU, as are
  // blocking streams) after the previous collective's completion, and returns
  // at once. Every rank must enqueue the same collective.
  base::Status Enqueue(const kernels::CollArgs& args, void* stream);
  // Enqueues a batch of sends and receives (kernels/cuda/p2p_types.h) on
  // `stream` after the previous launch's completion, as Enqueue does, with
  // this rank's abort flag, error record and timeout.
  base::Status EnqueueP2p(const kernels::gpu::P2pKernelArgs& args, void* stream);
  int rank() const { return rank_; }
  // Blocks until everything enqueued so far has completed.
  base::Status Synchronize();
  // Stops this rank's running kernels and tells its ring neighbours' kernels
  // (the connectors' abort flags). Does not wait.
  void RaiseAbort();
  // What a kernel recorded (OK if nothing); may be read while kernels run.
  base::Status KernelError() const;

 private:
  GpuComm() = default;
  // This rank's abort flag, error record and deadline, as its kernels check them.
  kernels::gpu::KernelGuard Guard() const;

  int rank_ = 0;
  int nranks_ = 1;
  int device_ = 0;
  int pos_ = 0;
  std::vector<int> order_;
  DeviceGeometry geometry_;
  uint64_t timeout_ns_ = 0;
  int64_t max_simple_slice_ = 0;
  int64_t max_ll_slice_ = 0;
  int ranks_sharing_gpu_ = 1;                          // ranks of this process on this GPU
  std::vector<kernels::gpu::DeviceChannel> channels_;  // one per connected channel
  std::unique_ptr<transport::P2pEnds> ends_;
  base::DeviceCopy device_channels_;  // channels_ in device memory, read by the kernels
  base::MappedHostMemory error_;  // a kernels::gpu::ErrorRecord
  base::MappedHostMemory abort_;  // an int, non-zero: stop
  base::CudaEvent done_;          // recorded after each enqueued collective
  LaunchOrder order_launches_;
};

}  // namespace ringo::collectives::internal

#endif  // RINGO_COLLECTIVES_INTERNAL_GPU_COMM_H_
