// The socket transport's connections: TCP streams, the frames on them, and
// the send and receive paths (net.h describes the wire protocol).
#include "transport/net/socket/connection.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>

#include "transport/net/internal/handshake.h"
#include "transport/net/internal/shared.h"
#include "transport/net/socket/net.h"

namespace ringo::transport::net::tcp {

void TuneStream(int fd, int64_t timeout_ms) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  // Data unacknowledged this long fails the stream (a link that went down).
  const unsigned user_timeout = static_cast<unsigned>(std::min<int64_t>(timeout_ms, 0x7fffffff));
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout));
}

namespace {

using base::Status;
using base::StatusOr;

using handshake::Control;

constexpr uint32_t kFrameMagic = 0x44474e52;  // "RNGD"
constexpr int64_t kAbortSendMs = 200;

// Data frames, and the control messages of handshake.h inside frames of
// their own type (an abort's body: the notice; a close: none).
enum FrameType : uint16_t {
  kData = 1,
  kAbort = static_cast<uint16_t>(Control::kAbort),
  kClose = static_cast<uint16_t>(Control::kClose),
};
static_assert(kData != kAbort && kData != kClose, "control types are not data");

struct FrameHeader {
  uint32_t magic;
  uint16_t type;
  uint16_t stream;
  uint64_t seq;
  uint32_t offset;
  uint32_t length;
  uint32_t total;
  uint32_t check;
};
static_assert(sizeof(FrameHeader) == 32, "fixed frame header");

uint32_t FrameCheck(const FrameHeader& h) {
  uint64_t x = (static_cast<uint64_t>(h.type) << 48) ^ (static_cast<uint64_t>(h.stream) << 32) ^ h.seq;
  x = (x ^ (static_cast<uint64_t>(h.offset) << 32 | h.length)) * 0x9e3779b97f4a7c15ull;
  x ^= static_cast<uint64_t>(h.total) * 0xc2b2ae3d27d4eb4full;
  return static_cast<uint32_t>(x ^ (x >> 29) ^ (x >> 47));
}

FrameHeader MakeFrame(FrameType type, int stream, uint64_t seq, uint32_t offset, uint32_t length, uint32_t total) {
  FrameHeader h{kFrameMagic, type, static_cast<uint16_t>(stream), seq, offset, length, total, 0};
  h.check = FrameCheck(h);
  return h;
}

struct Part {
  int stream;
  uint32_t offset;
  uint32_t length;
};

// Where message `seq` of `total` bytes travels: part k on stream
// (seq + k) % streams, so part 0 is always on stream seq % streams and the
// receiver learns the total from its first frame there.
void Layout(uint64_t seq, uint32_t total, int streams, std::vector<Part>* parts) {
  parts->clear();
  const int first = static_cast<int>(seq % static_cast<uint64_t>(streams));
  if (total < kSplitBytes || streams == 1) {
    parts->push_back({first, 0, total});
    return;
  }
  const uint32_t part = static_cast<uint32_t>((total / streams + 4095) / 4096 * 4096);
  for (int k = 0; k < streams; ++k) {
    const uint64_t off = static_cast<uint64_t>(k) * part;
    if (off >= total) break;
    const uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(part, total - off));
    parts->push_back({(first + k) % streams, static_cast<uint32_t>(off), len});
  }
}

class TcpRequest : public Request {
 public:
  explicit TcpRequest(uint64_t seq) : seq(seq) {}
  uint64_t seq;
  char* data = nullptr;  // receive
  size_t capacity = 0;   // receive
  uint32_t total = 0;
  int parts_left = -1;   // -1: receive whose layout is not known yet
  bool done = false;
};

struct OutFrame {
  FrameHeader header;
  const char* payload;
  size_t sent;  // of header + payload
  TcpRequest* request;
};

struct Stream {
  Socket socket;
  std::deque<OutFrame> out;  // frames to send, in order
  // What is being read: a header, then `length` payload bytes.
  char header[sizeof(FrameHeader)];
  size_t header_got = 0;
  bool have_header = false;
  FrameHeader current{};
  size_t payload_got = 0;
  bool closed = false;  // the peer's close frame was read: nothing follows on this stream
};

class TcpConnection {
 public:
  TcpConnection(std::vector<Socket> sockets, PeerName peer, int self_rank)
      : peer_(std::move(peer)), self_rank_(self_rank) {
    for (Socket& s : sockets) {
      streams_.emplace_back();
      streams_.back().socket = std::move(s);
    }
  }

  const PeerName& peer() const { return peer_; }

  void Fds(bool sending, std::vector<int>* fds, std::vector<short>* events) const {
    for (const Stream& s : streams_) {
      if (!s.socket.valid()) continue;
      fds->push_back(s.socket.fd());
      events->push_back(static_cast<short>(POLLIN | (sending && !s.out.empty() ? POLLOUT : 0)));
    }
  }

