// Verbs connections: queue pairs, the clear-to-send ring and the data path
// (transport/net/ib/net.h describes the protocol).
#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <deque>
#include <random>

#include "base/cuda.h"
#include "transport/net/ib/connection.h"
#include "transport/net/internal/shared.h"
#include "transport/peer_state.h"

namespace ringo::transport::net::ib {
namespace {

using base::Status;
using base::StatusOr;

constexpr int64_t kControlSendMs = 200;
constexpr uint64_t kCtsWrId = uint64_t{1} << 63;  // a send completion of a clear-to-send write
constexpr int kPollBatch = 16;

uint32_t Imm(uint64_t seq, uint32_t part_bytes) {
  return htonl(static_cast<uint32_t>((seq % kMaxRequests) << kPartBits) | part_bytes);
}

// Part q of a message of `total` bytes over `nqps` queue pairs: every queue
// pair carries one write per message (possibly empty), so each receive
// completes with one completion per queue pair.
void PartOf(uint64_t total, int nqps, int q, uint64_t* offset, uint64_t* bytes) {
  const uint64_t part = (total + static_cast<uint64_t>(nqps) - 1) / static_cast<uint64_t>(nqps);
  const uint64_t aligned = total < 4096 * static_cast<uint64_t>(nqps) ? part : (part + 4095) / 4096 * 4096;
  *offset = std::min<uint64_t>(total, aligned * static_cast<uint64_t>(q));
  *bytes = std::min<uint64_t>(total - *offset, aligned);
}

class IbRegion : public MemoryRegion {
 public:
  IbRegion(const VerbsApi* v, ibv_mr* mr) : v_(v), mr_(mr) {}
  ~IbRegion() override {
    if (mr_ != nullptr) v_->dereg_mr(mr_);
  }
  ibv_mr* mr() const { return mr_; }
  bool Holds(const void* data, size_t bytes) const {
    if (bytes == 0) return true;
    if (mr_ == nullptr) return false;
    const auto* p = static_cast<const char*>(data);
    const auto* lo = static_cast<const char*>(mr_->addr);
    return p >= lo && bytes <= mr_->length && static_cast<size_t>(p - lo) <= mr_->length - bytes;
  }

