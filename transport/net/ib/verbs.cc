#include "transport/net/ib/verbs.h"

#include <dlfcn.h>

#include <mutex>

namespace ringo::transport::net {
namespace {

struct Loaded {
  VerbsApi api{};
  bool ok = false;
  std::string why;
};

template <typename Fn>
bool Resolve(void* lib, const char* name, Fn* out, std::string* why) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (*out == nullptr && why->empty()) *why = std::string("libibverbs.so.1 lacks ") + name;
  return *out != nullptr;
}

Loaded Load() {
  Loaded l;
  void* lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    l.why = std::string("libibverbs.so.1 could not be loaded (") + (err ? err : "unknown") + ")";
    return l;
  }
  VerbsApi& a = l.api;
  bool ok = true;
  ok &= Resolve(lib, "ibv_get_device_list", &a.get_device_list, &l.why);
  ok &= Resolve(lib, "ibv_free_device_list", &a.free_device_list, &l.why);
  ok &= Resolve(lib, "ibv_get_device_name", &a.get_device_name, &l.why);
  ok &= Resolve(lib, "ibv_open_device", &a.open_device, &l.why);
  ok &= Resolve(lib, "ibv_close_device", &a.close_device, &l.why);
  ok &= Resolve(lib, "ibv_query_device", &a.query_device, &l.why);
  ok &= Resolve(lib, "ibv_query_port", &a.query_port, &l.why);
  ok &= Resolve(lib, "ibv_query_gid", &a.query_gid, &l.why);
  ok &= Resolve(lib, "ibv_alloc_pd", &a.alloc_pd, &l.why);
  ok &= Resolve(lib, "ibv_dealloc_pd", &a.dealloc_pd, &l.why);
  ok &= Resolve(lib, "ibv_reg_mr", &a.reg_mr, &l.why);
  ok &= Resolve(lib, "ibv_dereg_mr", &a.dereg_mr, &l.why);
  ok &= Resolve(lib, "ibv_create_comp_channel", &a.create_comp_channel, &l.why);
  ok &= Resolve(lib, "ibv_destroy_comp_channel", &a.destroy_comp_channel, &l.why);
  ok &= Resolve(lib, "ibv_create_cq", &a.create_cq, &l.why);
  ok &= Resolve(lib, "ibv_destroy_cq", &a.destroy_cq, &l.why);
  ok &= Resolve(lib, "ibv_get_cq_event", &a.get_cq_event, &l.why);
  ok &= Resolve(lib, "ibv_ack_cq_events", &a.ack_cq_events, &l.why);
  ok &= Resolve(lib, "ibv_create_qp", &a.create_qp, &l.why);
  ok &= Resolve(lib, "ibv_destroy_qp", &a.destroy_qp, &l.why);
  ok &= Resolve(lib, "ibv_modify_qp", &a.modify_qp, &l.why);
  ok &= Resolve(lib, "ibv_query_qp", &a.query_qp, &l.why);
  ok &= Resolve(lib, "ibv_wc_status_str", &a.wc_status_str, &l.why);
  std::string ignored;
  Resolve(lib, "ibv_reg_dmabuf_mr", &a.reg_dmabuf_mr, &ignored);
  l.ok = ok;
  return l;
}

}  // namespace

const VerbsApi* Verbs(std::string* why) {
  static const Loaded* const loaded = new Loaded(Load());
  if (!loaded->ok) {
    if (why != nullptr) *why = loaded->why;
    return nullptr;
  }
  return &loaded->api;
}

}  // namespace ringo::transport::net
