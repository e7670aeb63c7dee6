#include "transport/bootstrap/mesh.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cstring>

#include "base/logging.h"

namespace ringo::transport {
namespace {

using base::Status;
using base::StatusOr;

constexpr uint32_t kMeshMagic = 0x4d474e52;  // "RNGM"
constexpr uint32_t kMeshVersion = 1;
constexpr uint64_t kMaxMessageBytes = uint64_t{64} << 20;

struct Hello {
  uint32_t magic;
  uint32_t version;
  uint64_t nonce;
  int32_t rank;
  int32_t nranks;
};

struct Frame {
  uint32_t magic;
  uint32_t reserved;
  uint64_t context;
  uint64_t tag;
  uint64_t length;
};

// What goes round at Create: this rank's listening address.
struct AddressRecord {
  sockaddr_storage storage;
  uint32_t length;
  uint32_t reserved;
};

// An accepted connection, read by the service thread.
struct In {
  Socket socket;
  std::string buffer;
  int rank = -1;  // -1 until its hello
};

}  // namespace

StatusOr<std::shared_ptr<Mesh>> Mesh::Create(Exchange& boot, uint64_t nonce, const std::string& ifname_spec) {
  Socket listener;
  AddressRecord mine{};
  Status st;
  auto at = ChooseListenAddress(ifname_spec);
  if (at.ok()) {
    SocketAddress bound;
    auto l = Socket::Listen(*at, &bound);
    if (l.ok()) {
      listener = std::move(l).value();
      mine.storage = bound.storage;
      mine.length = bound.length;
    } else {
      st = l.status();
    }
  } else {
    st = at.status();
  }
  RETURN_IF_ERROR(AgreeOk(boot, st.WithContext("control mesh"), "listen for its control connections"));
  std::vector<AddressRecord> all(boot.nranks());
  RETURN_IF_ERROR(boot.AllGather(&mine, sizeof(mine), all.data()));
  std::vector<SocketAddress> peers(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    const int family = all[r].storage.ss_family;
    if ((family != AF_INET && family != AF_INET6) || all[r].length > sizeof(sockaddr_storage)) {
      return base::RemoteError("control mesh: rank " + std::to_string(r) + " sent no valid address");
    }
    peers[r].storage = all[r].storage;
    peers[r].length = all[r].length;
  }
  return std::shared_ptr<Mesh>(new Mesh(boot.rank(), nonce, std::move(listener), std::move(peers)));
}

Mesh::Mesh(int rank, uint64_t nonce, Socket listener, std::vector<SocketAddress> peers)
    : rank_(rank), nonce_(nonce), listener_(std::move(listener)), peers_(std::move(peers)) {
  for (size_t r = 0; r < peers_.size(); ++r) out_.push_back(std::make_unique<Out>());
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) wake_[0] = wake_[1] = -1;
  control_ = std::make_unique<ControlService>(this);
  inbox_.SetControlSink(control_.get());
  thread_ = std::thread([this] { Serve(); });
}

Mesh::~Mesh() {
  stop_.store(true);
  if (wake_[1] >= 0) {
    const char c = 1;
    (void)!::write(wake_[1], &c, 1);
  }
  thread_.join();
  inbox_.SetControlSink(nullptr);
  control_.reset();  // its thread may still be answering over out_
  for (int fd : wake_) {
    if (fd >= 0) ::close(fd);
  }
}

Status Mesh::Send(int dst, uint64_t context, uint64_t tag, const void* data, size_t bytes, Deadline deadline) {
  if (dst < 0 || dst >= nranks()) return base::Internal("mesh: message to rank " + std::to_string(dst));
  if (dst == rank_) {
    inbox_.Put(rank_, context, tag, std::string(static_cast<const char*>(data), bytes));
    return Status();
  }
  if (bytes > kMaxMessageBytes) return base::Internal("mesh: message too large");
  Out& out = *out_[dst];
  std::lock_guard<std::mutex> lock(out.mu);
  const std::string where = "control message from rank " + std::to_string(rank_) + " to rank " + std::to_string(dst);
  if (!out.socket.valid()) {
    auto s = Socket::Connect(peers_[dst], deadline);
    if (!s.ok()) return s.status().WithContext(where + " (connecting to " + peers_[dst].ToString() + ")");
    Hello hello{kMeshMagic, kMeshVersion, nonce_, rank_, nranks()};
    Status st = s->SendAll(&hello, sizeof(hello), deadline);
    if (!st.ok()) return st.WithContext(where);
    out.socket = std::move(s).value();
  }
  Frame frame{kMeshMagic, 0, context, tag, bytes};
  Status st = out.socket.SendAll(&frame, sizeof(frame), deadline);
  if (st.ok() && bytes > 0) st = out.socket.SendAll(data, bytes, deadline);
  if (!st.ok()) {
    out.socket.Close();  // the stream is broken mid-message: never reuse it
    return st.WithContext(where);
  }
  return Status();
}