 private:
  const VerbsApi* v_;
  ibv_mr* mr_;
};

class IbRequest : public Request {
 public:
  uint64_t seq = 0;
  const char* data = nullptr;  // sends
  size_t bytes = 0;            // sends: the message; receives: received so far
  size_t capacity = 0;         // receives
  uint32_t lkey = 0;           // sends
  bool posted = false;         // sends: the writes are posted
  int parts_left = 0;          // completions still due
  bool done = false;
};

// The request of message `seq`, or null (requests may be tested, and so
// erased, in any order).
IbRequest* Find(std::deque<std::unique_ptr<IbRequest>>& requests, uint64_t seq) {
  for (auto& r : requests) {
    if (r->seq == seq) return r.get();
  }
  return nullptr;
}

}  // namespace

// Parts are whole 4 KiB pages but for the last, so each stays at or under
// this.
uint64_t MaxMessage(int nqps) { return static_cast<uint64_t>(kPartMax & ~4095u) * static_cast<uint64_t>(nqps); }

// ---------------------------------------------------------------- queues --

Status PostCtsReceives(Queues* q, int n) {
  for (int i = 0; i < n; ++i) {
    ibv_recv_wr wr{};
    wr.wr_id = kCtsWrId;
    ibv_recv_wr* bad = nullptr;
    const int rc = ibv_post_recv(q->qps[0], &wr, &bad);
    if (rc != 0) return base::RemoteError(std::string("ibv_post_recv of an offer's receive: ") + std::strerror(rc));
  }
  return Status();
}

StatusOr<std::unique_ptr<Queues>> Queues::Create(const VerbsApi* v, const Port* port, int nqps) {
  auto q = std::make_unique<Queues>();
  q->v = v;
  q->port = port;
  const std::string where = "verbs port " + port->name;
  q->channel = v->create_comp_channel(port->context);
  if (q->channel == nullptr) return base::SystemError(where + ": ibv_create_comp_channel: " + std::strerror(errno));
  const int flags = fcntl(q->channel->fd, F_GETFL);
  fcntl(q->channel->fd, F_SETFL, flags | O_NONBLOCK);
  const int per_qp = 2 * kMaxRequests + 4;
  q->cq = v->create_cq(port->context, per_qp * (nqps + 1) + 16, nullptr, q->channel, 0);
  if (q->cq == nullptr) return base::SystemError(where + ": ibv_create_cq: " + std::strerror(errno));
  std::random_device rd;
  for (int i = 0; i < nqps; ++i) {
    ibv_qp_init_attr ia{};
    ia.send_cq = q->cq;
    ia.recv_cq = q->cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = per_qp;
    ia.cap.max_recv_wr = kMaxRequests + 4;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    ibv_qp* qp = v->create_qp(port->pd, &ia);
    if (qp == nullptr) return base::SystemError(where + ": ibv_create_qp: " + std::strerror(errno));
    q->qps.push_back(qp);
    q->psns.push_back(rd() & 0xffffff);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = static_cast<uint8_t>(port->port_num);
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
    const int rc = v->modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (rc != 0) return base::SystemError(where + ": queue pair to INIT: " + std::strerror(rc));
  }
  return q;
}

Queues::~Queues() {
  for (ibv_qp* qp : qps) v->destroy_qp(qp);
  if (cq != nullptr) v->destroy_cq(cq);
  if (channel != nullptr) v->destroy_comp_channel(channel);
}

Endpoint Queues::Local() const {
  Endpoint e{};
  e.lid = port->attr.lid;
  e.mtu = static_cast<uint8_t>(port->attr.active_mtu);
  e.roce = port->roce ? 1 : 0;
  e.nqps = static_cast<uint32_t>(qps.size());
  std::memcpy(e.gid, port->gid.raw, sizeof(e.gid));
  for (size_t i = 0; i < qps.size(); ++i) {
    e.qpn[i] = qps[i]->qp_num;
    e.psn[i] = psns[i];
  }
  return e;
}

Status Queues::ConnectTo(const Endpoint& remote, const IbNetOptions& options) {
  if (remote.nqps != qps.size()) {
    return base::RemoteError("the peer has " + std::to_string(remote.nqps) + " queue pair(s) where " +
                             std::to_string(qps.size()) + " were agreed");
  }
  if ((remote.roce != 0) != port->roce) {
    return base::RemoteError("the peer's port is " + std::string(remote.roce ? "RoCE" : "InfiniBand") +
                             ", this one " + (port->roce ? "RoCE" : "InfiniBand"));
  }
  const auto mtu = static_cast<ibv_mtu>(std::min<int>(remote.mtu, static_cast<int>(port->attr.active_mtu)));
  for (size_t i = 0; i < qps.size(); ++i) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = mtu;
    a.dest_qp_num = remote.qpn[i];
    a.rq_psn = remote.psn[i];
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = static_cast<uint8_t>(port->port_num);
    a.ah_attr.sl = 0;
    if (port->roce) {
      a.ah_attr.is_global = 1;
      std::memcpy(a.ah_attr.grh.dgid.raw, remote.gid, sizeof(remote.gid));
      a.ah_attr.grh.sgid_index = static_cast<uint8_t>(port->gid_index);
      a.ah_attr.grh.hop_limit = 64;
    } else {
      a.ah_attr.dlid = remote.lid;
    }
    int rc = v->modify_qp(qps[i], &a,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (rc != 0) return base::SystemError("queue pair " + std::to_string(i) + " to RTR: " + std::strerror(rc));
    ibv_qp_attr s{};
    s.qp_state = IBV_QPS_RTS;
    s.timeout = static_cast<uint8_t>(options.timeout);
    s.retry_cnt = static_cast<uint8_t>(options.retry_cnt);
    s.rnr_retry = 7;
    s.sq_psn = psns[i];
    s.max_rd_atomic = 1;
    rc = v->modify_qp(qps[i], &s,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                          IBV_QP_MAX_QP_RD_ATOMIC);
    if (rc != 0) return base::SystemError("queue pair " + std::to_string(i) + " to RTS: " + std::strerror(rc));
  }
  return Status();
}

// ------------------------------------------------------------ connections --

namespace {

// What both directions share: the queues, the control connection (fault
// notices, close), completions and their errors.
class IbConnection {
 public:
  explicit IbConnection(Handshake h)
      : q_(std::move(h.queues)), control_(std::move(h.control)), peer_(std::move(h.peer)), self_rank_(h.self_rank) {
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    const int flags = fcntl(control_.fd(), F_GETFL);
    fcntl(control_.fd(), F_SETFL, flags | O_NONBLOCK);
  }
  virtual ~IbConnection() {
    if (wake_fd_ >= 0) ::close(wake_fd_);
  }

