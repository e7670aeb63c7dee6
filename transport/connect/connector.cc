#include "transport/connect/connector.h"

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>

#include "base/logging.h"
#include "transport/connect/media.h"
#include "transport/connect/medium.h"

namespace ringo::transport {

using base::Status;
using base::StatusOr;

namespace {

constexpr uint32_t kLinkMagic = 0x4b4e4c52;  // "RLNK"

// The receiver's offer: where its FIFO is, or why there is none.
struct OfferWire {
  uint32_t magic;
  uint32_t medium;
  int32_t lane;
  int32_t ok;
  uint64_t slot_bytes;
  uint64_t ll_slot_bytes;
  char why[128];
  OfferBlob blob;
};

// The sender's answer: it opened the FIFO (or why not), and where the
// receiver may test reading its memory.
struct AnswerWire {
  uint32_t magic;
  int32_t ok;
  int32_t lane;
  int32_t reserved;
  uint64_t probe_addr;
  uint64_t probe_value;
  char why[128];
};

uint64_t PairTag(uint64_t kind, int src, int dst, int lane) {
  return kind | (static_cast<uint64_t>(lane) << 40) | (static_cast<uint64_t>(src) << 20) | static_cast<uint64_t>(dst);
}

// A word whose address and value a sender announces (medium.h's SenderProbe).
const uint64_t* ProbeWord() {
  static const uint64_t* const word = [] {
    std::random_device rd;
    return new uint64_t((static_cast<uint64_t>(rd()) << 32) ^ rd() ^ 0x52494e474f505242ull);
  }();
  return word;
}

std::string LaneName(int lane) { return lane == kP2pLane ? "point-to-point" : "channel " + std::to_string(lane); }

}  // namespace

const char* MediumName(Medium m) {
  switch (m) {
    case Medium::kProcess: return "process memory";
    case Medium::kShm: return "shared memory";
    case Medium::kNet: return "network";
    case Medium::kCudaPeer: return "GPU peer memory";
    case Medium::kCudaIpc: return "GPU memory over CUDA IPC";
  }
  return "?";
}

std::unique_ptr<SendEnd> MakeSendEnd(const FifoLink& link, int self_rank) {
  return std::make_unique<SendEnd>(link.memory, self_rank, SelfProcessId());
}

std::unique_ptr<RecvEnd> MakeRecvEnd(const FifoLink& link, int self_rank) {
  return std::make_unique<RecvEnd>(link.memory, self_rank, SelfProcessId());
}

// Every medium of the connector, by kind.
class Connector::Media {
 public:
  explicit Media(Connector* c) {
    Add(MakeProcessMedium());
    Add(MakeShmMedium());
    Add(MakeNetMedium(c->config_, [c] { return c->Proxy(); }));
    Add(MakeCudaMedium(Medium::kCudaPeer));
    Add(MakeCudaMedium(Medium::kCudaIpc));
  }
  FifoMedium* Get(Medium kind) const {
    auto it = media_.find(kind);
    return it == media_.end() ? nullptr : it->second.get();
  }

