// libibverbs, loaded at run time: the entry points the verbs transport
// calls, resolved with dlopen/dlsym from libibverbs.so.1, so libringo.so
// needs no RDMA library to start and runs (with sockets) where there is
// none. The data path (post_send, post_recv, poll_cq, req_notify_cq) goes
// through the context's operations table, as verbs.h's inline functions
// do, and needs no symbol.
//
// Thread safety: Verbs() is thread-safe and computed once per process.
#ifndef RINGO_TRANSPORT_NET_IB_VERBS_H_
#define RINGO_TRANSPORT_NET_IB_VERBS_H_

#include <infiniband/verbs.h>

#include <string>

namespace ringo::transport::net {

struct VerbsApi {
  ibv_device** (*get_device_list)(int* num_devices);
  void (*free_device_list)(ibv_device** list);
  const char* (*get_device_name)(ibv_device* device);
  ibv_context* (*open_device)(ibv_device* device);
  int (*close_device)(ibv_context* context);
  int (*query_device)(ibv_context* context, ibv_device_attr* attr);
  int (*query_port)(ibv_context* context, uint8_t port, ibv_port_attr* attr);
  int (*query_gid)(ibv_context* context, uint8_t port, int index, ibv_gid* gid);
  ibv_pd* (*alloc_pd)(ibv_context* context);
  int (*dealloc_pd)(ibv_pd* pd);
  ibv_mr* (*reg_mr)(ibv_pd* pd, void* addr, size_t length, int access);
  int (*dereg_mr)(ibv_mr* mr);
  ibv_comp_channel* (*create_comp_channel)(ibv_context* context);
  int (*destroy_comp_channel)(ibv_comp_channel* channel);
  ibv_cq* (*create_cq)(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel, int vector);
  int (*destroy_cq)(ibv_cq* cq);
  int (*get_cq_event)(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context);
  void (*ack_cq_events)(ibv_cq* cq, unsigned int nevents);
  ibv_qp* (*create_qp)(ibv_pd* pd, ibv_qp_init_attr* attr);
  int (*destroy_qp)(ibv_qp* qp);
  int (*modify_qp)(ibv_qp* qp, ibv_qp_attr* attr, int mask);
  int (*query_qp)(ibv_qp* qp, ibv_qp_attr* attr, int mask, ibv_qp_init_attr* init_attr);
  const char* (*wc_status_str)(ibv_wc_status status);
  // Optional (rdma-core 34 and later): registration of dma-buf memory, the
  // route for GPU memory. Null where the library lacks it.
  ibv_mr* (*reg_dmabuf_mr)(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access);
};

// The loaded library, or null with *why set (no libibverbs.so.1, or a
// symbol missing). The library stays loaded for the life of the process.
const VerbsApi* Verbs(std::string* why);

}  // namespace ringo::transport::net

#endif  // RINGO_TRANSPORT_NET_IB_VERBS_H_