  // A sender's memory is only read by its own NIC; a receiver's is written
  // by the peer's.
  StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(void* data, size_t bytes, MemoryKind kind) {
    if (bytes == 0) return std::unique_ptr<MemoryRegion>(new IbRegion(q_->v, nullptr));
    const int access = sending_ ? 0 : IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    if (kind == MemoryKind::kCuda) return RegisterDevice(data, bytes, access);
    ibv_mr* mr = q_->v->reg_mr(q_->port->pd, data, bytes, access);
    if (mr == nullptr) {
      return base::SystemError(Where() + ": ibv_reg_mr of " + std::to_string(bytes) + " bytes: " + std::strerror(errno));
    }
    return std::unique_ptr<MemoryRegion>(new IbRegion(q_->v, mr));
  }

  // GPU memory (GPUDirect RDMA): through a dma-buf of its pages where the
  // verbs library and the CUDA driver offer one, else ibv_reg_mr of the
  // device address, which the nvidia_peermem module resolves.
  StatusOr<std::unique_ptr<MemoryRegion>> RegisterDevice(void* data, size_t bytes, int access) {
    if (!base::IsDevicePointer(data)) {
      return base::InvalidArgument(Where() + ": a GPUDirect RDMA registration of " + std::to_string(bytes) +
                                   " bytes at an address that is not GPU memory");
    }
    std::string dmabuf_why = "libibverbs has no ibv_reg_dmabuf_mr";
    if (q_->v->reg_dmabuf_mr != nullptr) {
      auto buf = base::ExportDmaBuf(data, bytes);
      if (buf.ok()) {
        ibv_mr* mr = q_->v->reg_dmabuf_mr(q_->port->pd, buf->offset, bytes, reinterpret_cast<uint64_t>(data),
                                          buf->fd, access);
        const int err = errno;
        ::close(buf->fd);  // the registration holds the pages
        if (mr != nullptr) return std::unique_ptr<MemoryRegion>(new IbRegion(q_->v, mr));
        dmabuf_why = std::string("ibv_reg_dmabuf_mr: ") + std::strerror(err);
      } else {
        dmabuf_why = buf.status().message();
      }
    }
    ibv_mr* mr = q_->v->reg_mr(q_->port->pd, data, bytes, access);
    if (mr == nullptr) {
      return base::SystemError(Where() + ": ibv_reg_mr of " + std::to_string(bytes) +
                               " bytes of GPU memory (GPUDirect RDMA through nvidia_peermem): " + std::strerror(errno) +
                               "; no dma-buf either: " + dmabuf_why);
    }
    return std::unique_ptr<MemoryRegion>(new IbRegion(q_->v, mr));
  }

  void Fds(std::vector<int>* fds, std::vector<short>* events) const {
    // Arm the completion event, then catch what came before arming: a
    // completion already queued makes the wake descriptor readable.
    ibv_req_notify_cq(q_->cq, 0);
    const int n = stashed_ < kPollBatch ? ibv_poll_cq(q_->cq, kPollBatch - stashed_, stash_ + stashed_) : 0;
    if (n > 0) {
      stashed_ += n;
      const uint64_t one = 1;
      (void)!::write(wake_fd_, &one, sizeof(one));
    }
    fds->push_back(control_.fd());
    events->push_back(POLLIN);
    fds->push_back(q_->channel->fd);
    events->push_back(POLLIN);
    if (wake_fd_ >= 0) {
      fds->push_back(wake_fd_);
      events->push_back(POLLIN);
    }
  }

  void SendAbort(const Status& why, int self_rank, uint64_t seq) {
    if (stopped_) return;
    stopped_ = true;
    const shared::Notice w = handshake::AbortBody(why, self_rank, seq);
    SendControl(Control::kAbort, &w, sizeof(w));
    if (error_.ok()) error_ = base::InvalidUsage("the connection was aborted by this rank");
  }

  // The close in good order names how many messages were sent, so the
  // receiver delivers each of them before it fails a receive beyond.
  void SendClose(uint64_t messages) {
    if (stopped_) return;
    stopped_ = true;
    SendControl(Control::kClose, &messages, sizeof(messages));
  }

  Status ForceError() {
    for (ibv_qp* qp : q_->qps) {
      ibv_qp_attr a{};
      a.qp_state = IBV_QPS_ERR;
      const int rc = q_->v->modify_qp(qp, &a, IBV_QP_STATE);
      if (rc != 0) return base::SystemError(std::string("queue pair to ERR: ") + std::strerror(rc));
    }
    return Status();
  }

  const PeerName& peer_name() const { return peer_; }