  void Abort(const Status& why, int self_rank, uint64_t seq) {
    if (aborted_) return;
    aborted_ = true;
    const shared::Notice w = handshake::AbortBody(why, self_rank, seq);
    const FrameHeader h = MakeFrame(kAbort, 0, 0, 0, sizeof(w), sizeof(w));
    for (Stream& s : streams_) {
      // Only at a frame boundary: a frame cut in two would be garbage.
      if (!s.socket.valid() || (!s.out.empty() && s.out.front().sent > 0)) continue;
      const Deadline d = DeadlineAfterMs(kAbortSendMs);
      if (s.socket.SendAll(&h, sizeof(h), d).ok()) (void)s.socket.SendAll(&w, sizeof(w), d);
      ::shutdown(s.socket.fd(), SHUT_WR);
    }
    if (error_.ok()) error_ = base::InvalidUsage("the connection was aborted by this rank");
  }

  // Every frame queued has gone (Close drains first, within a bound).
  void CloseStreams() {
    if (aborted_) return;
    aborted_ = true;
    const FrameHeader h = MakeFrame(kClose, 0, 0, 0, 0, 0);
    for (Stream& s : streams_) {
      if (!s.socket.valid() || !s.out.empty()) continue;
      (void)s.socket.SendAll(&h, sizeof(h), DeadlineAfterMs(kAbortSendMs));
      ::shutdown(s.socket.fd(), SHUT_WR);
    }
  }

 protected:
  std::string Where() const {
    return "rank " + std::to_string(self_rank_) + ", connection to rank " + std::to_string(peer_.rank) + " (" +
           peer_.where + ")";
  }

  Status Fail(Status st) {
    if (error_.ok()) error_ = st.origin() >= 0 ? st : st.WithOrigin(peer_.rank, st.message());
    return error_;
  }

  Status Broken(const std::string& what) { return Fail(base::RemoteError(Where() + ": " + what)); }

  // A frame is due on a stream the peer closed in good order.
  Status Closed() {
    const std::string msg = Where() + ": the peer closed its communicator";
    return Fail(base::RemoteError(msg).WithOrigin(peer_.rank, msg, kAfterEveryCollective));
  }

  // The peer's abort frame, its header read: reads the notice (blocking
  // briefly: it follows the header at once) and fails with it.
  Status PeerAborted(Stream& s) {
    shared::Notice w{};
    if (s.current.length != sizeof(w) || !s.socket.RecvAll(&w, sizeof(w), DeadlineAfterMs(kAbortSendMs)).ok()) {
      return Broken("the peer stopped, its notice unreadable");
    }
    return Fail(handshake::AbortStatus(w, Where(), peer_.rank));
  }

  // Reads into s.header; true once a whole header is there (checked).
  StatusOr<bool> ReadHeader(Stream& s) {
    if (s.have_header) return true;
    if (s.closed) return false;
    while (s.header_got < sizeof(FrameHeader)) {
      auto n = s.socket.RecvSome(s.header + s.header_got, sizeof(FrameHeader) - s.header_got);
      if (!n.ok()) return Broken(s.header_got == 0 ? "the peer closed the connection" : "the peer closed mid-frame");
      if (*n == 0) return false;
      s.header_got += *n;
    }
    std::memcpy(&s.current, s.header, sizeof(FrameHeader));
    s.header_got = 0;
    if (s.current.magic != kFrameMagic || s.current.check != FrameCheck(s.current) ||
        (s.current.type != kData && s.current.type != kAbort && s.current.type != kClose)) {
      return Broken("garbage on the data stream (not a Ringo frame)");
    }
    if (s.current.type == kAbort) return PeerAborted(s);
    if (s.current.type == kClose) {  // the data before it is still read
      s.closed = true;
      return false;
    }
    s.have_header = true;
    s.payload_got = 0;
    return true;
  }

  std::vector<Stream> streams_;
  PeerName peer_;
  int self_rank_;
  Status error_;
  bool aborted_ = false;
};

class TcpSend : public SendConnection, private TcpConnection {
 public:
  TcpSend(std::vector<Socket> sockets, PeerName peer, int self_rank)
      : TcpConnection(std::move(sockets), std::move(peer), self_rank) {}

  StatusOr<std::unique_ptr<MemoryRegion>> Register(void*, size_t, MemoryKind kind) override {
    if (kind != MemoryKind::kHost) return base::InvalidArgument("the socket transport moves host memory only");
    return std::unique_ptr<MemoryRegion>();
  }

