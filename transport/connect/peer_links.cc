#include "transport/connect/peer_links.h"

#include <sys/uio.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <cstring>
#include <map>
#include <string>
#include <thread>

#include "base/config.h"
#include "base/logging.h"
#include "transport/net/registry.h"
#include "transport/peer_state.h"
#include "transport/shm/segment.h"

namespace ringo::transport {
namespace {

using base::Status;
using base::StatusOr;

constexpr uint32_t kLinkMagic = 0x50474e52;  // "RNGP"

enum class OfferKind : uint32_t { kFailed = 0, kProcess = 1, kShm = 2, kNet = 3 };

// The receiver's offer: where its FIFO is (or why there is none).
struct OfferWire {
  uint32_t magic;
  uint32_t kind;
  uint64_t slot_bytes;
  char name[128];  // registry key or segment name; kFailed: the reason
  net::NetHandle handle;
};

// The sender's answer: it opened the FIFO (or why not), and where the
// receiver may test reading its memory (ProbeWord).
struct AckWire {
  uint32_t magic;
  int32_t ok;
  uint64_t probe_addr;
  uint64_t probe_value;
  char why[128];
};

// A word whose address and value a sender announces: a receiver in another
// process that reads the same value there with process_vm_readv may copy
// straight out of the sender's buffers (the same user, no ptrace
// restriction, and truly that process: not a namesake in another pid
// namespace).
const uint64_t* ProbeWord() {
  static const uint64_t* const word = [] {
    std::random_device rd;
    return new uint64_t((static_cast<uint64_t>(rd()) << 32) ^ rd() ^ 0x52494e474f505242ull);
  }();
  return word;
}

bool CanRead(int32_t pid, uint64_t addr, uint64_t want) {
  uint64_t got = 0;
  iovec local{&got, sizeof(got)};
  iovec remote{reinterpret_cast<void*>(addr), sizeof(got)};
  return ::process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof(got)) && got == want;
}

template <size_t N>
void CopyText(char (&dst)[N], const std::string& text) {
  std::snprintf(dst, N, "%s", text.c_str());
}

template <size_t N>
std::string ReadText(const char (&src)[N]) {
  return std::string(src, strnlen(src, N));
}

uint64_t PairTag(uint64_t kind, int src, int dst) {
  return kind | (static_cast<uint64_t>(src) << 24) | static_cast<uint64_t>(dst);
}

// FIFOs a receiver made for a sender that is a thread of this process,
// until that sender takes them.
std::mutex g_process_mu;
std::map<std::string, std::shared_ptr<FifoMemory>>* g_process_fifos =
    new std::map<std::string, std::shared_ptr<FifoMemory>>();  // GUARDED_BY(g_process_mu)

std::string ProcessKey(uint64_t tag, int src, int dst) {
  return "p2p-" + std::to_string(tag) + "-" + std::to_string(src) + "-" + std::to_string(dst);
}

std::shared_ptr<FifoMemory> TakeProcessFifo(const std::string& key) {
  std::lock_guard<std::mutex> lock(g_process_mu);
  auto it = g_process_fifos->find(key);
  if (it == g_process_fifos->end()) return nullptr;
  auto mem = std::move(it->second);
  g_process_fifos->erase(it);
  return mem;
}

std::vector<int> Missing(const std::vector<int>& peers, int self, int nranks,
                         const std::vector<bool>& have) {
  std::vector<int> out;
  for (int p : peers) {
    if (p == self || p < 0 || p >= nranks || have[p]) continue;
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  return out;
}

}  // namespace

std::string ShmPairName(uint64_t tag, int src, int dst) {
  char name[96];
  std::snprintf(name, sizeof(name), "/ringo-%016llx-p%d-%d", static_cast<unsigned long long>(tag), src, dst);
  return name;
}

struct PeerLinks::Incoming {
  int peer = -1;
  OfferKind kind = OfferKind::kFailed;
  std::shared_ptr<FifoMemory> memory;
  std::string name;  // shm segment to unlink, or the registry key
  std::unique_ptr<net::Listener> listener;
  std::unique_ptr<net::RecvConnection> accepted;
  // Made with the memory, before the offer: once the sender has the FIFO it
  // may post, and nothing on this side writes the header after that.
  std::unique_ptr<RecvEnd> end;
  Status status;  // what went wrong on this side
};

PeerLinks::PeerLinks(Exchange* exchange, PeerLinkSpec spec) : exchange_(exchange), spec_(std::move(spec)) {
  send_.resize(spec_.nranks);
  recv_.resize(spec_.nranks);
}

PeerLinks::~PeerLinks() { Shutdown(/*drain=*/false, 0); }

int PeerLinks::connected() const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (int p = 0; p < spec_.nranks; ++p) n += (send_[p] ? 1 : 0) + (recv_[p] ? 1 : 0);
  return n;
}

