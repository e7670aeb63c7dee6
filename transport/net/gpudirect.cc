#include "transport/net/gpudirect.h"

#include <sys/stat.h>

#include "base/cuda.h"
#include "transport/net/ib/verbs.h"

namespace ringo::transport::net {

GpuDirectVerdict JudgeGpuDirect(const GpuDirectFacts& f, bool wanted) {
  GpuDirectVerdict v;
  const bool dmabuf = f.gpu_dmabuf && f.verbs_dmabuf;
  v.available = f.verbs && f.gpu_rdma && f.gpu_visible && (dmabuf || f.peermem);
  v.used = v.available && wanted;
  auto yes = [](bool b) { return b ? "yes" : "no"; };
  const std::string facts = std::string("verbs ") + yes(f.verbs) + ", GPU RDMA " + yes(f.gpu_rdma) +
                            ", GPU write ordering or flush " + yes(f.gpu_visible) + ", GPU dma-buf " +
                            yes(f.gpu_dmabuf) + ", ibv_reg_dmabuf_mr " + yes(f.verbs_dmabuf) + ", nvidia_peermem " +
                            yes(f.peermem);
  const std::string route = dmabuf ? "dma-buf" : "nvidia_peermem";
  if (v.used) {
    v.text = "available (" + route + "; " + facts +
             ") and offered (RINGO_NET_GPUDIRECT=1): a GPU edge over verbs whose other end offers it too keeps its "
             "slots in device memory, the others stage through pinned host memory";
  } else if (v.available) {
    v.text = "available (" + route + "; " + facts +
             "), not used (RINGO_NET_GPUDIRECT=0): GPU edges between hosts stage through pinned host memory";
  } else {
    v.text = "not available (" + facts + ")" + (wanted ? " though RINGO_NET_GPUDIRECT=1 asks for it" : "") +
             ": GPU edges between hosts stage through pinned host memory";
  }
  return v;
}

GpuDirectFacts ProbeGpuDirect(int device, bool verbs, const std::string& sys_module) {
  GpuDirectFacts f;
  f.verbs = verbs;
  if (auto attrs = base::DeviceGpuDirect(device); attrs.ok()) {
    f.gpu_rdma = attrs->rdma;
    f.gpu_dmabuf = attrs->dmabuf;
    f.gpu_visible = attrs->writes_ordered || attrs->flush;
  }
  std::string why;
  const VerbsApi* api = verbs ? Verbs(&why) : nullptr;
  f.verbs_dmabuf = api != nullptr && api->reg_dmabuf_mr != nullptr;
  struct stat st;
  f.peermem = ::stat((sys_module + "/nvidia_peermem").c_str(), &st) == 0;
  return f;
}

bool EdgeSlotsApart(bool gpu, NetKind kind, bool self_offers, bool peer_offers, bool host_stand_in) {
  if (!self_offers || !peer_offers) return false;
  return gpu ? kind == NetKind::kIb : host_stand_in;
}

}  // namespace ringo::transport::net
