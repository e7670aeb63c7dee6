// GPUDirect RDMA: whether a verbs NIC can read and write a GPU's memory
// directly, so that a GPU ring edge between hosts keeps its slots in device
// memory instead of staging them through pinned host memory. Each GPU rank
// judges its own facts once and offers GPUDirect to its peers where
// RINGO_NET_GPUDIRECT=1 asks for it and every piece is there; an edge takes
// it where both of its ends offer it and it goes over verbs
// (EdgeSlotsApart), so both ends decide alike from the same records. The
// data path is transport/connect/net_medium.cc (device slots registered
// with the NIC) and net/proxy.h (a slot's metadata and data as two
// messages).
#ifndef RINGO_TRANSPORT_NET_GPUDIRECT_H_
#define RINGO_TRANSPORT_NET_GPUDIRECT_H_

#include <string>

#include "transport/net/choice.h"

namespace ringo::transport::net {

// What GPUDirect RDMA needs, each as found on this rank.
struct GpuDirectFacts {
  bool verbs = false;         // this rank's network edges can take verbs (it has a verbs port)
  bool gpu_rdma = false;      // the GPU supports GPUDirect RDMA (cudaDevAttrGPUDirectRDMASupported)
  bool gpu_dmabuf = false;    // its driver exports device memory as a dma-buf (attribute 124)
  bool gpu_visible = false;   // the NIC's writes reach its kernels: ordered, or a flush it supports
  bool verbs_dmabuf = false;  // libibverbs has ibv_reg_dmabuf_mr
  bool peermem = false;       // the nvidia_peermem kernel module is loaded
};

struct GpuDirectVerdict {
  bool available = false;  // every piece one route needs is there
  bool used = false;       // available and asked for (RINGO_NET_GPUDIRECT=1): this rank offers it
  std::string text;        // one line for the log
};

// The verdict from the facts and the setting (pure: the tests fake them).
// Routes: dma-buf (the GPU's and the verbs library's), or nvidia_peermem;
// either needs verbs and a GPU that supports GPUDirect RDMA and makes the
// NIC's writes visible to its kernels.
GpuDirectVerdict JudgeGpuDirect(const GpuDirectFacts& facts, bool wanted);

// The facts on this machine for CUDA device `device`; `verbs` whether the
// rank has a verbs port; `sys_module` the folder of loaded modules (sysfs's
// /sys/module, or a test's).
GpuDirectFacts ProbeGpuDirect(int device, bool verbs, const std::string& sys_module = "/sys/module");

// Whether an edge keeps its Simple slots apart from its header, from the
// offers of its two ends and the transport they chose: a GPU edge over
// verbs between two ranks that offer GPUDirect (its slots in device memory;
// no socket reads GPU memory). A host FIFO never does, unless
// `host_stand_in` (a test's ConnectorSpec) asks for process memory standing
// in for the device where both ends offer it, on any transport: the
// GPUDirect wire and layout, driven without a GPU.
bool EdgeSlotsApart(bool gpu, NetKind kind, bool self_offers, bool peer_offers, bool host_stand_in = false);

}  // namespace ringo::transport::net

#endif  // RINGO_TRANSPORT_NET_GPUDIRECT_H_