 protected:
  std::string Where() const {
    return "rank " + std::to_string(self_rank_) + ", verbs connection " + (sending_ ? "to" : "from") + " rank " +
           std::to_string(peer_.rank) + " (" + peer_.where + ", " + q_->port->name + ")";
  }
  Status Fail(Status st) {
    if (error_.ok()) error_ = st.origin() >= 0 ? st : st.WithOrigin(peer_.rank, st.message());
    return error_;
  }
  Status Broken(const std::string& what) { return Fail(base::RemoteError(Where() + ": " + what)); }
  Status Closed() {
    const std::string msg = Where() + ": the peer closed its communicator";
    return Fail(base::RemoteError(msg).WithOrigin(peer_.rank, msg, kAfterEveryCollective));
  }

  // Reads the control connection: the peer's abort (an error with its
  // notice), its close (closed_), its departure, or garbage.
  Status ReadControl() {
    RETURN_IF_ERROR(error_);
    while (!closed_) {
      const size_t want = header_got_ < sizeof(ControlHeader) ? sizeof(ControlHeader) - header_got_
                                                              : sizeof(ControlHeader) + header_.length - header_got_;
      char* into = header_got_ < sizeof(ControlHeader) ? reinterpret_cast<char*>(&header_) + header_got_
                                                       : body_ + (header_got_ - sizeof(ControlHeader));
      const ssize_t n = ::recv(control_.fd(), into, want, MSG_DONTWAIT);
      if (n == 0) return Broken("the peer closed its control connection (its process ended or it went away)");
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Status();
        return Broken(std::string("control connection: ") + std::strerror(errno));
      }
      header_got_ += static_cast<size_t>(n);
      if (header_got_ == sizeof(ControlHeader)) {
        // After the handshake only an abort or a close (with the count of
        // messages sent) may come.
        const bool known = handshake::KnownControl(header_) &&
                           (header_.type == static_cast<uint16_t>(Control::kAbort) ||
                            (header_.type == static_cast<uint16_t>(Control::kClose) &&
                             header_.length == sizeof(uint64_t)));
        if (!known) return Broken("garbage on the control connection");
      }
      if (header_got_ < sizeof(ControlHeader) || header_got_ < sizeof(ControlHeader) + header_.length) continue;
      header_got_ = 0;
      if (header_.type == static_cast<uint16_t>(Control::kClose)) {
        closed_ = true;
        std::memcpy(&closed_after_, body_, sizeof(closed_after_));
        closed_at_ = Clock::now();
        break;
      }
      shared::Notice w;
      std::memcpy(&w, body_, sizeof(w));
      return Fail(handshake::AbortStatus(w, Where(), peer_.rank));
    }
    return Status();
  }

  // Takes the completions queued (and acknowledges the channel's events);
  // `on` handles each successful one. An error completion fails the
  // connection naming the queue pair and the message.
  template <typename Handler>
  Status PollCompletions(Handler&& on) {
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    unsigned events = 0;
    while (q_->v->get_cq_event(q_->channel, &ev_cq, &ev_ctx) == 0) ++events;
    if (events > 0) q_->v->ack_cq_events(q_->cq, events);
    uint64_t drained;
    while (wake_fd_ >= 0 && ::read(wake_fd_, &drained, sizeof(drained)) > 0) {
    }
    for (;;) {
      int n = stashed_;
      ibv_wc* wcs = stash_;
      ibv_wc fresh[kPollBatch];
      if (n == 0) {
        n = ibv_poll_cq(q_->cq, kPollBatch, fresh);
        wcs = fresh;
        if (n < 0) return Broken("ibv_poll_cq failed");
        if (n == 0) return Status();
      }
      stashed_ = 0;
      for (int i = 0; i < n; ++i) {
        const ibv_wc& wc = wcs[i];
        if (wc.status != IBV_WC_SUCCESS) {
          const bool cts = (wc.wr_id & kCtsWrId) != 0;
          const uint64_t id = wc.wr_id & ~kCtsWrId;
          const std::string what = Where() + ": queue pair " + std::to_string(QpIndex(wc.qp_num)) + ", message " +
                                   std::to_string(cts ? id : id / kMaxQps) + (cts ? " (clear-to-send)" : "") + ": " +
                                   q_->v->wc_status_str(wc.status) + " (status " + std::to_string(wc.status) +
                                   ", vendor " + std::to_string(wc.vendor_err) + ")";
          // A fault of this side (its queue pair in error, its own memory)
          // starts here; one the peer's end reported (remote access,
          // retries exhausted) starts there.
          const bool remote = wc.status == IBV_WC_REM_ACCESS_ERR || wc.status == IBV_WC_REM_INV_REQ_ERR ||
                              wc.status == IBV_WC_REM_OP_ERR || wc.status == IBV_WC_RETRY_EXC_ERR ||
                              wc.status == IBV_WC_RNR_RETRY_EXC_ERR || wc.status == IBV_WC_REM_ABORT_ERR ||
                              wc.status == IBV_WC_REM_INV_RD_REQ_ERR;
          return Fail(base::RemoteError(what).WithOrigin(remote ? peer_.rank : self_rank_, what));
        }
        RETURN_IF_ERROR(on(wc));
      }
    }
  }

