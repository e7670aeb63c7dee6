// The GPU ring engine: every ring collective of a GPU communicator as one
// ring kernel on the caller's stream (kernels/cuda/launch.h), over this
// rank's FIFOs of every channel in device memory (connected at init through
// the connector's GPU media: a peer's pointer in one process, CUDA IPC
// across processes), described to the kernels by a channel table uploaded
// once. A one-rank communicator copies on the device. Takes every call.
#ifndef RINGO_COLLECTIVES_ENGINES_GPU_RING_H_
#define RINGO_COLLECTIVES_ENGINES_GPU_RING_H_

#include <memory>
#include <utility>
#include <vector>

#include "collectives/engines/engine.h"
#include "collectives/engines/gpu_rank.h"
#include "collectives/engines/setup.h"
#include "kernels/cuda/device_types.h"
#include "transport/connect/connector.h"

namespace ringo::collectives {

class GpuRing : public Engine {
 public:
  // Connects this rank's ends of every channel (collective over the ranks).
  static base::StatusOr<std::unique_ptr<GpuRing>> Connect(const EngineSetup& setup, std::shared_ptr<GpuRank> gpu);
  // Waits for this rank's kernels before its FIFOs go.
  ~GpuRing() override;

  const char* name() const override { return "GPU ring"; }
  bool Takes(Call& call) override { return true; }
  base::Status Run(Call& call) override;
  void Abort(const base::Status& why, uint64_t seq) override;
  base::Status Synchronize() override { return gpu_->Synchronize(); }
  base::Status AsyncError() const override { return gpu_->KernelError(); }
  bool asynchronous() const override { return true; }

  // The plan Run would use for `args`.
  DevicePlan Plan(const kernels::CollArgs& args) const;

 private:
  GpuRing(const EngineSetup& setup, std::shared_ptr<GpuRank> gpu);

  const int rank_;
  const int nranks_;
  const int pos_;
  const std::vector<int> order_;
  const DeviceGeometry geometry_;
  int64_t max_simple_slice_ = 0;
  int64_t max_ll_slice_ = 0;
  std::shared_ptr<GpuRank> gpu_;
  std::vector<transport::FifoLink> links_;            // sends, then receives, per channel
  std::vector<kernels::gpu::DeviceChannel> channels_;  // one per connected channel
  base::DeviceCopy device_channels_;                   // channels_ in device memory, read by the kernels
  std::vector<uint32_t*> abort_words_;                 // this rank's abort word in each of its FIFOs
  // Network edges' FIFOs (host addresses), with their channel: a launch
  // marks those of the channels it runs (MarkDeviceLaunch).
  std::vector<std::pair<int, transport::FifoHeader*>> net_fifos_;
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_GPU_RING_H_
