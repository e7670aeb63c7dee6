// The bootstrap root: one thread, one poll loop, serving one communicator's
// all-gathers. Connections that never identify themselves as ranks (garbage,
// port scanners, strangers) are dropped or ignored; a protocol violation by a
// rank, a rank count that ranks disagree on, a duplicate rank, a rank that
// disconnects mid-round, or a deadline that passes is reported to every
// connected rank as a kError message. The root then lingers for another
// timeout, answering every rank that connects late with the same error (so
// it learns why instead of finding nobody listening), and exits.
#include <poll.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/logging.h"
#include "transport/bootstrap/internal/protocol.h"

namespace ringo::transport::internal {

base::Status ValidateHeader(const WireHeader& h) {
  if (h.magic != kWireMagic) return base::RemoteError("bad magic (not a Ringo bootstrap peer)");
  if (h.version != kWireVersion) {
    return base::RemoteError("bootstrap protocol version " + std::to_string(h.version) + ", expected " +
                             std::to_string(kWireVersion));
  }
  switch (static_cast<MsgType>(h.type)) {
    case MsgType::kHello:
      if (h.length != 0) return base::RemoteError("hello with a payload");
      return base::OkStatus();
    case MsgType::kGather:
      if (h.length > kMaxGatherBytes) return base::RemoteError("gather payload too large");
      return base::OkStatus();
    case MsgType::kGatherResult:
      if (h.nranks <= 0 || h.length > kMaxGatherBytes * static_cast<uint64_t>(h.nranks)) {
        return base::RemoteError("gather result too large");
      }
      return base::OkStatus();
    case MsgType::kError:
      if (h.length > kMaxErrorBytes) return base::RemoteError("error message too long");
      return base::OkStatus();
  }
  return base::RemoteError("unknown message type " + std::to_string(h.type));
}

namespace {

using base::Code;

constexpr size_t kMaxConnections = 4096;

// The roots that have not yet told their ranks a verdict, by the process
// that runs them (a forked child inherits this map, not the threads) and
// nonce (a count: two communicators may share a RINGO_COMM_ID over time).
struct Untold {
  std::mutex mu;
  std::condition_variable told;
  std::map<std::pair<pid_t, uint64_t>, int> roots;  // GUARDED_BY(mu)
};

Untold& UntoldRoots() {
  static Untold* const untold = new Untold();  // never destroyed: detached roots outlive main
  return *untold;
}

void MarkTold(uint64_t nonce) {
  Untold& u = UntoldRoots();
  std::lock_guard<std::mutex> lock(u.mu);
  auto it = u.roots.find({getpid(), nonce});
  if (it != u.roots.end() && --it->second == 0) u.roots.erase(it);
  u.told.notify_all();
}

struct Conn {
  Socket socket;
  std::string buffer;  // received, not yet parsed
  int rank = -1;       // -1 until a valid hello
  bool open = true;
};

class Root {
 public:
  Root(Socket listener, uint64_t nonce, int64_t timeout_ms)
      : listener_(std::move(listener)), nonce_(nonce), timeout_ms_(timeout_ms),
        deadline_(DeadlineAfterMs(timeout_ms)) {}

  void Run() {
    RunUntilDone();
    if (!told_) MarkTold(nonce_);
    RINGO_LOG(INFO) << "bootstrap root exits";
  }

 private:
  void RunUntilDone() {
    while (!done_) {
      PollOnce();
      if (done_) break;
      if (failed_) {
        if (Clock::now() >= linger_until_) done_ = true;
      } else if (Clock::now() >= deadline_) {
        OnDeadline();
      }
    }
  }

  void PollOnce() {
    std::vector<pollfd> fds;
    fds.push_back({listener_.fd(), POLLIN, 0});
    for (Conn& c : conns_) fds.push_back({c.open ? c.socket.fd() : -1, POLLIN, 0});
    int rc = ::poll(fds.data(), fds.size(), 100);
    if (rc <= 0) return;
    if (fds[0].revents & POLLIN) AcceptAll();
    for (size_t i = 1; i < fds.size() && !done_; ++i) {
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) ReadFrom(i - 1);
    }
  }

  void AcceptAll() {
    while (conns_.size() < kMaxConnections) {
      auto s = listener_.Accept(Clock::now());
      if (!s.ok()) return;
      Conn c;
      c.socket = std::move(s).value();
      conns_.push_back(std::move(c));
    }
  }

  void ReadFrom(size_t i) {
    char chunk[65536];
    auto n = conns_[i].socket.RecvSome(chunk, sizeof(chunk));
    if (!n.ok()) return OnClose(i);
    conns_[i].buffer.append(chunk, *n);
    while (!done_ && conns_[i].open && Parse(i)) {
    }
  }

