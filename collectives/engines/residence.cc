#include "collectives/engines/residence.h"

#include <cstdint>
#include <string>

#include "base/cuda.h"
#include "collectives/engines/gpu_placement.h"
#include "transport/shm/board.h"

namespace ringo::collectives {

using base::Status;
using base::StatusOr;

namespace {

// Host memory: calls complete inside them; no buffer may be GPU memory.
class HostResidence final : public Residence {
 public:
  HostResidence(std::shared_ptr<transport::HostPages> pages, bool cuda_visible)
      : pages_(std::move(pages)), cuda_visible_(cuda_visible) {}

  int device() const override { return -1; }

  Status CheckBuffer(const void* ptr, const char* name) const override {
    if (ptr == nullptr) return base::InvalidArgument(std::string(name) + " is NULL");
    if (!cuda_visible_ || base::PointerDevice(ptr) < 0) return Status();  // no GPU in this process: host memory
    return base::InvalidArgument(std::string(name) + " is GPU memory, but this is a host communicator");
  }

  // A host collective runs inside the call: a graph would hold nothing of it.
  Status CheckCapture(void* stream) const override {
    if (stream == nullptr || !cuda_visible_ || !base::StreamCapturing(stream)) return Status();
    return base::InvalidUsage(
        "the stream is being captured into a CUDA graph, but this is a host-memory communicator, whose "
        "collectives run inside the call and cannot be replayed: capture only GPU communicators' calls");
  }

  Status BeginLaunch(GpuTimes*, bool, void*, Launch* launch) override {
    *launch = Launch();  // done when the call returns
    return Status();
  }

  void EndLaunch(GpuTimes*, const Launch&, void*, uint64_t, size_t) override {}

  void Abort(const Status& why, uint64_t seq) override {
    if (pages_ != nullptr) pages_->Abort(why, seq);
  }

  void ConfigureWait(transport::WaitContext* wait) const override {
    if (pages_ == nullptr) return;
    wait->self_wait = pages_->self_waits();
    wait->rank_waits = pages_->rank_waits();
  }

  std::string Describe(const EngineSetup& s) const override {
    return "host memory, " + std::to_string(s.host.nchannels) + " channel(s), slot " +
           std::to_string(s.host.slot_bytes) + " B, spin " + std::to_string(s.host.spin_count) + "/yield " +
           std::to_string(s.host.yield_count) + ", " + std::to_string(s.local_ranks) + " local rank(s)";
  }

 private:
  std::shared_ptr<transport::HostPages> pages_;  // null: no board (across hosts, or none planned)
  bool cuda_visible_;                            // false: no buffer can be GPU memory (no need to ask)
};

// A CUDA device: calls are enqueued on the caller's stream.
class GpuResidence final : public Residence {
 public:
  GpuResidence(int device, bool hosts_spanned) : device_(device), hosts_spanned_(hosts_spanned) {}

  int device() const override { return device_; }

  Status CheckBuffer(const void* ptr, const char* name) const override {
    if (ptr == nullptr) return base::InvalidArgument(std::string(name) + " is NULL");
    const int owner = base::PointerDevice(ptr);
    if (owner == device_) return Status();
    if (owner < 0) {
      return base::InvalidArgument(std::string(name) + " is host memory, but this is a GPU communicator on CUDA device " +
                                   std::to_string(device_) + ": pass memory from cudaMalloc on that device");
    }
    return base::InvalidArgument(std::string(name) + " is memory of CUDA device " + std::to_string(owner) +
                                 ", but this communicator runs on CUDA device " + std::to_string(device_));
  }

  Status CheckCapture(void*) const override { return Status(); }