Status PeerLinks::Offer(int peer, Incoming* in) {
  in->peer = peer;
  const PeerInfo& self = spec_.peers[spec_.rank];
  const PeerInfo& them = spec_.peers[peer];
  const bool same_process = self.host_hash == them.host_hash && self.pid == them.pid;
  OfferWire offer{};
  offer.magic = kLinkMagic;
  offer.slot_bytes = spec_.slot_bytes;
  Status st;
  if (same_process) {
    in->kind = OfferKind::kProcess;
    in->name = ProcessKey(spec_.tag, peer, spec_.rank);
    in->memory = AllocateProcessFifo(spec_.slot_bytes, spec_.rank);
    std::lock_guard<std::mutex> lock(g_process_mu);
    (*g_process_fifos)[in->name] = in->memory;
  } else if (!spec_.net[peer]) {
    in->kind = OfferKind::kShm;
    in->name = ShmPairName(spec_.tag, peer, spec_.rank);
    auto mem = CreateShmFifo(in->name, spec_.slot_bytes, spec_.rank);
    if (mem.ok()) in->memory = *mem;
    else st = mem.status();
  } else {
    in->kind = OfferKind::kNet;
    auto network = PairNet(peer);
    if (network.ok()) {
      net::ConnectOptions o{spec_.rank, peer, spec_.tag};
      auto l = (*network)->Listen(0, o, &offer.handle);
      if (l.ok()) in->listener = std::move(l).value();
      else st = l.status();
    } else {
      st = network.status();
    }
    if (st.ok()) {
      in->memory = AllocateProcessFifo(spec_.slot_bytes, spec_.rank, net::kProxySlotPrefix);
      auto* h = static_cast<FifoHeader*>(in->memory->base());
      h->sender_rank = peer;            // the remote sender, as the executor names it
      h->sender_process = ProcessId{};  // not on this host: its death shows on the connection
    }
  }
  if (st.ok()) in->end = std::make_unique<RecvEnd>(in->memory, spec_.rank, SelfProcessId());
  offer.kind = static_cast<uint32_t>(st.ok() ? in->kind : OfferKind::kFailed);
  CopyText(offer.name, st.ok() ? in->name : st.message());
  in->status = st;
  Status sent = exchange_->Send(peer, PairTag(kTagPeerOffer, peer, spec_.rank), &offer, sizeof(offer));
  return st.ok() ? sent : st;
}

StatusOr<net::Net*> PeerLinks::PairNet(int peer) const {
  const base::Config& config = base::GetConfig();
  net::NetKind kind = net::NetKind::kSocket;
  if (static_cast<int>(spec_.fabrics.size()) == spec_.nranks) {
    ASSIGN_OR_RETURN(kind, net::ChooseNet(config, spec_.fabrics[spec_.rank], spec_.fabrics[peer], spec_.rank, peer));
  }
  return net::ProcessNet(config, kind, spec_.numa);
}