  // A queue pair that went into the error state with nothing posted on it
  // reports no completion: while a request waits for the peer, look at the
  // states now and then.
  Status CheckQueuePairs() {
    const auto now = Clock::now();
    if (now - last_state_check_ < std::chrono::milliseconds(100)) return Status();
    last_state_check_ = now;
    for (size_t i = 0; i < q_->qps.size(); ++i) {
      ibv_qp_attr a{};
      ibv_qp_init_attr ia{};
      if (q_->v->query_qp(q_->qps[i], &a, IBV_QP_STATE, &ia) == 0 && a.qp_state == IBV_QPS_ERR) {
        const std::string what = Where() + ": queue pair " + std::to_string(i) +
                                 " is in the error state (a fatal fault of the link or the device)";
        return Fail(base::RemoteError(what).WithOrigin(self_rank_, what));
      }
    }
    return Status();
  }

  int QpIndex(uint32_t qp_num) const {
    for (size_t i = 0; i < q_->qps.size(); ++i) {
      if (q_->qps[i]->qp_num == qp_num) return static_cast<int>(i);
    }
    return -1;
  }

  Status PostWrite(int q, uint64_t wr_id, const void* local, uint32_t bytes, uint32_t lkey, uint64_t remote,
                   uint32_t rkey, bool with_imm, uint32_t imm) {
    ibv_sge sge{};
    sge.addr = reinterpret_cast<uintptr_t>(local);
    sge.length = bytes;
    sge.lkey = lkey;
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = bytes > 0 ? &sge : nullptr;
    wr.num_sge = bytes > 0 ? 1 : 0;
    wr.opcode = with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = imm;
    wr.wr.rdma.remote_addr = remote;
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    const int rc = ibv_post_send(q_->qps[q], &wr, &bad);
    if (rc != 0) return Broken("ibv_post_send on queue pair " + std::to_string(q) + ": " + std::strerror(rc));
    return Status();
  }

  std::unique_ptr<Queues> q_;
  Socket control_;
  PeerName peer_;
  int self_rank_;
  bool sending_ = false;
  Status error_;
  bool stopped_ = false;  // this side sent its abort or close
  bool closed_ = false;   // the peer's close was read
  uint64_t closed_after_ = 0;  // the messages the peer sent before its close
  Clock::time_point closed_at_{};

 private:
  void SendControl(Control type, const void* body, uint16_t length) {
    ControlHeader h{kControlMagic, static_cast<uint16_t>(type), length};
    const Deadline d = DeadlineAfterMs(kControlSendMs);
    if (control_.SendAll(&h, sizeof(h), d).ok() && length > 0) (void)control_.SendAll(body, length, d);
    ::shutdown(control_.fd(), SHUT_WR);
  }

  Clock::time_point last_state_check_{};
  ControlHeader header_{};
  size_t header_got_ = 0;
  char body_[sizeof(shared::Notice)];
  int wake_fd_ = -1;
  mutable ibv_wc stash_[kPollBatch];
  mutable int stashed_ = 0;
};

class IbSend : public SendConnection, public IbConnection {
 public:
  IbSend(Handshake h, void* cts_ring, ibv_mr* cts_mr)
      : IbConnection(std::move(h)), cts_(static_cast<volatile Cts*>(cts_ring)), cts_mr_(cts_mr) {
    sending_ = true;
  }
  ~IbSend() override {
    const VerbsApi* v = q_->v;
    q_.reset();  // the queue pairs go before the memory they may write
    if (cts_mr_ != nullptr) v->dereg_mr(cts_mr_);
    std::free(const_cast<Cts*>(cts_));
  }

  StatusOr<std::unique_ptr<MemoryRegion>> Register(void* data, size_t bytes, MemoryKind kind) override {
    return RegisterMemory(data, bytes, kind);
  }

