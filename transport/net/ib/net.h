// The net interface over InfiniBand verbs (RoCE and InfiniBand), with
// libibverbs loaded at run time (verbs.h).
//
// A connection is a reliable-connected queue pair (or several,
// RINGO_IB_QPS_PER_CONNECTION, a message split across them) between the
// sender and the receiver, set up over a TCP control connection that stays
// open for fault notices and the close in good order. Data moves by RDMA
// write with immediate straight into the receive buffer: the receiver posts
// a receive, then writes a clear-to-send entry (the buffer's address, key
// and size) into the sender's ring of entries; the sender waits for the
// entry of its message, writes the data, and the immediate (slot and part
// size) completes the receive. No byte is ever written into a buffer the
// receiver has not offered, so a slot still being read is never touched.
// Every work completion with an error becomes a Status naming the peer, the
// queue pair and the message.
//
// Memory must be registered (Register) before it is sent or received into:
// host memory through ibv_reg_mr; GPU memory (GPUDirect RDMA) through
// ibv_reg_dmabuf_mr over a dma-buf of its pages, else ibv_reg_mr of the
// device address (nvidia_peermem). GPU rings between hosts register their
// pinned host FIFOs like any host memory, or their device slots where both
// ends offer GPUDirect (net/gpudirect.h).
#ifndef RINGO_TRANSPORT_NET_IB_NET_H_
#define RINGO_TRANSPORT_NET_IB_NET_H_

#include <memory>
#include <string>

#include "base/config.h"
#include "base/status.h"
#include "transport/net/net.h"

namespace ringo::transport::net {

struct IbNetOptions {
  std::string hca_spec;    // RINGO_IB_HCA: name[:port] prefixes, ^ excludes, = exact
  int gid_index = -1;      // RINGO_IB_GID_INDEX; -1: a RoCE v2 IPv4-mapped GID
  int timeout = 18;        // RINGO_IB_TIMEOUT
  int retry_cnt = 7;       // RINGO_IB_RETRY_CNT
  int qps = 1;             // RINGO_IB_QPS_PER_CONNECTION
  int64_t timeout_ms = 300000;
  std::string ifname_spec;  // the control connections' interface (RINGO_SOCKET_IFNAME)
  int numa = -1;            // this rank's NUMA node: the ports nearest it come first
};

IbNetOptions IbNetOptionsFromConfig(const base::Config& config, int numa = -1);

// A verbs Net over every active port that RINGO_IB_HCA allows; an error
// saying why there is none (no libibverbs, no device, no active port).
base::StatusOr<std::unique_ptr<Net>> MakeIbNet(const IbNetOptions& options);

// Whether `hca` ("mlx5_0") port `port` is one RINGO_IB_HCA's `spec` selects.
bool HcaSelected(const std::string& spec, const std::string& hca, int port);

// Tests only: moves every queue pair of a verbs connection into the error
// state, as a fatal fault of the link or the device would.
base::Status ForceQpErrorForTesting(Connection& connection);

}  // namespace ringo::transport::net

#endif  // RINGO_TRANSPORT_NET_IB_NET_H_
