#include "collectives/engines/gpu_placement.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "base/cuda.h"
#include "base/logging.h"
#include "kernels/cuda/launch.h"
#include "transport/connect/peer_info.h"

namespace ringo::collectives {

using base::Status;
using base::StatusOr;

namespace {

std::string BusId(const GpuPlace& p) {
  return std::string(p.bus_id, strnlen(p.bus_id, sizeof(p.bus_id)));
}

std::string GpuName(const GpuPlace& p) {
  return "the GPU at PCI " + BusId(p) + " (CUDA device " + std::to_string(p.device) +
         " of process " + std::to_string(p.pid) + ")";
}

GpuPlace Unplaced() {
  GpuPlace p;
  std::memset(&p, 0, sizeof(p));
  p.machine_hash = transport::LocalPeerInfo(0, -1).machine_hash;
  p.pid = static_cast<int32_t>(getpid());
  p.device = -1;
  return p;
}

}  // namespace

StatusOr<GpuPlace> LoadPlace(int device) {
  GpuPlace p = Unplaced();
  p.device = device;
  ASSIGN_OR_RETURN(const kernels::gpu::RingResidency r, kernels::gpu::LoadRingKernels(device));
  RETURN_IF_ERROR(base::PciBusId(device, p.bus_id, sizeof(p.bus_id)));
  p.sms = r.sms;
  p.blocks_per_sm = r.blocks_per_sm;
  p.work_queues = base::ProbeCuda().work_queues;
  p.ok = 1;
  return p;
}

StatusOr<std::vector<GpuPlace>> LocalPlaces(const std::vector<int>& devices) {
  std::vector<GpuPlace> places;
  for (int d : devices) {
    ASSIGN_OR_RETURN(GpuPlace p, LoadPlace(d));
    places.push_back(p);
  }
  return places;
}

StatusOr<std::vector<GpuPlace>> ExchangePlaces(transport::Exchange& bootstrap, int device) {
  StatusOr<GpuPlace> mine = LoadPlace(device);
  GpuPlace sent = mine.ok() ? mine.value() : Unplaced();
  if (!mine.ok())
    RINGO_LOG(WARN) << "rank " << bootstrap.rank() << ": " << mine.status().ToString();
  std::vector<GpuPlace> all(bootstrap.nranks());
  RETURN_IF_ERROR(bootstrap.AllGather(&sent, sizeof(sent), all.data()));
  RETURN_IF_ERROR(mine.status());
  for (int r = 0; r < bootstrap.nranks(); ++r) {
    if (all[r].ok != 1) {
      return base::RemoteError("rank " + std::to_string(r) +
                               " could not load Ringo's GPU kernels on its GPU");
    }
  }
  return all;
}

bool SameGpu(const GpuPlace& a, const GpuPlace& b) {
  return a.machine_hash == b.machine_hash && BusId(a) == BusId(b);
}

GpuLayout LayoutOf(const std::vector<GpuPlace>& places) {
  GpuLayout l;
  bool first = true;
  for (const GpuPlace& p : places) {
    const int on_gpu = static_cast<int>(std::count_if(
        places.begin(), places.end(), [&](const GpuPlace& q) { return SameGpu(p, q); }));
    l.max_ranks_per_gpu = std::max(l.max_ranks_per_gpu, on_gpu);
    l.residency.sms = first ? p.sms : std::min(l.residency.sms, p.sms);
    l.residency.blocks_per_sm =
        first ? p.blocks_per_sm : std::min(l.residency.blocks_per_sm, p.blocks_per_sm);
    first = false;
  }
  return l;
}

int RanksSharingGpuInProcess(const std::vector<GpuPlace>& places, int rank) {
  const GpuPlace& me = places[rank];
  return static_cast<int>(std::count_if(places.begin(), places.end(), [&](const GpuPlace& q) {
    return SameGpu(me, q) && q.pid == me.pid;
  }));
}

std::vector<uint8_t> GpuScopePeers(const std::vector<GpuPlace>& places, int rank, bool enabled) {
  std::vector<uint8_t> peers(places.size(), 0);
  if (!enabled) return peers;
  for (size_t r = 0; r < places.size(); ++r) {
    const bool same_process = places[r].pid == places[rank].pid;
    peers[r] = static_cast<int>(r) != rank && SameGpu(places[rank], places[r]) && same_process ? 1 : 0;
  }
  return peers;
}

uint32_t GpuScopeOf(const std::vector<uint8_t>& peers, const transport::FifoLink& link) {
  const bool device_memory =
      link.medium == transport::Medium::kCudaPeer || link.medium == transport::Medium::kCudaIpc;
  const bool on_this_gpu = link.peer >= 0 && static_cast<size_t>(link.peer) < peers.size() && peers[link.peer] != 0;
  return device_memory && on_this_gpu ? 1 : 0;
}

Status CheckPlaces(const std::vector<GpuPlace>& places, int nchannels) {
  for (size_t i = 0; i < places.size(); ++i) {
    const GpuPlace& p = places[i];
    bool first_on_gpu = true;  // check each GPU once, at its first rank
    for (size_t j = 0; j < i; ++j) first_on_gpu = first_on_gpu && !SameGpu(p, places[j]);
    if (!first_on_gpu) continue;
    const int on_gpu = static_cast<int>(std::count_if(
        places.begin(), places.end(), [&](const GpuPlace& q) { return SameGpu(p, q); }));
    RETURN_IF_ERROR(kernels::gpu::CheckResidency(
        kernels::gpu::RingResidency{p.sms, p.blocks_per_sm}, on_gpu, nchannels, GpuName(p)));
  }
  for (size_t i = 0; i < places.size(); ++i) {
    const GpuPlace& p = places[i];
    const int sharing = RanksSharingGpuInProcess(places, static_cast<int>(i));
    if (sharing > p.work_queues) {
      return base::InvalidUsage(std::to_string(sharing) + " ranks of process " +
                                std::to_string(p.pid) + " share " + GpuName(p) +
                                ", but its CUDA context has " + std::to_string(p.work_queues) +
                                " hardware work queue(s) (CUDA_DEVICE_MAX_CONNECTIONS): ranks "
                                "whose streams share a queue wait for "
                                "each other's kernels, which wait for them. Set "
                                "CUDA_DEVICE_MAX_CONNECTIONS=32 before the process's "
                                "first CUDA call (Ringo sets it when its own call comes first), or "
                                "use fewer ranks per GPU");
    }
  }
  return Status();
}

Status GpuStreamRule(bool non_blocking, bool legacy, int ranks_sharing_gpu_in_process) {
  if (ranks_sharing_gpu_in_process <= 1 || (non_blocking && !legacy)) return Status();
  return base::InvalidUsage(
      std::string(legacy ? "the legacy default stream (NULL)" : "a blocking stream") +
      " on a GPU that " + std::to_string(ranks_sharing_gpu_in_process) +
      " ranks of this process share: its work synchronises with the other ranks' through the "
      "legacy default "
      "stream, so their ring kernels, which wait on each other, could wait for each other's "
      "completion. Pass a "
      "stream made with cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)");
}

}  // namespace ringo::collectives
