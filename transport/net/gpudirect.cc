#include "transport/net/gpudirect.h"

#include <sys/stat.h>

#include "base/cuda.h"
#include "transport/net/ib_verbs.h"

namespace ringo::transport::net {

GpuDirectVerdict JudgeGpuDirect(const GpuDirectFacts& f) {
  GpuDirectVerdict v;
  const bool dmabuf = f.gpu_dmabuf && f.verbs_dmabuf;
  v.available = f.verbs && f.gpu_rdma && (dmabuf || f.peermem);
  auto yes = [](bool b) { return b ? "yes" : "no"; };
  const std::string facts = std::string("verbs ") + yes(f.verbs) + ", GPU RDMA " + yes(f.gpu_rdma) +
                            ", GPU dma-buf " + yes(f.gpu_dmabuf) + ", ibv_reg_dmabuf_mr " + yes(f.verbs_dmabuf) +
                            ", nvidia_peermem " + yes(f.peermem);
  if (v.available) {
    v.text = std::string("available (") + (dmabuf ? "dma-buf" : "nvidia_peermem") + "; " + facts +
             "), not used: Ringo's GPUDirect data path is not built, so GPU edges between hosts stage through "
             "pinned host memory";
  } else {
    v.text = "not available (" + facts + "): GPU edges between hosts stage through pinned host memory";
  }
  return v;
}

GpuDirectFacts ProbeGpuDirect(int device, bool verbs, const std::string& sys_module) {
  GpuDirectFacts f;
  f.verbs = verbs;
  if (auto attrs = base::DeviceGpuDirect(device); attrs.ok()) {
    f.gpu_rdma = attrs->rdma;
    f.gpu_dmabuf = attrs->dmabuf;
  }
  std::string why;
  const VerbsApi* api = verbs ? Verbs(&why) : nullptr;
  f.verbs_dmabuf = api != nullptr && api->reg_dmabuf_mr != nullptr;
  struct stat st;
  f.peermem = ::stat((sys_module + "/nvidia_peermem").c_str(), &st) == 0;
  return f;
}

}  // namespace ringo::transport::net
