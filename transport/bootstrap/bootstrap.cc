#include "transport/bootstrap/bootstrap.h"

#include <arpa/inet.h>

#include <cstring>
#include <random>
#include <vector>

#include "base/logging.h"
#include "transport/bootstrap/internal/protocol.h"

namespace ringo::transport {
namespace {

using base::Status;
using base::StatusOr;
using internal::MsgType;
using internal::WireHeader;

constexpr uint32_t kIdMagic = 0x55474e52;  // "RNGU"
constexpr uint16_t kIdVersion = 1;
// A rank waits this much longer than the root: when a rank is missing, the
// root's deadline passes first and every rank hears from it which rank is
// missing, instead of timing out on its own (or being taken for the culprit
// because it hung up first).
constexpr int64_t kRankGraceMs = 2000;

// The id's bytes: magic, version, flags, nonce, family, port, 16 address
// bytes, then a checksum over all of that.
struct IdLayout {
  uint32_t magic;
  uint16_t version;
  uint16_t flags;
  uint64_t nonce;
  uint16_t family;
  uint16_t port;  // network order
  uint8_t addr[16];
  uint32_t checksum;
};
static_assert(sizeof(IdLayout) <= kUniqueIdBytes, "id fits");

uint32_t Checksum(const void* data, size_t n) {  // FNV-1a
  uint32_t h = 2166136261u;
  auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

uint64_t RandomNonce() {
  std::random_device rd;
  uint64_t n = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return n == 0 ? 1 : n;
}

}  // namespace

void UniqueId::Encode(char out[kUniqueIdBytes]) const {
  std::memset(out, 0, kUniqueIdBytes);
  IdLayout l{};
  l.magic = kIdMagic;
  l.version = kIdVersion;
  l.flags = root_started_by_rank0 ? 1 : 0;
  l.nonce = nonce;
  l.family = root.storage.ss_family;
  if (l.family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&root.storage);
    l.port = in->sin_port;
    std::memcpy(l.addr, &in->sin_addr, 4);
  } else {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&root.storage);
    l.port = in6->sin6_port;
    std::memcpy(l.addr, &in6->sin6_addr, 16);
  }
  l.checksum = Checksum(&l, offsetof(IdLayout, checksum));
  std::memcpy(out, &l, sizeof(l));
}

StatusOr<UniqueId> UniqueId::Decode(const char in[kUniqueIdBytes]) {
  IdLayout l;
  std::memcpy(&l, in, sizeof(l));
  if (l.magic != kIdMagic || l.checksum != Checksum(&l, offsetof(IdLayout, checksum))) {
    return base::InvalidArgument("the unique id is not one made by ringoGetUniqueId (bad magic or checksum)");
  }
  if (l.version != kIdVersion) {
    return base::InvalidArgument("the unique id has version " + std::to_string(l.version) +
                                 "; this library reads version " + std::to_string(kIdVersion));
  }
  if (l.family != AF_INET && l.family != AF_INET6) {
    return base::InvalidArgument("the unique id holds no valid root address");
  }
  UniqueId id;
  id.nonce = l.nonce;
  id.root_started_by_rank0 = (l.flags & 1) != 0;
  if (l.family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&id.root.storage);
    a->sin_family = AF_INET;
    a->sin_port = l.port;
    std::memcpy(&a->sin_addr, l.addr, 4);
    id.root.length = sizeof(sockaddr_in);
  } else {
    auto* a = reinterpret_cast<sockaddr_in6*>(&id.root.storage);
    a->sin6_family = AF_INET6;
    a->sin6_port = l.port;
    std::memcpy(&a->sin6_addr, l.addr, 16);
    id.root.length = sizeof(sockaddr_in6);
  }
  return id;
}

StatusOr<UniqueId> CreateUniqueId(const std::string& comm_id, const std::string& ifname_spec,
                                  int64_t timeout_ms) {
  UniqueId id;
  if (!comm_id.empty()) {
    ASSIGN_OR_RETURN(id.root, ParseAddress(comm_id));
    if (id.root.port() == 0) return base::InvalidArgument("RINGO_COMM_ID='" + comm_id + "' needs a port");
    id.nonce = Checksum(comm_id.data(), comm_id.size()) | (uint64_t{1} << 63);
    id.root_started_by_rank0 = true;
    return id;
  }
  ASSIGN_OR_RETURN(SocketAddress listen_at, ChooseListenAddress(ifname_spec));
  ASSIGN_OR_RETURN(Socket listener, Socket::Listen(listen_at, &id.root));
  id.nonce = RandomNonce();
  RINGO_LOG(INFO) << "bootstrap root listening on " << id.root.ToString();
  internal::StartRootThread(std::move(listener), id.nonce, timeout_ms);
  return id;
}

