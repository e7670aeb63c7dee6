// GPUDirect RDMA: whether a verbs NIC could read and write a GPU's memory
// directly, so that GPU ring edges between hosts skip the staging through
// pinned host memory. Ringo detects it and reports it (the INFO log of a
// GPU rank's first network edge), and does not use it: the data path
// (device FIFOs registered with ibv_reg_dmabuf_mr, the proxy following a
// tail in device memory) is not built, and GPU edges between hosts always
// stage through pinned host memory (transport/connect/net_medium.cc).
#ifndef RINGO_TRANSPORT_NET_GPUDIRECT_H_
#define RINGO_TRANSPORT_NET_GPUDIRECT_H_

#include <string>

namespace ringo::transport::net {

// What GPUDirect RDMA needs, each as found on this rank.
struct GpuDirectFacts {
  bool verbs = false;         // this rank's network edge takes verbs (not sockets)
  bool gpu_rdma = false;      // the GPU supports GPUDirect RDMA (cudaDevAttrGPUDirectRDMASupported)
  bool gpu_dmabuf = false;    // its driver exports device memory as a dma-buf (attribute 124)
  bool verbs_dmabuf = false;  // libibverbs has ibv_reg_dmabuf_mr
  bool peermem = false;       // the nvidia_peermem kernel module is loaded
};

struct GpuDirectVerdict {
  bool available = false;  // every piece one route needs is there
  bool used = false;       // always false: the data path is not built
  std::string text;        // one line for the log
};

// The verdict from the facts (pure: the tests fake them). Routes: dma-buf
// (the GPU's and the verbs library's), or nvidia_peermem; either needs
// verbs and a GPU that supports GPUDirect RDMA.
GpuDirectVerdict JudgeGpuDirect(const GpuDirectFacts& facts);

// The facts on this machine for CUDA device `device`; `verbs` whether the
// edge takes verbs; `sys_module` the folder of loaded modules (sysfs's
// /sys/module, or a test's).
GpuDirectFacts ProbeGpuDirect(int device, bool verbs, const std::string& sys_module = "/sys/module");

}  // namespace ringo::transport::net

#endif  // RINGO_TRANSPORT_NET_GPUDIRECT_H_