  // Handles one complete message in conns_[i].buffer; false if none is complete.
  bool Parse(size_t i) {
    Conn& c = conns_[i];
    if (c.buffer.size() < sizeof(WireHeader)) return false;
    WireHeader h;
    std::memcpy(&h, c.buffer.data(), sizeof(h));
    if (failed_) {
      // A rank that arrives after the root gave up learns why.
      if (ValidateHeader(h).ok() && h.nonce == nonce_) SendError(i, fail_code_, fail_message_);
      Drop(i);
      return false;
    }
    base::Status valid = ValidateHeader(h);
    if (valid.ok() && h.type != static_cast<uint16_t>(MsgType::kHello) &&
        h.type != static_cast<uint16_t>(MsgType::kGather)) {
      valid = base::RemoteError("unexpected message type " + std::to_string(h.type));
    }
    if (!valid.ok()) {
      if (c.rank < 0) {
        RINGO_LOG(WARN) << "bootstrap root: dropping a connection that is not a Ringo rank: " << valid.message();
        Drop(i);
      } else {
        Fail(Code::kRemoteError, "rank " + std::to_string(c.rank) + " sent a malformed message: " + valid.message());
      }
      return false;
    }
    if (c.buffer.size() < sizeof(WireHeader) + h.length) return false;
    std::string payload = c.buffer.substr(sizeof(WireHeader), h.length);
    c.buffer.erase(0, sizeof(WireHeader) + h.length);
    if (h.type == static_cast<uint16_t>(MsgType::kHello)) OnHello(i, h);
    else OnGather(i, h, std::move(payload));
    return true;
  }

  void OnHello(size_t i, const WireHeader& h) {
    if (conns_[i].rank >= 0) {
      return Fail(Code::kRemoteError, "rank " + std::to_string(conns_[i].rank) + " said hello twice");
    }
    if (h.nonce != nonce_) {
      SendError(i, Code::kInvalidArgument,
                "the unique id belongs to another communicator (nonce mismatch)");
      return Drop(i);
    }
    if (h.nranks <= 0 || h.rank < 0 || h.rank >= h.nranks) {
      return Reject(i, "a rank announced rank " + std::to_string(h.rank) + " of " + std::to_string(h.nranks));
    }
    if (nranks_ < 0) {
      nranks_ = h.nranks;
      rank_conn_.assign(nranks_, -1);
      round_.assign(nranks_, std::string());
      has_.assign(nranks_, false);
      left_.assign(nranks_, false);
    } else if (h.nranks != nranks_) {
      return Reject(i, "ranks disagree on the rank count: rank " + std::to_string(h.rank) +
                                              " says " + std::to_string(h.nranks) + ", an earlier rank said " +
                                              std::to_string(nranks_));
    }
    if (rank_conn_[h.rank] >= 0) return Reject(i, "two processes joined as rank " + std::to_string(h.rank));
    rank_conn_[h.rank] = static_cast<int>(i);
    conns_[i].rank = h.rank;
    ++joined_;
  }

  // A hello that breaks the communicator: the sender (not registered as a
  // rank, so Fail() would skip it) and every registered rank are told.
  void Reject(size_t i, const std::string& why) {
    SendError(i, Code::kInvalidArgument, why);
    Drop(i);
    Fail(Code::kInvalidArgument, why);
  }

  void OnGather(size_t i, const WireHeader& h, std::string payload) {
    int r = conns_[i].rank;
    if (r < 0) {
      RINGO_LOG(WARN) << "bootstrap root: data from a connection that never said hello; dropped";
      return Drop(i);
    }
    if (has_[r]) return Fail(Code::kRemoteError, "rank " + std::to_string(r) + " sent two messages in one round");
    for (int q = 0; q < nranks_; ++q) {
      if (left_[q]) {
        return Fail(Code::kRemoteError, "rank " + std::to_string(q) +
                                            " disconnected and cannot take part in this bootstrap round");
      }
    }
    round_[r] = std::move(payload);
    has_[r] = true;
    if (++round_count_ == nranks_) CompleteRound();
  }

  void CompleteRound() {
    std::string all;
    for (int r = 0; r < nranks_; ++r) {
      if (round_[r].size() != round_[0].size()) {
        return Fail(Code::kInvalidUsage, "ranks sent different sizes in one bootstrap round (rank 0: " +
                                             std::to_string(round_[0].size()) + " bytes, rank " + std::to_string(r) +
                                             ": " + std::to_string(round_[r].size()) + ")");
      }
      all += round_[r];
    }
    WireHeader h = MakeHeader(MsgType::kGatherResult, nonce_, -1, nranks_, all.size());
    Deadline d = DeadlineAfterMs(timeout_ms_);
    for (int r = 0; r < nranks_; ++r) {
      Conn& c = conns_[rank_conn_[r]];
      if (!c.socket.SendAll(&h, sizeof(h), d).ok() || !c.socket.SendAll(all.data(), all.size(), d).ok()) {
        return Fail(Code::kRemoteError, "rank " + std::to_string(r) + " went away during bootstrap");
      }
      round_[r].clear();
      has_[r] = false;
    }
    round_count_ = 0;
    deadline_ = DeadlineAfterMs(timeout_ms_);
  }