Status StartRootForRank0(const UniqueId& id, int64_t timeout_ms) {
  SocketAddress bound;
  ASSIGN_OR_RETURN(Socket listener, Socket::Listen(id.root, &bound));
  RINGO_LOG(INFO) << "bootstrap root (RINGO_COMM_ID) listening on " << bound.ToString();
  internal::StartRootThread(std::move(listener), id.nonce, timeout_ms);
  return base::OkStatus();
}

StatusOr<std::unique_ptr<Bootstrap>> Bootstrap::Connect(const UniqueId& id, int rank, int nranks,
                                                        int64_t timeout_ms) {
  Deadline deadline = DeadlineAfterMs(timeout_ms);
  auto socket = Socket::Connect(id.root, deadline);
  if (!socket.ok()) {
    if (id.root_started_by_rank0 && rank != 0) {
      return socket.status().WithContext(
          "bootstrap: rank " + std::to_string(rank) + " could not reach rank 0, which listens at " +
          id.root.ToString() + " (RINGO_COMM_ID): rank 0 never started, or its communicator was already set up "
          "or had failed");
    }
    return socket.status().WithContext(
        "bootstrap: rank " + std::to_string(rank) + " could not reach the root at " + id.root.ToString() +
        " (nothing accepts there: the root exits once its communicator is set up or has failed, and with the "
        "process that made the unique id)");
  }
  WireHeader hello = internal::MakeHeader(MsgType::kHello, id.nonce, rank, nranks, 0);
  RETURN_IF_ERROR(socket->SendAll(&hello, sizeof(hello), deadline));
  return std::unique_ptr<Bootstrap>(new Bootstrap(std::move(socket).value(), id.nonce, rank, nranks, timeout_ms));
}

Status Bootstrap::AllGather(const void* mine, size_t bytes, void* all) {
  if (bytes > internal::kMaxGatherBytes) return base::Internal("bootstrap all-gather too large");
  Deadline deadline = DeadlineAfterMs(timeout_ms_ + kRankGraceMs);
  WireHeader h = internal::MakeHeader(MsgType::kGather, nonce_, rank_, nranks_, bytes);
  Status st = socket_.SendAll(&h, sizeof(h), deadline);
  if (st.ok() && bytes > 0) st = socket_.SendAll(mine, bytes, deadline);
  WireHeader reply{};
  const bool sent = st.ok();
  // When the send failed the root may have closed us after explaining why:
  // its error is still in the socket, and says more than "broken pipe".
  if (st.ok() || st.code() == base::Code::kRemoteError) {
    Status got = socket_.RecvAll(&reply, sizeof(reply), sent ? deadline : DeadlineAfterMs(1000));
    if (sent || (got.ok() && reply.type == static_cast<uint16_t>(MsgType::kError))) st = got;
  }
  if (!st.ok()) {
    return Status(st.code(), "bootstrap: rank " + std::to_string(rank_) + " waiting for the other ranks: " +
                                 st.message());
  }
  RETURN_IF_ERROR(internal::ValidateHeader(reply).WithContext("bootstrap: bad reply from the root"));
  const std::string reading = "bootstrap: rank " + std::to_string(rank_) + " reading the root's reply";
  if (reply.type == static_cast<uint16_t>(MsgType::kError)) {
    std::string msg(reply.length, '\0');
    RETURN_IF_ERROR(socket_.RecvAll(msg.data(), msg.size(), DeadlineAfterMs(1000)).WithContext(reading));
    const int code = reply.rank;  // the root puts the result code there
    const bool known = code > static_cast<int>(base::Code::kOk) && code <= static_cast<int>(base::Code::kTimeout) &&
                       code != static_cast<int>(base::Code::kInProgress);
    internal::AwaitRootVerdict(nonce_, DeadlineAfterMs(kRankGraceMs));  // the root may be ours: let it finish telling
    return Status(known ? static_cast<base::Code>(code) : base::Code::kRemoteError, "bootstrap root: " + msg);
  }
  if (reply.type != static_cast<uint16_t>(MsgType::kGatherResult) || reply.nonce != nonce_ ||
      reply.length != bytes * static_cast<uint64_t>(nranks_)) {
    return base::RemoteError("bootstrap: unexpected reply from the root");
  }
  return socket_.RecvAll(all, reply.length, deadline).WithContext(reading);
}

}  // namespace ringo::transport