Status Mesh::Recv(int src, uint64_t context, uint64_t tag, std::string* data, Deadline deadline,
                  const std::atomic<bool>* abort) {
  if (src < 0 || src >= nranks()) return base::Internal("mesh: message from rank " + std::to_string(src));
  return inbox_.Take(src, context, tag, data, deadline, abort, rank_);
}

void Mesh::Serve() {
  std::vector<std::unique_ptr<In>> ins;
  auto drop = [&](size_t i, const std::string& why) {
    In& in = *ins[i];
    if (in.rank >= 0 && !stop_.load()) inbox_.MarkGone(in.rank, why);
    in.socket.Close();
  };
  // Parses what `in` holds; false when the connection must go.
  auto parse = [&](In& in, std::string* why) {
    size_t at = 0;
    if (in.rank < 0) {
      if (in.buffer.size() < sizeof(Hello)) return true;
      Hello h;
      std::memcpy(&h, in.buffer.data(), sizeof(h));
      if (h.magic != kMeshMagic || h.version != kMeshVersion || h.nonce != nonce_ || h.nranks != nranks() ||
          h.rank < 0 || h.rank >= nranks()) {
        RINGO_LOG(WARN) << "control mesh of rank " << rank_ << ": dropping a connection that is not a peer";
        return false;
      }
      in.rank = h.rank;
      at = sizeof(Hello);
    }
    while (in.buffer.size() - at >= sizeof(Frame)) {
      Frame f;
      std::memcpy(&f, in.buffer.data() + at, sizeof(f));
      if (f.magic != kMeshMagic || f.length > kMaxMessageBytes) {
        *why = "it sent a malformed control message";
        RINGO_LOG(WARN) << "control mesh of rank " << rank_ << ": rank " << in.rank << " " << *why;
        return false;
      }
      if (in.buffer.size() - at - sizeof(Frame) < f.length) break;
      inbox_.Put(in.rank, f.context, f.tag, in.buffer.substr(at + sizeof(Frame), f.length));
      at += sizeof(Frame) + f.length;
    }
    in.buffer.erase(0, at);
    return true;
  };
  std::vector<char> chunk(1 << 16);
  while (!stop_.load()) {
    std::vector<pollfd> fds;
    fds.push_back({wake_[0], POLLIN, 0});
    fds.push_back({listener_.fd(), POLLIN, 0});
    for (auto& in : ins) fds.push_back({in->socket.valid() ? in->socket.fd() : -1, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), 1000) <= 0) continue;
    if (fds[1].revents & POLLIN) {
      while (true) {
        auto s = listener_.Accept(Clock::now());
        if (!s.ok()) break;
        auto in = std::make_unique<In>();
        in->socket = std::move(s).value();
        ins.push_back(std::move(in));
      }
    }
    for (size_t i = 0; i + 2 < fds.size(); ++i) {
      if ((fds[i + 2].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      In& in = *ins[i];
      while (in.socket.valid()) {
        auto n = in.socket.RecvSome(chunk.data(), chunk.size());
        if (!n.ok()) {
          drop(i, "its control connection closed (the process exited or destroyed the communicator)");
          break;
        }
        if (*n == 0) break;
        in.buffer.append(chunk.data(), *n);
        std::string why;
        if (!parse(in, &why)) {
          drop(i, why.empty() ? "not a peer" : why);
          break;
        }
      }
    }
    // Closed connections go; the rest keep their order.
    size_t kept = 0;
    for (size_t i = 0; i < ins.size(); ++i) {
      if (ins[i]->socket.valid()) ins[kept++] = std::move(ins[i]);
    }
    ins.resize(kept);
  }
}

}  // namespace ringo::transport