  StatusOr<Request*> Isend(const void* data, size_t bytes, MemoryRegion* region) override {
    RETURN_IF_ERROR(error_);
    if (inflight_.size() >= static_cast<size_t>(kMaxRequests)) return static_cast<Request*>(nullptr);
    const auto* r = dynamic_cast<IbRegion*>(region);
    if (bytes > 0 && (r == nullptr || !r->Holds(data, bytes))) {
      return base::InvalidArgument(Where() + ": a send of " + std::to_string(bytes) +
                                   " bytes outside registered memory (the verbs transport needs Register first)");
    }
    const uint64_t max = MaxMessage(static_cast<int>(q_->qps.size()));
    if (bytes > max) {
      return base::InvalidArgument(Where() + ": a message of " + std::to_string(bytes) + " bytes; at most " +
                                   std::to_string(max) + " over " + std::to_string(q_->qps.size()) + " queue pair(s)");
    }
    auto req = std::make_unique<IbRequest>();
    req->seq = next_seq_++;
    req->data = static_cast<const char*>(data);
    req->bytes = bytes;
    req->lkey = bytes > 0 ? r->mr()->lkey : 0;
    req->parts_left = static_cast<int>(q_->qps.size());
    inflight_.push_back(std::move(req));
    Request* out = inflight_.back().get();
    RETURN_IF_ERROR(Progress());
    return out;
  }

  Status Test(Request* request, bool* done, size_t* bytes) override {
    *done = false;
    RETURN_IF_ERROR(Progress());
    // Any order: lookups go by sequence number.
    return shared::TakeIfDone(inflight_, request, Status(), [](const auto& r) { return r.done; },
                            [](const auto& r) { return r.bytes; }, done, bytes);
  }

  Status Poll() override { return Progress(); }
  void PollFds(std::vector<int>* fds, std::vector<short>* events) const override { Fds(fds, events); }
  void Abort(const Status& why, int self_rank, uint64_t seq) override { SendAbort(why, self_rank, seq); }
  // Waits (a bounded time) for every message to complete, then closes in
  // good order; a message that could not be delivered makes it an abort.
  void Close() override {
    const Deadline until = DeadlineAfterMs(kControlSendMs * 10);
    auto all_done = [this] {
      for (const auto& r : inflight_) {
        if (!r->done) return false;
      }
      return true;
    };
    while (error_.ok() && Clock::now() < until && !all_done()) {
      if (!Progress().ok()) break;
      std::vector<int> fds;
      std::vector<short> events;
      Fds(&fds, &events);
      std::vector<pollfd> p;
      for (size_t i = 0; i < fds.size(); ++i) p.push_back({fds[i], events[i], 0});
      ::poll(p.data(), p.size(), 10);
    }
    if (error_.ok() && all_done()) {
      uint64_t sent = next_seq_;
      SendClose(sent);
      return;
    }
    const std::string what = Where() + ": closed with messages not delivered";
    SendAbort(error_.ok() ? base::RemoteError(what).WithOrigin(self_rank_, what) : error_, self_rank_, 0);
  }
  const PeerName& peer() const override { return peer_name(); }

 private:
  // Posts the writes of every message whose clear-to-send entry has come,
  // in order, and completes the writes done.
  Status Progress() {
    RETURN_IF_ERROR(ReadControl());
    if (closed_) return Closed();  // a receiver that closed takes nothing more
    RETURN_IF_ERROR(PollCompletions([this](const ibv_wc& wc) -> Status {
      if ((wc.wr_id & kCtsWrId) != 0) {  // an offer came: its receive goes back for the next one
        if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM) return Broken("an unexpected completion");
        return PostCtsReceives(q_.get(), 1).WithContext(Where());
      }
      IbRequest* r = Find(inflight_, wc.wr_id / kMaxQps);
      if (r == nullptr || r->parts_left <= 0) return Broken("a completion of an unknown message");
      if (--r->parts_left == 0) r->done = true;
      return Status();
    }));
    for (auto& holder : inflight_) {
      IbRequest& r = *holder;
      if (r.posted) continue;
      const volatile Cts& entry = cts_[r.seq % kMaxRequests];
      if (entry.seq_plus_1 != r.seq + 1) {  // not offered yet: later messages wait too
        RETURN_IF_ERROR(CheckQueuePairs());
        break;
      }
      std::atomic_thread_fence(std::memory_order_acquire);
      const uint64_t addr = entry.addr;
      const uint32_t rkey = entry.rkey;
      const uint32_t capacity = entry.capacity;
      r.posted = true;
      if (r.bytes > capacity) {
        // Tell the receiver, then fail here too.
        r.parts_left = 1;
        RETURN_IF_ERROR(PostWrite(0, r.seq * kMaxQps, nullptr, 0, 0, addr, rkey, true, Imm(r.seq, kTooBig)));
        return Broken("a message of " + std::to_string(r.bytes) + " bytes for a receive of " +
                      std::to_string(capacity) + " bytes");
      }
      for (size_t q = 0; q < q_->qps.size(); ++q) {
        uint64_t off = 0, len = 0;
        PartOf(r.bytes, static_cast<int>(q_->qps.size()), static_cast<int>(q), &off, &len);
        RETURN_IF_ERROR(PostWrite(static_cast<int>(q), r.seq * kMaxQps + q, r.data + off, static_cast<uint32_t>(len),
                                  r.lkey, addr + off, rkey, true, Imm(r.seq, static_cast<uint32_t>(len))));
      }
    }
    return Status();
  }

