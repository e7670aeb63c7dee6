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

// One Connect call: its geometry, deadline and abort flag, and the first
// failure of any pair (every pair is still answered, so that no peer waits
// for a message this rank would not send).
class Connector::Round {
 public:
  Round(Connector& c, const FifoGeometry& geometry, bool gpu, const std::atomic<bool>* abort)
      : c_(c), self_(c.spec_.rank), geometry_(geometry), gpu_(gpu), abort_(abort),
        deadline_(DeadlineAfterMs(c.spec_.timeout_ms)) {}

  const Status& first() const { return first_; }

  // 1. A receive side makes its FIFO and offers it (or says why it could not).
  void Offer(const PairKey& key, Pending* p) {
    p->pair = Pair(key, false);
    p->medium = c_.media_->Get(c_.ChooseMedium(key.peer, gpu_));
    OfferWire offer{};
    offer.magic = kLinkMagic;
    offer.medium = static_cast<uint32_t>(p->medium->kind());
    offer.lane = key.lane;
    offer.slot_bytes = geometry_.slot_bytes;
    offer.ll_slot_bytes = geometry_.ll_slot_bytes;
    p->status = p->medium->Create(p->pair, &p->made, &offer.blob);
    offer.ok = p->status.ok() ? 1 : 0;
    PutText(offer.why, p->status.message());
    Note(p->status);
    Note(c_.exchange_->Send(key.peer, PairTag(kTagPeerOffer, key.peer, self_, key.lane), &offer, sizeof(offer)));
  }

  // 3. A send side opens what it was offered, and answers.
  void OpenOffered(const PairKey& key, std::vector<FifoLink>* links) {
    const PairContext pair = Pair(key, true);
    std::string msg;
    Status st = c_.exchange_->Recv(key.peer, PairTag(kTagPeerOffer, self_, key.peer, key.lane), &msg, deadline_, abort_);
    if (!st.ok()) {
      Note(Silent(pair, key, st, /*offer=*/true));
      return;  // no offer: nobody waits for an answer
    }
    OfferWire offer{};
    const Medium expect = c_.ChooseMedium(key.peer, gpu_);
    st = CheckOffer(pair, key, msg, expect, &offer);
    if (st.ok()) {
      auto opened = c_.media_->Get(expect)->Open(pair, offer.blob);
      if (opened.ok()) {
        links->push_back(std::move(opened).value());
      } else {
        st = opened.status();
      }
    }
    AnswerWire answer{};
    answer.magic = kLinkMagic;
    answer.ok = st.ok() ? 1 : 0;
    answer.lane = key.lane;
    answer.probe_addr = reinterpret_cast<uint64_t>(ProbeWord());
    answer.probe_value = *ProbeWord();
    PutText(answer.why, st.message());
    Note(st);
    Note(c_.exchange_->Send(key.peer, PairTag(kTagPeerAck, self_, key.peer, key.lane), &answer, sizeof(answer)));
  }

  // 4. A receive side hears whether its sender opened the FIFO, and settles it.
  void HearAnswer(const PairKey& key, Pending& p, std::vector<FifoLink>* links) {
    std::string msg;
    Status st = c_.exchange_->Recv(key.peer, PairTag(kTagPeerAck, key.peer, self_, key.lane), &msg, deadline_, abort_);
    if (!st.ok()) {
      if (p.status.ok()) p.medium->Forget(p.pair, &p.made);
      Note(Silent(p.pair, key, st, /*offer=*/false));
      return;
    }
    AnswerWire answer{};
    const bool well_formed = msg.size() == sizeof(answer);
    if (well_formed) std::memcpy(&answer, msg.data(), sizeof(answer));
    const bool opened = well_formed && answer.magic == kLinkMagic && answer.ok == 1;
    if (!p.status.ok()) return;  // this side failed: said so in its offer
    if (opened && !p.made.accept_status.ok()) {
      (void)p.medium->Settle(p.pair, &p.made, false, SenderProbe());
      Note(p.made.accept_status);
      return;
    }
    auto settled = p.medium->Settle(p.pair, &p.made, opened, SenderProbe{answer.probe_addr, answer.probe_value});
    if (!well_formed || answer.magic != kLinkMagic) {
      Note(base::RemoteError(p.pair.where + ": a malformed answer").WithOrigin(key.peer, "a malformed answer"));
    } else if (!opened) {
      Note(base::RemoteError(p.pair.where + ": it could not open this rank's FIFO: " + GetText(answer.why))
               .WithOrigin(key.peer, GetText(answer.why)));
    } else if (!settled.ok()) {
      Note(settled.status());
    } else {
      links->push_back(std::move(settled).value());
    }
  }

 private:
  void Note(const Status& st) {
    if (first_.ok() && !st.ok()) first_ = st;
  }