  StatusOr<Request*> Isend(const void* data, size_t bytes, MemoryRegion*) override {
    RETURN_IF_ERROR(error_);
    if (inflight_.size() >= static_cast<size_t>(kMaxRequests)) return static_cast<Request*>(nullptr);
    if (bytes > UINT32_MAX) return base::InvalidArgument("a message of more than 4 GiB");
    auto req = std::make_unique<TcpRequest>(next_seq_++);
    req->total = static_cast<uint32_t>(bytes);
    Layout(req->seq, req->total, static_cast<int>(streams_.size()), &parts_);
    req->parts_left = static_cast<int>(parts_.size());
    for (const Part& p : parts_) {
      streams_[p.stream].out.push_back(OutFrame{MakeFrame(kData, p.stream, req->seq, p.offset, p.length, req->total),
                                                static_cast<const char*>(data) + p.offset, 0, req.get()});
    }
    inflight_.push_back(std::move(req));
    return static_cast<Request*>(inflight_.back().get());
  }

  Status Test(Request* request, bool* done, size_t* bytes) override {
    *done = false;
    RETURN_IF_ERROR(Progress());
    return shared::TakeIfDone(inflight_, request, Status(), [](const auto& r) { return r.parts_left == 0; },
                            [](const auto& r) { return r.total; }, done, bytes);
  }

  Status Poll() override { return Progress(); }
  void PollFds(std::vector<int>* fds, std::vector<short>* events) const override { Fds(true, fds, events); }
  void Abort(const Status& why, int self_rank, uint64_t seq) override { TcpConnection::Abort(why, self_rank, seq); }
  void Close() override {
    const Deadline until = DeadlineAfterMs(kAbortSendMs * 10);
    while (error_.ok() && Clock::now() < until && !Drained()) {
      if (!Progress().ok()) break;
      std::vector<int> fds;
      std::vector<short> events;
      Fds(true, &fds, &events);
      std::vector<pollfd> p;
      for (size_t i = 0; i < fds.size(); ++i) p.push_back({fds[i], events[i], 0});
      ::poll(p.data(), p.size(), 10);
    }
    CloseStreams();
  }
  const PeerName& peer() const override { return TcpConnection::peer(); }

 private:
  bool Drained() const {
    for (const Stream& s : streams_) {
      if (!s.out.empty()) return false;
    }
    return true;
  }

  Status Progress() {
    RETURN_IF_ERROR(error_);
    for (Stream& s : streams_) {
      while (!s.out.empty()) {
        OutFrame& f = s.out.front();
        const size_t total = sizeof(FrameHeader) + f.header.length;
        iovec iov[2];
        int n = 0;
        if (f.sent < sizeof(FrameHeader)) {
          iov[n++] = {reinterpret_cast<char*>(&f.header) + f.sent, sizeof(FrameHeader) - f.sent};
          if (f.header.length > 0) iov[n++] = {const_cast<char*>(f.payload), f.header.length};
        } else {
          iov[n++] = {const_cast<char*>(f.payload) + (f.sent - sizeof(FrameHeader)), total - f.sent};
        }
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = static_cast<size_t>(n);
        const ssize_t w = ::sendmsg(s.socket.fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
          // The peer may have explained itself before it went.
          RETURN_IF_ERROR(ReadIncoming());
          return Broken(std::string("send failed: ") + std::strerror(errno));
        }
        f.sent += static_cast<size_t>(w);
        if (f.sent < total) break;
        --f.request->parts_left;
        s.out.pop_front();
      }
    }
    return ReadIncoming();
  }

  // A receiver sends nothing but an abort notice, then closes.
  Status ReadIncoming() {
    for (Stream& s : streams_) {
      ASSIGN_OR_RETURN(const bool whole, ReadHeader(s));
      if (whole) return Broken("the peer sent data on a receive-only connection");
      if (s.closed) return Closed();  // a receiver that closed reads nothing more
    }
    return Status();
  }

  std::deque<std::unique_ptr<TcpRequest>> inflight_;
  uint64_t next_seq_ = 0;
  std::vector<Part> parts_;
};

class TcpRecv : public RecvConnection, private TcpConnection {
 public:
  TcpRecv(std::vector<Socket> sockets, PeerName peer, int self_rank)
      : TcpConnection(std::move(sockets), std::move(peer), self_rank) {}

  StatusOr<std::unique_ptr<MemoryRegion>> Register(void*, size_t, MemoryKind kind) override {
    if (kind != MemoryKind::kHost) return base::InvalidArgument("the socket transport moves host memory only");
    return std::unique_ptr<MemoryRegion>();
  }