 private:
  void Add(std::unique_ptr<FifoMedium> m) { media_[m->kind()] = std::move(m); }
  std::map<Medium, std::unique_ptr<FifoMedium>> media_;
};

// A receive side between its offer and its sender's answer.
struct Connector::Pending {
  PairContext pair;
  FifoMedium* medium = nullptr;
  Made made;
  Status status;  // what went wrong on this side
};

Connector::Connector(Exchange* exchange, ConnectorSpec spec, const base::Config& config)
    : exchange_(exchange), spec_(std::move(spec)), config_(config) {
  media_ = std::make_unique<Media>(this);
}

Connector::~Connector() { Shutdown(/*drain=*/false, 0); }

Medium Connector::ChooseMedium(int peer, bool gpu) const {
  const PeerInfo& me = spec_.peers[spec_.rank];
  const PeerInfo& them = spec_.peers[peer];
  const bool same_host = me.host_hash == them.host_hash;
  if (gpu) {
    if (SameProcess(me, them)) return Medium::kCudaPeer;
    return same_host ? Medium::kCudaIpc : Medium::kNet;
  }
  if (SameProcess(me, them)) return Medium::kProcess;  // threads of one process always share its memory
  const bool forced = !spec_.net.empty() && spec_.net[peer];
  const bool shared = same_host && (spec_.domains.empty() || spec_.domains[spec_.rank] == spec_.domains[peer]);
  return shared && !forced ? Medium::kShm : Medium::kNet;
}

StatusOr<net::Proxy*> Connector::Proxy() {
  std::lock_guard<std::mutex> lock(proxy_mu_);
  if (proxy_ == nullptr) {
    net::ProxyOptions po;
    po.self_rank = spec_.rank;
    po.spin_count = spec_.proxy_spin_count;
    po.yield_count = spec_.proxy_yield_count;
    auto proxy = std::make_unique<net::Proxy>(po);
    RETURN_IF_ERROR(proxy->Start());
    proxy_ = std::move(proxy);
  }
  ++net_links_;
  return proxy_.get();
}

void Connector::Shutdown(bool drain, int64_t timeout_ms) {
  std::unique_ptr<net::Proxy> proxy;
  {
    std::lock_guard<std::mutex> lock(proxy_mu_);
    proxy.swap(proxy_);
  }
  if (proxy != nullptr) proxy->Shutdown(drain, timeout_ms);
}

StatusOr<std::vector<FifoLink>> Connector::Connect(const std::vector<PairKey>& sends, const std::vector<PairKey>& recvs,
                                                   const FifoGeometry& geometry, bool gpu,
                                                   const std::atomic<bool>* abort) {
  if (!exchange_->CarriesMessages()) return base::Internal("connecting pairs needs an exchange that carries messages");
  const Deadline deadline = DeadlineAfterMs(spec_.timeout_ms);
  const int self = spec_.rank;
  Status first;
  auto note = [&first](const Status& st) {
    if (first.ok() && !st.ok()) first = st;
  };
  auto context = [&](const PairKey& key, bool sending) {
    PairContext c;
    c.spec = &spec_;
    c.peer = key.peer;
    c.lane = key.lane;
    c.gpu = gpu;
    c.geometry = geometry;
    c.deadline = deadline;
    c.where = "rank " + std::to_string(self) + (sending ? " connecting to rank " : " connecting from rank ") +
              std::to_string(key.peer) + " (" + LaneName(key.lane) + ")";
    return c;
  };

  // 1. Every receive side makes its FIFO and offers it before waiting for anything.
  std::vector<Pending> pending(recvs.size());
  for (size_t i = 0; i < recvs.size(); ++i) {
    Pending& p = pending[i];
    p.pair = context(recvs[i], false);
    p.medium = media_->Get(ChooseMedium(recvs[i].peer, gpu));
    OfferWire offer{};
    offer.magic = kLinkMagic;
    offer.medium = static_cast<uint32_t>(p.medium->kind());
    offer.lane = recvs[i].lane;
    offer.slot_bytes = geometry.slot_bytes;
    offer.ll_slot_bytes = geometry.ll_slot_bytes;
    p.status = p.medium->Create(p.pair, &p.made, &offer.blob);
    offer.ok = p.status.ok() ? 1 : 0;
    PutText(offer.why, p.status.message());
    note(p.status);
    note(exchange_->Send(recvs[i].peer, PairTag(kTagPeerOffer, recvs[i].peer, self, recvs[i].lane), &offer,
                         sizeof(offer)));
  }
  // 2. What must wait for the sender (network accepts) runs while this rank answers.
  std::thread acceptor([&] {
    for (Pending& p : pending) {
      if (p.status.ok()) p.made.accept_status = p.medium->Accept(p.pair, &p.made);
    }
  });
  // 3. Every send side opens what it was offered, and answers.
  std::vector<FifoLink> links;
  for (const PairKey& key : sends) {
    const PairContext pair = context(key, true);
    std::string msg;
    Status st = exchange_->Recv(key.peer, PairTag(kTagPeerOffer, self, key.peer, key.lane), &msg, deadline, abort);
    if (!st.ok()) {
      if (st.code() == base::Code::kTimeout) {
        const std::string what = key.lane == kP2pLane ? "the matching ringoRecv" : "its side of the connection";
        st = base::Timeout(pair.where + ": no offer within " + std::to_string(spec_.timeout_ms) + " ms (rank " +
                           std::to_string(key.peer) + " has not posted " + what + ")")
                 .WithOrigin(key.peer, "it never offered the FIFO rank " + std::to_string(self) + " sends to");
      } else {
        st = st.WithContext(pair.where);
      }
      note(st);
      continue;  // no offer: nobody waits for an answer
    }
    OfferWire offer{};
    const Medium expect = ChooseMedium(key.peer, gpu);
    if (msg.size() != sizeof(offer)) {
      st = base::RemoteError(pair.where + ": a malformed offer").WithOrigin(key.peer, "a malformed offer");
    } else {
      std::memcpy(&offer, msg.data(), sizeof(offer));
      if (offer.magic != kLinkMagic || offer.lane != key.lane) {
        st = base::RemoteError(pair.where + ": a malformed offer").WithOrigin(key.peer, "a malformed offer");
      } else if (offer.ok != 1) {
        st = base::RemoteError(pair.where + ": it could not make its FIFO: " + GetText(offer.why))
                 .WithOrigin(key.peer, GetText(offer.why));
      } else if (offer.medium != static_cast<uint32_t>(expect)) {
        st = base::RemoteError(pair.where + ": it offered a FIFO in " + MediumName(static_cast<Medium>(offer.medium)) +
                               " where this rank expects " + MediumName(expect));
      } else if (offer.slot_bytes != geometry.slot_bytes || offer.ll_slot_bytes != geometry.ll_slot_bytes) {
        st = base::RemoteError(pair.where + ": its FIFO has " + std::to_string(offer.slot_bytes) +
                               "-byte slots where this rank expects " + std::to_string(geometry.slot_bytes) +
                               " (do the ranks share RINGO_SLOT_BYTES?)");
      }
    }
    if (st.ok()) {
      auto opened = media_->Get(expect)->Open(pair, offer.blob);
      if (opened.ok()) links.push_back(std::move(opened).value());
      else st = opened.status();
    }
    AnswerWire answer{};
    answer.magic = kLinkMagic;
    answer.ok = st.ok() ? 1 : 0;
    answer.lane = key.lane;
    answer.probe_addr = reinterpret_cast<uint64_t>(ProbeWord());
    answer.probe_value = *ProbeWord();
    PutText(answer.why, st.message());
    note(st);
    note(exchange_->Send(key.peer, PairTag(kTagPeerAck, self, key.peer, key.lane), &answer, sizeof(answer)));
  }
  acceptor.join();
  // 4. Every receive side hears whether its sender opened the FIFO.
  for (size_t i = 0; i < recvs.size(); ++i) {
    Pending& p = pending[i];
    std::string msg;
    Status st = exchange_->Recv(recvs[i].peer, PairTag(kTagPeerAck, recvs[i].peer, self, recvs[i].lane), &msg,
                                deadline, abort);
    if (!st.ok()) {
      if (p.status.ok()) p.medium->Forget(p.pair, &p.made);
      if (st.code() == base::Code::kTimeout) {
        const std::string what = recvs[i].lane == kP2pLane ? "the matching ringoSend" : "its side of the connection";
        st = base::Timeout(p.pair.where + ": no answer within " + std::to_string(spec_.timeout_ms) + " ms (rank " +
                           std::to_string(recvs[i].peer) + " has not posted " + what + ")")
                 .WithOrigin(recvs[i].peer,
                             "it never opened the FIFO rank " + std::to_string(self) + " receives on");
      } else {
        st = st.WithContext(p.pair.where);
      }
      note(st);
      continue;
    }
    AnswerWire answer{};
    const bool well_formed = msg.size() == sizeof(answer);
    if (well_formed) std::memcpy(&answer, msg.data(), sizeof(answer));
    const bool opened = well_formed && answer.magic == kLinkMagic && answer.ok == 1;
    if (!p.status.ok()) continue;  // this side failed: said so in its offer
    if (opened && !p.made.accept_status.ok()) {
      (void)p.medium->Settle(p.pair, &p.made, false, SenderProbe());
      note(p.made.accept_status);
      continue;
    }
    auto settled = p.medium->Settle(p.pair, &p.made, opened, SenderProbe{answer.probe_addr, answer.probe_value});
    if (!well_formed || answer.magic != kLinkMagic) {
      note(base::RemoteError(p.pair.where + ": a malformed answer").WithOrigin(recvs[i].peer, "a malformed answer"));
    } else if (!opened) {
      note(base::RemoteError(p.pair.where + ": it could not open this rank's FIFO: " + GetText(answer.why))
               .WithOrigin(recvs[i].peer, GetText(answer.why)));
    } else if (!settled.ok()) {
      note(settled.status());
    } else {
      links.push_back(std::move(settled).value());
    }
  }
  RETURN_IF_ERROR(first);
  // Sends first, then receives, each in the order asked.
  std::vector<FifoLink> ordered;
  auto take = [&](const PairKey& key, bool sending) {
    for (FifoLink& l : links) {
      if (l.memory != nullptr && l.sending == sending && l.peer == key.peer && l.lane == key.lane) {
        ordered.push_back(std::move(l));
        l.memory = nullptr;
        return;
      }
    }
  };
  for (const PairKey& key : sends) take(key, true);
  for (const PairKey& key : recvs) take(key, false);
  if (ordered.size() != sends.size() + recvs.size()) {
    return base::Internal("a pair was asked for twice in one Connect");
  }
  return ordered;
}

}  // namespace ringo::transport