  PairContext Pair(const PairKey& key, bool sending) const {
    PairContext c;
    c.spec = &c_.spec_;
    c.peer = key.peer;
    c.lane = key.lane;
    c.gpu = gpu_;
    c.geometry = geometry_;
    c.deadline = deadline_;
    c.where = "rank " + std::to_string(self_) + (sending ? " connecting to rank " : " connecting from rank ") +
              std::to_string(key.peer) + " (" + LaneName(key.lane) + ")";
    return c;
  }

  // The peer sent no offer (or no answer) in time: name it and what it has
  // not posted; another failure of the wait keeps its words.
  Status Silent(const PairContext& pair, const PairKey& key, const Status& st, bool offer) const {
    if (st.code() != base::Code::kTimeout) return st.WithContext(pair.where);
    const char* call = offer ? "ringoRecv" : "ringoSend";
    const std::string what = key.lane == kP2pLane ? std::string("the matching ") + call : "its side of the connection";
    return base::Timeout(pair.where + ": no " + (offer ? "offer" : "answer") + " within " +
                         std::to_string(c_.spec_.timeout_ms) + " ms (rank " + std::to_string(key.peer) +
                         " has not posted " + what + ")")
        .WithOrigin(key.peer, offer ? "it never offered the FIFO rank " + std::to_string(self_) + " sends to"
                                    : "it never opened the FIFO rank " + std::to_string(self_) + " receives on");
  }

  // The offer `msg` is well formed and for what this rank expects.
  Status CheckOffer(const PairContext& pair, const PairKey& key, const std::string& msg, Medium expect,
                    OfferWire* offer) const {
    if (msg.size() != sizeof(*offer)) {
      return base::RemoteError(pair.where + ": a malformed offer").WithOrigin(key.peer, "a malformed offer");
    }
    std::memcpy(offer, msg.data(), sizeof(*offer));
    if (offer->magic != kLinkMagic || offer->lane != key.lane) {
      return base::RemoteError(pair.where + ": a malformed offer").WithOrigin(key.peer, "a malformed offer");
    }
    if (offer->ok != 1) {
      return base::RemoteError(pair.where + ": it could not make its FIFO: " + GetText(offer->why))
          .WithOrigin(key.peer, GetText(offer->why));
    }
    if (offer->medium != static_cast<uint32_t>(expect)) {
      return base::RemoteError(pair.where + ": it offered a FIFO in " + MediumName(static_cast<Medium>(offer->medium)) +
                               " where this rank expects " + MediumName(expect));
    }
    if (offer->slot_bytes != geometry_.slot_bytes || offer->ll_slot_bytes != geometry_.ll_slot_bytes) {
      return base::RemoteError(pair.where + ": its FIFO has " + std::to_string(offer->slot_bytes) +
                               "-byte slots where this rank expects " + std::to_string(geometry_.slot_bytes) +
                               " (do the ranks share RINGO_SLOT_BYTES?)");
    }
    return Status();
  }

  Connector& c_;
  const int self_;
  const FifoGeometry geometry_;
  const bool gpu_;
  const std::atomic<bool>* abort_;
  const Deadline deadline_;
  Status first_;
};

namespace {

// `links` (sends and receives as they were made) in the order asked: sends,
// then receives, each in its list's order.
StatusOr<std::vector<FifoLink>> InOrderAsked(std::vector<FifoLink> links, const std::vector<PairKey>& sends,
                                             const std::vector<PairKey>& recvs) {
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

}  // namespace

StatusOr<std::vector<FifoLink>> Connector::Connect(const std::vector<PairKey>& sends, const std::vector<PairKey>& recvs,
                                                   const FifoGeometry& geometry, bool gpu,
                                                   const std::atomic<bool>* abort) {
  if (!exchange_->CarriesMessages()) return base::Internal("connecting pairs needs an exchange that carries messages");
  Round round(*this, geometry, gpu, abort);
  // 1. Every receive side makes its FIFO and offers it before waiting for anything.
  std::vector<Pending> pending(recvs.size());
  for (size_t i = 0; i < recvs.size(); ++i) round.Offer(recvs[i], &pending[i]);
  // 2. What must wait for the sender (network accepts) runs while this rank answers.
  std::thread acceptor([&] {
    for (Pending& p : pending) {
      if (p.status.ok()) p.made.accept_status = p.medium->Accept(p.pair, &p.made);
    }
  });
  // 3. Every send side opens what it was offered, and answers.
  std::vector<FifoLink> links;
  for (const PairKey& key : sends) round.OpenOffered(key, &links);
  acceptor.join();
  // 4. Every receive side hears whether its sender opened the FIFO.
  for (size_t i = 0; i < recvs.size(); ++i) round.HearAnswer(recvs[i], pending[i], &links);
  RETURN_IF_ERROR(round.first());
  return InOrderAsked(std::move(links), sends, recvs);
}

}  // namespace ringo::transport