  volatile Cts* cts_;  // this side's ring, written by the receiver's NIC
  ibv_mr* cts_mr_;
  std::deque<std::unique_ptr<IbRequest>> inflight_;
  uint64_t next_seq_ = 0;
};

class IbRecv : public RecvConnection, public IbConnection {
 public:
  IbRecv(Handshake h, uint64_t cts_addr, uint32_t cts_rkey)
      : IbConnection(std::move(h)), remote_cts_(cts_addr), remote_rkey_(cts_rkey) {}

  Status Init() {
    void* p = nullptr;
    if (posix_memalign(&p, 64, sizeof(Cts) * kMaxRequests) != 0) return base::SystemError("no memory");
    std::memset(p, 0, sizeof(Cts) * kMaxRequests);
    source_.reset(static_cast<Cts*>(p));
    source_mr_ = q_->v->reg_mr(q_->port->pd, p, sizeof(Cts) * kMaxRequests, IBV_ACCESS_LOCAL_WRITE);
    if (source_mr_ == nullptr) return base::SystemError(Where() + ": ibv_reg_mr: " + std::strerror(errno));
    // What a receive of no bytes offers: an empty write leaves it untouched.
    sink_mr_ = q_->v->reg_mr(q_->port->pd, sink_, sizeof(sink_), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (sink_mr_ == nullptr) return base::SystemError(Where() + ": ibv_reg_mr: " + std::strerror(errno));
    return Status();
  }
  ~IbRecv() override {
    const VerbsApi* v = q_->v;
    q_.reset();
    if (source_mr_ != nullptr) v->dereg_mr(source_mr_);
    if (sink_mr_ != nullptr) v->dereg_mr(sink_mr_);
  }

  StatusOr<std::unique_ptr<MemoryRegion>> Register(void* data, size_t bytes, MemoryKind kind) override {
    return RegisterMemory(data, bytes, kind);
  }

  StatusOr<Request*> Irecv(void* data, size_t bytes, MemoryRegion* region) override {
    RETURN_IF_ERROR(error_);
    if (posted_.size() >= static_cast<size_t>(kMaxRequests)) return static_cast<Request*>(nullptr);
    const auto* r = dynamic_cast<IbRegion*>(region);
    if (bytes > 0 && (r == nullptr || !r->Holds(data, bytes))) {
      return base::InvalidArgument(Where() + ": a receive of " + std::to_string(bytes) +
                                   " bytes outside registered memory (the verbs transport needs Register first)");
    }
    auto req = std::make_unique<IbRequest>();
    req->seq = next_seq_++;
    req->capacity = std::min<size_t>(bytes, UINT32_MAX);
    req->parts_left = static_cast<int>(q_->qps.size());
    // The receives for the immediates first, then the offer.
    for (size_t q = 0; q < q_->qps.size(); ++q) {
      ibv_recv_wr wr{};
      wr.wr_id = req->seq * kMaxQps + q;
      ibv_recv_wr* bad = nullptr;
      const int rc = ibv_post_recv(q_->qps[q], &wr, &bad);
      if (rc != 0) return Broken("ibv_post_recv on queue pair " + std::to_string(q) + ": " + std::strerror(rc));
    }
    Cts& entry = source_.get()[req->seq % kMaxRequests];
    entry.addr = bytes > 0 ? reinterpret_cast<uintptr_t>(data) : reinterpret_cast<uintptr_t>(sink_);
    entry.rkey = bytes > 0 ? r->mr()->rkey : sink_mr_->rkey;
    entry.capacity = static_cast<uint32_t>(req->capacity);
    entry.seq_plus_1 = req->seq + 1;
    // With an immediate: the sender's completion wakes a sleeping proxy.
    RETURN_IF_ERROR(PostWrite(0, kCtsWrId | req->seq, &entry, sizeof(Cts), source_mr_->lkey,
                              remote_cts_ + (req->seq % kMaxRequests) * sizeof(Cts), remote_rkey_, true,
                              htonl(static_cast<uint32_t>(req->seq))));
    posted_.push_back(std::move(req));
    return static_cast<Request*>(posted_.back().get());
  }

  Status Test(Request* request, bool* done, size_t* bytes) override {
    // A message already received is delivered even after an error.
    const Status progress = Progress();
    return shared::TakeIfDone(posted_, request, progress, [](const auto& r) { return r.done; },
                            [](const auto& r) { return r.bytes; }, done, bytes);
  }

  Status Poll() override { return Progress(); }
  void PollFds(std::vector<int>* fds, std::vector<short>* events) const override { Fds(fds, events); }
  void Abort(const Status& why, int self_rank, uint64_t seq) override { SendAbort(why, self_rank, seq); }
  void Close() override { SendClose(next_seq_); }
  const PeerName& peer() const override { return peer_name(); }

 private:
  Status Progress() {
    RETURN_IF_ERROR(error_);
    const Status control = ReadControl();
    RETURN_IF_ERROR(PollCompletions([this](const ibv_wc& wc) -> Status { return OnCompletion(wc); }));
    RETURN_IF_ERROR(control);
    if (!posted_.empty() && !posted_.back()->done) RETURN_IF_ERROR(CheckQueuePairs());
    // The sender closed after its last write completed: a receive of a
    // message it sent completes (its completion may trail the notice
    // briefly); one beyond waits for nothing.
    if (closed_) {
      for (const auto& r : posted_) {
        if (r->done) continue;
        if (r->seq >= closed_after_) return Closed();
        if (Clock::now() - closed_at_ > std::chrono::seconds(1)) {
          return Broken("the peer closed after " + std::to_string(closed_after_) + " messages, but message " +
                        std::to_string(r->seq) + " never completed here");
        }
      }
    }
    return Status();
  }

  Status OnCompletion(const ibv_wc& wc) {
    if ((wc.wr_id & kCtsWrId) != 0) return Status();  // an offer went out
    if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM) return Broken("a completion that is not a write with immediate");
    const uint64_t seq = wc.wr_id / kMaxQps;
    IbRequest* found = Find(posted_, seq);
    if (found == nullptr) return Broken("a completion of an unknown message");
    IbRequest& r = *found;
    const uint32_t imm = ntohl(wc.imm_data);
    const uint32_t slot = imm >> kPartBits, part = imm & kTooBig;
    if (part == kTooBig) {
      return Broken("rank " + std::to_string(peer_.rank) + " sent message " + std::to_string(seq) +
                    " larger than its receive of " + std::to_string(r.capacity) + " bytes");
    }
    if (slot != seq % kMaxRequests || wc.byte_len != part || r.bytes + part > r.capacity || r.parts_left <= 0) {
      return Broken("message " + std::to_string(seq) + ": a part of " + std::to_string(part) + " bytes for slot " +
                    std::to_string(slot) + " that does not fit the receive (" + std::to_string(r.bytes) + " of " +
                    std::to_string(r.capacity) + " bytes so far)");
    }
    r.bytes += part;
    if (--r.parts_left == 0) r.done = true;
    return Status();
  }