Status PeerLinks::Answer(int peer, net::Proxy* proxy, bool* proxy_used) {
  const std::string where = "rank " + std::to_string(spec_.rank) + " connecting to peer rank " +
                            std::to_string(peer) + " for point-to-point";
  std::string msg;
  Status got = exchange_->Recv(peer, PairTag(kTagPeerOffer, spec_.rank, peer), &msg,
                               DeadlineAfterMs(spec_.timeout_ms), abort_);
  if (!got.ok()) {
    if (got.code() == base::Code::kTimeout) {
      return base::Timeout(where + ": no answer within " + std::to_string(spec_.timeout_ms) + " ms (rank " +
                           std::to_string(peer) + " has not posted the matching ringoRecv)")
          .WithOrigin(peer, "it never posted the receive that rank " + std::to_string(spec_.rank) + "'s send needs");
    }
    return got.WithContext(where);
  }
  OfferWire offer{};
  if (msg.size() != sizeof(offer)) return base::RemoteError(where + ": a malformed offer");
  std::memcpy(&offer, msg.data(), sizeof(offer));
  if (offer.magic != kLinkMagic || offer.slot_bytes == 0 || offer.slot_bytes > (uint64_t{1} << 30)) {
    return base::RemoteError(where + ": a malformed offer");
  }
  const auto kind = static_cast<OfferKind>(offer.kind);
  if (kind == OfferKind::kFailed) {
    return base::RemoteError(where + ": it could not make its FIFO: " + ReadText(offer.name))
        .WithOrigin(peer, ReadText(offer.name));
  }
  const ProcessId self = SelfProcessId();
  const size_t slot = static_cast<size_t>(offer.slot_bytes);
  Status st;
  std::unique_ptr<SendEnd> end;
  if (kind == OfferKind::kProcess) {
    auto mem = TakeProcessFifo(ReadText(offer.name));
    if (mem == nullptr) st = base::RemoteError(where + ": its in-process FIFO is not in this process");
    else end = std::make_unique<SendEnd>(std::move(mem), spec_.rank, self);
  } else if (kind == OfferKind::kShm) {
    auto mem = OpenShmFifo(ReadText(offer.name), slot);
    if (mem.ok()) end = std::make_unique<SendEnd>(*mem, spec_.rank, self);
    else st = mem.status().WithContext(where);
  } else if (kind == OfferKind::kNet) {
    auto network = PairNet(peer);
    if (network.ok()) {
      net::ConnectOptions o{spec_.rank, peer, spec_.tag};
      auto conn = (*network)->Connect(0, offer.handle, o, DeadlineAfterMs(spec_.timeout_ms));
      if (conn.ok()) {
        auto mem = AllocateProcessFifo(slot, peer, net::kProxySlotPrefix);
        static_cast<FifoHeader*>(mem->base())->receiver_process = ProcessId{};
        end = std::make_unique<SendEnd>(mem, spec_.rank, self);
        st = proxy->AddSender(mem, std::move(conn).value(), 0);
        if (st.ok()) *proxy_used = true;
        else end.reset();
      } else {
        st = conn.status().WithContext(where);
      }
    } else {
      st = network.status().WithContext(where);
    }
  } else {
    st = base::RemoteError(where + ": an offer of unknown kind " + std::to_string(offer.kind));
  }
  AckWire ack{};
  ack.magic = kLinkMagic;
  ack.ok = st.ok() ? 1 : 0;
  ack.probe_addr = reinterpret_cast<uint64_t>(ProbeWord());
  ack.probe_value = *ProbeWord();
  CopyText(ack.why, st.message());
  Status sent = exchange_->Send(peer, PairTag(kTagPeerAck, spec_.rank, peer), &ack, sizeof(ack));
  RETURN_IF_ERROR(st);
  RETURN_IF_ERROR(sent);
  std::lock_guard<std::mutex> lock(mu_);
  send_[peer] = std::move(end);
  return Status();
}

Status PeerLinks::Settle(int peer, Incoming* in, net::Proxy* proxy, bool* proxy_used) {
  const std::string where = "rank " + std::to_string(spec_.rank) + " connecting from peer rank " +
                            std::to_string(peer) + " for point-to-point";
  std::string msg;
  Status got = exchange_->Recv(peer, PairTag(kTagPeerAck, peer, spec_.rank), &msg,
                               DeadlineAfterMs(spec_.timeout_ms), abort_);
  if (in->kind == OfferKind::kShm && in->memory != nullptr) UnlinkShm(in->name);
  if (in->kind == OfferKind::kProcess) TakeProcessFifo(in->name);  // not taken: the sender failed
  if (!got.ok()) {
    if (got.code() == base::Code::kTimeout) {
      return base::Timeout(where + ": no answer within " + std::to_string(spec_.timeout_ms) + " ms (rank " +
                           std::to_string(peer) + " has not posted the matching ringoSend)")
          .WithOrigin(peer, "it never posted the send that rank " + std::to_string(spec_.rank) + "'s receive needs");
    }
    return got.WithContext(where);
  }
  RETURN_IF_ERROR(in->status);
  AckWire ack{};
  if (msg.size() != sizeof(ack)) return base::RemoteError(where + ": a malformed answer");
  std::memcpy(&ack, msg.data(), sizeof(ack));
  if (ack.magic != kLinkMagic) return base::RemoteError(where + ": a malformed answer");
  if (ack.ok != 1) {
    return base::RemoteError(where + ": it could not open this rank's FIFO: " + ReadText(ack.why))
        .WithOrigin(peer, ReadText(ack.why));
  }
  auto* header = static_cast<FifoHeader*>(in->memory->base());
  if (in->kind == OfferKind::kProcess) {
    header->receiver_pulls.store(1, std::memory_order_release);
  } else if (in->kind == OfferKind::kShm) {
    const bool pulls = CanRead(spec_.peers[peer].pid, ack.probe_addr, ack.probe_value);
    if (!pulls) {
      RINGO_LOG(INFO) << where << ": cannot read the peer's memory (process_vm_readv: " << std::strerror(errno)
                      << "); its large messages go through the FIFO";
    }
    header->receiver_pulls.store(pulls ? 1 : 2, std::memory_order_release);
  }
  if (in->kind == OfferKind::kNet) {
    if (in->accepted == nullptr) return base::RemoteError(where + ": its network connection never arrived");
    RETURN_IF_ERROR(proxy->AddReceiver(in->memory, std::move(in->accepted), 0).WithContext(where));
    *proxy_used = true;
  }
  std::lock_guard<std::mutex> lock(mu_);
  recv_[peer] = std::move(in->end);
  return Status();
}