  StatusOr<Request*> Irecv(void* data, size_t bytes, MemoryRegion*) override {
    RETURN_IF_ERROR(error_);
    if (posted_.size() >= static_cast<size_t>(kMaxRequests)) return static_cast<Request*>(nullptr);
    auto req = std::make_unique<TcpRequest>(next_seq_++);
    req->data = static_cast<char*>(data);
    req->capacity = bytes;
    posted_.push_back(std::move(req));
    return static_cast<Request*>(posted_.back().get());
  }

  Status Test(Request* request, bool* done, size_t* bytes) override {
    // A message already received is delivered even after an error.
    const Status progress = Progress();
    return shared::TakeIfDone(posted_, request, progress, [](const auto& r) { return r.done; },
                            [](const auto& r) { return r.total; }, done, bytes);
  }

  Status Poll() override { return Progress(); }
  void PollFds(std::vector<int>* fds, std::vector<short>* events) const override { Fds(false, fds, events); }
  void Abort(const Status& why, int self_rank, uint64_t seq) override { TcpConnection::Abort(why, self_rank, seq); }
  void Close() override { CloseStreams(); }
  const PeerName& peer() const override { return TcpConnection::peer(); }

 private:
  // Receives the posted messages in order, one at a time: part 0's frame on
  // stream seq % n gives the total, hence every other part's stream and place.
  Status Progress() {
    RETURN_IF_ERROR(error_);
    const int n = static_cast<int>(streams_.size());
    for (auto& holder : posted_) {
      TcpRequest& r = *holder;
      if (r.done) continue;
      if (r.parts_left < 0) {
        Stream& first = streams_[r.seq % static_cast<uint64_t>(n)];
        ASSIGN_OR_RETURN(const bool whole, ReadHeader(first));
        if (!whole) return first.closed ? Closed() : Status();
        const FrameHeader& h = first.current;
        if (h.seq != r.seq || h.offset != 0) {
          return Broken("frame of message " + std::to_string(h.seq) + " at offset " + std::to_string(h.offset) +
                        " where message " + std::to_string(r.seq) + " begins");
        }
        if (h.total > r.capacity) {
          return Broken("a message of " + std::to_string(h.total) + " bytes for a receive of " +
                        std::to_string(r.capacity));
        }
        r.total = h.total;
        Layout(r.seq, r.total, n, &layout_);
        r.parts_left = static_cast<int>(layout_.size());
        part_done_.assign(layout_.size(), false);
        if (layout_[0].length != h.length) return Broken("a frame whose length does not fit its message");
      }
      for (size_t k = 0; k < layout_.size(); ++k) {
        if (part_done_[k]) continue;
        const Part& p = layout_[k];
        Stream& s = streams_[p.stream];
        ASSIGN_OR_RETURN(const bool whole, ReadHeader(s));
        if (!whole) {
          if (s.closed) return Closed();
          continue;
        }
        const FrameHeader& h = s.current;
        if (h.seq != r.seq || h.offset != p.offset || h.length != p.length || h.total != r.total) {
          return Broken("frame (message " + std::to_string(h.seq) + ", offset " + std::to_string(h.offset) +
                        ", length " + std::to_string(h.length) + ") where message " + std::to_string(r.seq) +
                        "'s part at " + std::to_string(p.offset) + " was due");
        }
        while (s.payload_got < p.length) {
          auto got = s.socket.RecvSome(r.data + p.offset + s.payload_got, p.length - s.payload_got);
          if (!got.ok()) return Broken("the peer closed mid-message");
          if (*got == 0) break;
          s.payload_got += *got;
        }
        if (s.payload_got < p.length) continue;
        part_done_[k] = true;
        --r.parts_left;
        s.have_header = false;
        s.payload_got = 0;
      }
      if (r.parts_left > 0) return Status();
      r.done = true;
    }
    // Nothing posted: still notice a peer that aborted or went away.
    if (posted_.empty() || posted_.back()->done) {
      for (Stream& s : streams_) {
        if (s.have_header) continue;
        ASSIGN_OR_RETURN(const bool whole, ReadHeader(s));
        (void)whole;  // a data frame waits for its receive
      }
    }
    return Status();
  }

  std::deque<std::unique_ptr<TcpRequest>> posted_;
  uint64_t next_seq_ = 0;
  std::vector<Part> layout_;      // of the first message not yet done
  std::vector<bool> part_done_;  // its parts received
};

}  // namespace

std::unique_ptr<SendConnection> MakeSend(std::vector<Socket> streams, PeerName peer, int self_rank) {
  return std::make_unique<TcpSend>(std::move(streams), std::move(peer), self_rank);
}

std::unique_ptr<RecvConnection> MakeRecv(std::vector<Socket> streams, PeerName peer, int self_rank) {
  return std::make_unique<TcpRecv>(std::move(streams), std::move(peer), self_rank);
}

}  // namespace ringo::transport::net::tcp