  struct FreeDeleter {
    void operator()(Cts* p) const { std::free(p); }
  };
  uint64_t remote_cts_;
  uint32_t remote_rkey_;
  std::unique_ptr<Cts, FreeDeleter> source_;  // the offers this side writes from
  ibv_mr* source_mr_ = nullptr;
  alignas(64) char sink_[64] = {};
  ibv_mr* sink_mr_ = nullptr;
  std::deque<std::unique_ptr<IbRequest>> posted_;
  uint64_t next_seq_ = 0;
};

}  // namespace

std::unique_ptr<SendConnection> MakeSend(Handshake h, void* cts_ring, ibv_mr* cts_mr) {
  return std::make_unique<IbSend>(std::move(h), cts_ring, cts_mr);
}

StatusOr<std::unique_ptr<RecvConnection>> MakeRecv(Handshake h) {
  const uint64_t addr = h.cts_addr;
  const uint32_t rkey = h.cts_rkey;
  auto r = std::make_unique<IbRecv>(std::move(h), addr, rkey);
  RETURN_IF_ERROR(r->Init());
  return std::unique_ptr<RecvConnection>(std::move(r));
}

}  // namespace ringo::transport::net::ib

namespace ringo::transport::net {

base::Status ForceQpErrorForTesting(Connection& connection) {
  auto* ib = dynamic_cast<ib::IbConnection*>(&connection);
  if (ib == nullptr) return base::InvalidArgument("not a verbs connection");
  return ib->ForceError();
}

}  // namespace ringo::transport::net
