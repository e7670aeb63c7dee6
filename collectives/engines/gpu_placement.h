// Where the ranks of a GPU communicator run, and what that allows. Ranks that
// share a GPU wait on each other inside their ring kernels, so:
//  - every block of all of them must be resident at once (the GPU's
//    multiprocessors x ring blocks each, kernels/cuda/residency.h);
//  - ranks of one process that share a GPU each need a hardware work queue of
//    their own (CUDA_DEVICE_MAX_CONNECTIONS): kernels of streams that share a
//    queue wait for each other;
//  - such ranks must enqueue on non-blocking streams (GpuStreamRule).
// Each rank describes its place (host, process, GPU, what the GPU holds),
// every rank sees every place (threads: built in place; processes: one
// bootstrap all-gather), and the checks and the channel count are pure
// functions of the places, so every rank decides alike and the checks are
// tested on the CPU.
//
// Thread safety: pure functions, except LoadPlace/ExchangePlaces (CUDA and the
// bootstrap; blocking).
#ifndef RINGO_COLLECTIVES_ENGINES_GPU_PLACEMENT_H_
#define RINGO_COLLECTIVES_ENGINES_GPU_PLACEMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "kernels/cuda/residency.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/connect/connector.h"

namespace ringo::collectives {

inline constexpr int kPlaceBusIdBytes = 32;

// One rank's place; fixed-size, sent raw through the bootstrap.
struct GpuPlace {
  // Its machine (the boot id, PeerInfo::machine_hash): with the PCI bus id,
  // which GPU it is, whatever host RINGO_HOSTID, a container or a network
  // namespace says the rank is on.
  uint64_t machine_hash;
  int32_t pid;
  int32_t ok;             // 1: the fields below are valid; 0: this rank failed to load its kernels
  int32_t sms;            // its GPU's multiprocessors
  int32_t blocks_per_sm;  // ring blocks one of them holds at once
  int32_t work_queues;  // its process's hardware queues per context (base::CudaProbe::work_queues)
  int32_t device;       // its CUDA device ordinal, in its own process
  char bus_id[kPlaceBusIdBytes];  // its GPU's PCI bus id, NUL-terminated
};

// What every rank derives alike from every place.
struct GpuLayout {
  int max_ranks_per_gpu = 1;  // the most ranks on any one GPU
  kernels::gpu::RingResidency
      residency;  // the smallest GPU's (fewest multiprocessors, fewest blocks each)
};

// This process's place on CUDA device `device`: loads every ring kernel there
// first (kernels::gpu::LoadRingKernels). Blocking.
base::StatusOr<GpuPlace> LoadPlace(int device);

// Ranks that are threads of this process, rank r on devices[r]. Blocking.
base::StatusOr<std::vector<GpuPlace>> LocalPlaces(const std::vector<int>& devices);

// Ranks that are processes: this rank loads its place on `device` and every
// rank's place goes round in one all-gather (sent even after a local failure,
// so every rank fails at once naming the rank that could not). Collective;
// blocking.
base::StatusOr<std::vector<GpuPlace>> ExchangePlaces(transport::Exchange& bootstrap, int device);

// Whether two places name the same GPU (same host and PCI bus id).
bool SameGpu(const GpuPlace& a, const GpuPlace& b);

GpuLayout LayoutOf(const std::vector<GpuPlace>& places);

// Ranks on rank `rank`'s GPU that are in its process (itself included).
int RanksSharingGpuInProcess(const std::vector<GpuPlace>& places, int rank);

// Per rank, 1 where rank `rank`'s FIFOs with it may be ordered at GPU scope:
// its kernels run on rank `rank`'s GPU in rank `rank`'s process, and
// `enabled` (RINGO_GPU_DEVICE_SCOPE); 0 elsewhere, itself included. (PTX's
// GPU scope covers the grids one program launches on a device; whether it
// covers another process's under MPS is for a GPU run to show: system
// scope there until then.)
std::vector<uint8_t> GpuScopePeers(const std::vector<GpuPlace>& places, int rank, bool enabled);
// DeviceFifo::gpu_scope of the FIFO of `link`: its peer is one of
// `peers` and the FIFO is device memory (a peer's or an IPC mapping); 0 for
// a FIFO in host memory (the network proxy's).
uint32_t GpuScopeOf(const std::vector<uint8_t>& peers, const transport::FifoLink& link);

// OK when the ranks on every GPU, `nchannels` each, fit it at once, and the
// ranks of every process on every GPU fit its work queues; else InvalidUsage
// saying which GPU and what to change. The same answer on every rank.
base::Status CheckPlaces(const std::vector<GpuPlace>& places, int nchannels);

// Streams of a rank whose GPU is shared by other ranks of its process: the
// legacy default stream and blocking streams (created without
// cudaStreamNonBlocking, the per-thread default stream too) synchronise with
// each other through the legacy stream, so one rank's kernel could wait for
// the completion of another rank's work that itself waits for this kernel.
// `non_blocking`: whether the stream was created with cudaStreamNonBlocking.
// OK when the stream is allowed; InvalidUsage saying why not.
base::Status GpuStreamRule(bool non_blocking, bool legacy, int ranks_sharing_gpu_in_process);

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_GPU_PLACEMENT_H_