  Status BeginLaunch(GpuTimes* times, bool recorded, void* stream, Launch* launch) override {
    *launch = Launch();
    // The one capture query of the call (the engines take its answer). A
    // stream handle names its device, but the default and per-thread
    // handles (0, cudaStreamLegacy, cudaStreamPerThread) mean the current
    // device's: asked on this communicator's, where the launch goes.
    base::StreamCapture capture;
    if (reinterpret_cast<uintptr_t>(stream) <= 2) {
      ASSIGN_OR_RETURN(base::ScopedDevice scope, base::ScopedDevice::Enter(device_));
      ASSIGN_OR_RETURN(capture, base::GetStreamCapture(stream));
    } else {
      ASSIGN_OR_RETURN(capture, base::GetStreamCapture(stream));
    }
    launch->capturing = capture.active;
    launch->capture_id = capture.id;
    if (capture.active) {
      if (hosts_spanned_) {
        return base::InvalidUsage(
            "this GPU communicator spans hosts: its calls cannot be captured into a CUDA graph (the network "
            "proxy moves each slot as a kernel posts it, and a replay would not tell it); call it eagerly");
      }
      launch->state = TraceState::kCaptured;  // recorded once, at capture
      return Status();
    }
    launch->state = TraceState::kEnqueued;
    if (recorded && times != nullptr) launch->slot = times->Before(stream);
    return Status();
  }

  void EndLaunch(GpuTimes* times, const Launch& launch, void* stream, uint64_t first, size_t n) override {
    if (launch.slot < 0) return;
    if (first != 0) {
      times->After(launch.slot, stream, first, n);
    } else {
      times->Cancel(launch.slot);  // the launch failed or was refused
    }
  }

  std::string Describe(const EngineSetup& s) const override {
    return "CUDA device " + std::to_string(device_) + ", " + std::to_string(s.gpu.nchannels) + " channel(s), slot " +
           std::to_string(s.gpu.slot_bytes) + " B, LL slot " + std::to_string(s.gpu.ll_slot_bytes) + " B";
  }

 private:
  int device_;
  bool hosts_spanned_;  // a capture is refused: the proxy could not follow a replay
};

// Every rank loads its kernels and sees every rank's GPU: the same channels
// and the same verdict on every rank.
StatusOr<std::unique_ptr<Residence>> PrepareGpu(EngineSetup* setup) {
  ASSIGN_OR_RETURN(const std::vector<GpuPlace> gpus, ExchangePlaces(*setup->exchange, setup->device));
  const GpuLayout layout = LayoutOf(gpus);
  setup->gpu = ChooseDeviceGeometry(setup->settings, setup->nranks, layout.residency, layout.max_ranks_per_gpu,
                                    setup->gpu_hosts_spanned);
  RETURN_IF_ERROR(CheckPlaces(gpus, setup->gpu.nchannels));
  setup->ranks_sharing_gpu = RanksSharingGpuInProcess(gpus, setup->rank);
  setup->gpu_scope_peers = GpuScopePeers(gpus, setup->rank, setup->settings.local.gpu_device_scope);
  return std::unique_ptr<Residence>(new GpuResidence(setup->device, setup->gpu_hosts_spanned));
}

// Where every rank shares one memory domain and the planner gave it room:
// the pages of the board and the wait cells.
StatusOr<std::unique_ptr<Residence>> PrepareHost(EngineSetup* setup) {
  if (setup->host.board_bytes > 0) {
    ASSIGN_OR_RETURN(std::unique_ptr<transport::HostPages> pages,
                     transport::HostPages::Connect(*setup->exchange, setup->tag,
                                                   transport::BoardBytes(static_cast<size_t>(setup->host.board_bytes))));
    setup->pages = std::move(pages);
  }
  return std::unique_ptr<Residence>(new HostResidence(setup->pages, base::ProbeCuda().device_count > 0));
}

}  // namespace

StatusOr<std::unique_ptr<Residence>> PrepareResidence(EngineSetup* setup) {
  return setup->device >= 0 ? PrepareGpu(setup) : PrepareHost(setup);
}

}  // namespace ringo::collectives