  void OnClose(size_t i) {
    int r = conns_[i].rank;
    Drop(i);
    if (r < 0 || failed_) return;
    if (round_count_ > 0 || joined_ < nranks_) {
      return Fail(Code::kRemoteError, "rank " + std::to_string(r) + " disconnected during bootstrap");
    }
    left_[r] = true;  // fine if nobody starts another round
    if (++closed_ == nranks_) done_ = true;
  }

  void OnDeadline() {
    if (nranks_ < 0) {
      RINGO_LOG(INFO) << "bootstrap root: no rank joined before the deadline";
      done_ = true;
      return;
    }
    std::string absent, silent;  // never joined; joined but not in this round
    for (int r = 0; r < nranks_; ++r) {
      std::string& list = rank_conn_[r] < 0 ? absent : silent;
      if (rank_conn_[r] < 0 || (round_count_ > 0 && !has_[r])) list += (list.empty() ? "" : ",") + std::to_string(r);
    }
    if (absent.empty() && silent.empty()) {
      done_ = true;  // idle ranks that never closed: nothing is pending
      return;
    }
    std::string msg;
    if (!absent.empty()) msg = "rank(s) " + absent + " never joined";
    if (!silent.empty()) msg += std::string(msg.empty() ? "" : "; ") + "rank(s) " + silent + " did not take part";
    Fail(Code::kTimeout, msg + " within " + std::to_string(timeout_ms_) + " ms of bootstrap");
  }

  void SendError(size_t i, Code code, const std::string& msg) {
    std::string text = msg.substr(0, kMaxErrorBytes);
    WireHeader h = MakeHeader(MsgType::kError, nonce_, static_cast<int>(code), nranks_, text.size());
    Deadline d = DeadlineAfterMs(1000);
    if (conns_[i].socket.SendAll(&h, sizeof(h), d).ok()) conns_[i].socket.SendAll(text.data(), text.size(), d).ok();
  }

  void Fail(Code code, const std::string& msg) {
    if (failed_) return;
    RINGO_LOG(WARN) << "bootstrap root: " << msg;
    for (size_t i = 0; i < conns_.size(); ++i) {
      if (conns_[i].open && conns_[i].rank >= 0) SendError(i, code, msg);
    }
    failed_ = true;
    fail_code_ = code;
    fail_message_ = msg;
    linger_until_ = DeadlineAfterMs(timeout_ms_);
    told_ = true;
    MarkTold(nonce_);
  }

  void Drop(size_t i) {
    conns_[i].socket.Close();
    conns_[i].open = false;
  }

  Socket listener_;
  uint64_t nonce_;
  int64_t timeout_ms_;
  Deadline deadline_;
  std::vector<Conn> conns_;
  int nranks_ = -1;
  int joined_ = 0;
  int closed_ = 0;
  std::vector<int> rank_conn_;
  std::vector<std::string> round_;
  std::vector<bool> has_;
  std::vector<bool> left_;  // ranks that disconnected between rounds
  int round_count_ = 0;
  bool done_ = false;
  // After a failure: the error, told to late arrivals until linger_until_.
  bool failed_ = false;
  bool told_ = false;  // every rank has had the verdict (MarkTold called)
  Code fail_code_ = Code::kOk;
  std::string fail_message_;
  Deadline linger_until_;
};

}  // namespace

void StartRootThread(Socket listener, uint64_t nonce, int64_t timeout_ms) {
  {
    Untold& u = UntoldRoots();
    std::lock_guard<std::mutex> lock(u.mu);
    ++u.roots[{getpid(), nonce}];
  }
  std::thread([l = std::move(listener), nonce, timeout_ms]() mutable {
    Root root(std::move(l), nonce, timeout_ms);
    root.Run();
  }).detach();
}

void AwaitRootVerdict(uint64_t nonce, Deadline deadline) {
  Untold& u = UntoldRoots();
  std::unique_lock<std::mutex> lock(u.mu);
  const std::pair<pid_t, uint64_t> key{getpid(), nonce};
  u.told.wait_until(lock, deadline, [&] { return u.roots.count(key) == 0; });
}

}  // namespace ringo::transport::internal