Status PeerLinks::Connect(const std::vector<int>& send_to, const std::vector<int>& recv_from,
                          const std::atomic<bool>* abort) {
  abort_ = abort;
  std::vector<bool> have_send(spec_.nranks), have_recv(spec_.nranks);
  for (int p = 0; p < spec_.nranks; ++p) {
    have_send[p] = send_[p] != nullptr;
    have_recv[p] = recv_[p] != nullptr;
  }
  const std::vector<int> outgoing = Missing(send_to, spec_.rank, spec_.nranks, have_send);
  const std::vector<int> incoming = Missing(recv_from, spec_.rank, spec_.nranks, have_recv);
  if (outgoing.empty() && incoming.empty()) return Status();
  if (!exchange_->CarriesMessages()) {
    return base::Internal("point-to-point connections need an exchange that carries messages");
  }
  Status first;
  auto note = [&first](const Status& st) {
    if (first.ok() && !st.ok()) first = st;
  };
  // 1. Every receive side offers its FIFO before waiting for anything.
  std::vector<Incoming> ins(incoming.size());
  for (size_t i = 0; i < incoming.size(); ++i) note(Offer(incoming[i], &ins[i]));
  // 2. Network connections are accepted while this rank connects its own.
  const Deadline deadline = DeadlineAfterMs(spec_.timeout_ms);
  std::thread acceptor([&] {
    for (Incoming& in : ins) {
      if (in.kind != OfferKind::kNet || in.listener == nullptr || !in.status.ok()) continue;
      auto conn = in.listener->Accept(in.peer, deadline);
      if (conn.ok()) in.accepted = std::move(conn).value();
      else in.status = conn.status();
    }
  });
  net::ProxyOptions po;
  po.self_rank = spec_.rank;
  po.spin_count = spec_.proxy_spin_count;
  po.yield_count = spec_.proxy_yield_count;
  auto proxy = std::make_unique<net::Proxy>(po);
  bool proxy_used = false;
  // 3. Every send side answers its offer.
  for (int q : outgoing) note(Answer(q, proxy.get(), &proxy_used));
  acceptor.join();
  // 4. Every receive side hears that its sender opened the FIFO.
  for (size_t i = 0; i < incoming.size(); ++i) note(Settle(incoming[i], &ins[i], proxy.get(), &proxy_used));
  if (proxy_used) {
    Status started = proxy->Start();
    std::lock_guard<std::mutex> lock(mu_);
    proxies_.push_back(std::move(proxy));
    note(started);
  }
  if (first.ok()) {
    RINGO_LOG(INFO) << "rank " << spec_.rank << ": point-to-point connected " << outgoing.size() << " send and "
                    << incoming.size() << " receive end(s)";
  }
  return first;
}

void PeerLinks::Abort(const Status& why, int self_rank, uint64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& e : send_) {
    if (e) e->Abort(why, self_rank, seq);
  }
  for (auto& e : recv_) {
    if (e) e->Abort(why, self_rank, seq);
  }
}

void PeerLinks::Shutdown(bool drain, int64_t timeout_ms) {
  std::vector<std::unique_ptr<net::Proxy>> proxies;
  {
    std::lock_guard<std::mutex> lock(mu_);
    proxies.swap(proxies_);
  }
  for (auto& p : proxies) p->Shutdown(drain, timeout_ms);
}

}  // namespace ringo::transport
