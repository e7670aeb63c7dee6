#include "collectives/control/diagnosis.h"

#include <cstdio>
#include <cstring>
#include <sstream>
#include <utility>

#include <unistd.h>

#include "base/logging.h"
#include "transport/peer_state.h"

namespace ringo::collectives {
namespace {

constexpr uint32_t kWhereMagic = 0x57474e52;  // "RNGW"

// What the asker sends: who waits, in what, for how long.
struct WhereRequest {
  uint32_t magic;
  int32_t asker;
  uint64_t seq;
  int64_t waited_ms;
  char coll[24];
};

// What a rank answers about itself in this communicator.
struct WhereAnswer {
  uint32_t magic;
  int32_t rank;
  int32_t pid;
  uint8_t running;
  uint8_t running_op;
  uint8_t done_op;
  uint8_t driver_known;  // 1: the thread that drives this communicator is known
  uint64_t running_seq;
  int64_t running_ms;
  uint64_t done_seq;
  int64_t done_ago_ms;  // -1: nothing finished yet
  uint64_t collectives_done;
  uint64_t inside_comm;  // the driver's call: its communicator, 0 outside Ringo
  int64_t driver_ms;     // how long it has been inside that call, or outside Ringo
  char inside_fn[32];    // the C function it is in, "" outside Ringo
  char engine[24];       // how it runs its collective: "ring", "wire bf16", ...
};

std::string Seconds(int64_t ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", static_cast<double>(ms) / 1000.0);
  return buf;
}

std::string CommName(uint64_t id) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(id));
  return buf;
}

bool IsCollective(TraceOp op) { return static_cast<uint8_t>(op) < static_cast<uint8_t>(TraceOp::kSend); }

// "Send/Recv" for point-to-point, the collective's name otherwise.
std::string OpName(TraceOp op, uint64_t seq) {
  if (!IsCollective(op)) return std::string("point-to-point (") + TraceOpName(op) + ")";
  return std::string(TraceOpName(op)) + " #" + std::to_string(seq);
}

// What `a` says about where it is, as a phrase.
std::string Position(const WhereAnswer& a) {
  std::string s;
  if (a.running) {
    s = "it runs " + OpName(static_cast<TraceOp>(a.running_op), a.running_seq) + " (for " + Seconds(a.running_ms) + ")";
    return s;
  }
  s = a.done_ago_ms < 0 ? std::string("it has finished no collective yet")
                        : "it last finished " + OpName(static_cast<TraceOp>(a.done_op), a.done_seq) + " " +
                              Seconds(a.done_ago_ms) + " ago";
  if (a.driver_known) {
    if (a.inside_fn[0] != '\0') {
      s += ", and is inside " + std::string(a.inside_fn) +
           (a.inside_comm != 0 ? " on communicator " + CommName(a.inside_comm) : std::string()) + " for " +
           Seconds(a.driver_ms);
    } else {
      s += ", and is outside Ringo for " + Seconds(a.driver_ms);
    }
  }
  return s;
}

std::string RankList(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

std::string Diagnose(void* arg, const transport::WaitContext& ctx, int peer_rank, int64_t waited_ms) {
  return static_cast<Diagnosis*>(arg)->OnStall(ctx.coll, ctx.seq, peer_rank, waited_ms);
}

}  // namespace

Diagnosis::Diagnosis(DiagnosisSetup setup) : setup_(std::move(setup)) {
  hook_.after_ms = setup_.stall_ms;
  hook_.abort = setup_.stall_abort;
  hook_.diagnose = &Diagnose;
  hook_.arg = this;
  transport::ControlService* control = setup_.exchange != nullptr ? setup_.exchange->control() : nullptr;
  if (control != nullptr) {
    control->Register(setup_.exchange->context(), transport::ControlKind::kWhere,
                      [this](int src, const std::string& request) { return Answer(src, request); });
    registered_ = true;
  }
}

Diagnosis::~Diagnosis() {
  if (registered_) setup_.exchange->control()->Unregister(setup_.exchange->context(), transport::ControlKind::kWhere);
}

std::string Diagnosis::Answer(int src, const std::string& request) {
  WhereAnswer a{};
  a.magic = kWhereMagic;
  a.rank = setup_.rank;
  a.pid = static_cast<int32_t>(::getpid());
  const TraceClock clock = TraceClock::Now();
  const int64_t now = clock.MonoNs(clock.ref_ticks);
  auto ago_ms = [&](uint64_t ticks) { return (now - clock.MonoNs(ticks)) / 1000000; };
  const TracePosition p = setup_.recorder != nullptr ? setup_.recorder->Where() : TracePosition();
  a.running = p.running ? 1 : 0;
  a.running_op = static_cast<uint8_t>(p.running_op);
  a.running_seq = p.running_seq;
  a.running_ms = p.running ? ago_ms(p.running_since) : 0;
  a.done_op = static_cast<uint8_t>(p.done_op);
  a.done_seq = p.done_seq;
  a.done_ago_ms = p.done_at != 0 ? ago_ms(p.done_at) : -1;
  a.collectives_done = p.collectives_done;
  const char* engine = setup_.engine != nullptr ? setup_.engine->load(std::memory_order_acquire) : nullptr;
  if (engine != nullptr && p.running) std::strncpy(a.engine, engine, sizeof(a.engine) - 1);
  const ThreadCall* driver = setup_.driver != nullptr ? setup_.driver->load(std::memory_order_acquire) : nullptr;
  if (driver != nullptr) {
    a.driver_known = 1;
    const char* fn = driver->fn.load(std::memory_order_acquire);
    if (fn != nullptr) {
      std::strncpy(a.inside_fn, fn, sizeof(a.inside_fn) - 1);
      a.inside_comm = driver->comm.load(std::memory_order_relaxed);
    }
    a.driver_ms = ago_ms(driver->since.load(std::memory_order_relaxed));
  }
  // Told that another rank waits in a collective this rank has not entered:
  // say so here too, once per call.
  WhereRequest req{};
  if (request.size() == sizeof(req)) {
    std::memcpy(&req, request.data(), sizeof(req));
    req.coll[sizeof(req.coll) - 1] = '\0';
    const bool entered = p.running && p.running_seq == req.seq;
    if (req.magic == kWhereMagic && req.seq != 0 && !entered && std::strncmp(req.coll, "ringo", 5) != 0) {
      std::lock_guard<std::mutex> lock(told_mu_);
      if (told_seq_ != req.seq) {
        told_seq_ = req.seq;
        RINGO_LOG(WARN) << "rank " << setup_.rank << " (communicator " << CommName(setup_.comm_id) << "): rank " << src
                        << " has waited " << Seconds(req.waited_ms) << " in " << req.coll << " #" << req.seq
                        << ", which this rank has not entered: " << Position(a);
      }
    }
  }
  return std::string(reinterpret_cast<const char*>(&a), sizeof(a));
}

std::string Diagnosis::TextFor(uint64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  return seq != 0 && diagnosed_seq_ == seq ? diagnosed_text_ : std::string();
}

std::string Diagnosis::OnStall(const char* coll, uint64_t seq, int waited_on, int64_t waited_ms) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (diagnosed_seq_ == seq && seq != 0) return diagnosed_text_;
  }
  const std::string what = coll != nullptr ? coll : "?";
  const bool collective = std::strncmp(what.c_str(), "ringo", 5) != 0 && what != "point-to-point";
  transport::ControlService* control = setup_.exchange != nullptr ? setup_.exchange->control() : nullptr;
  WhereRequest req{};
  req.magic = kWhereMagic;
  req.asker = setup_.rank;
  req.seq = collective ? seq : 0;
  req.waited_ms = waited_ms;
  std::strncpy(req.coll, what.c_str(), sizeof(req.coll) - 1);
  const std::string request(reinterpret_cast<const char*>(&req), sizeof(req));

  std::ostringstream out;
  out << "Ringo hang diagnosis: rank " << setup_.rank << " has waited " << Seconds(waited_ms) << " in " << what;
  if (collective) out << " #" << seq;
  out << " (on rank " << waited_on << "; communicator " << CommName(setup_.comm_id) << ", " << setup_.nranks
      << " ranks; RINGO_STALL_MS=" << setup_.stall_ms << ")";
  std::vector<int> inside, missing;
  std::vector<std::pair<int, std::string>> engines;  // the ranks inside it, and how each runs it
  std::vector<std::string> lines;
  if (control == nullptr) {
    out << "\n  no control connections to ask the other ranks (a communicator of one process with no fabric)";
  } else {
    std::vector<std::string> answers(setup_.nranks);
    std::vector<base::Status> errors(setup_.nranks);
    std::vector<int> dsts;
    for (int r = 0; r < setup_.nranks; ++r) dsts.push_back(setup_.exchange->FabricRank(r));
    // Every request first, then every answer: one slow rank costs one answer_ms.
    auto got = control->AskAll(dsts, setup_.exchange->context(), transport::ControlKind::kWhere, request,
                               transport::DeadlineAfterMs(setup_.answer_ms));
    for (int r = 0; r < setup_.nranks; ++r) {
      if (got[r].ok()) answers[r] = *got[r];
      else errors[r] = got[r].status();
    }
    for (int r = 0; r < setup_.nranks; ++r) {
      WhereAnswer a{};
      if (errors[r].ok() && answers[r].size() == sizeof(a)) {
        std::memcpy(&a, answers[r].data(), sizeof(a));
        a.inside_fn[sizeof(a.inside_fn) - 1] = '\0';
        a.engine[sizeof(a.engine) - 1] = '\0';
      }
      if (!errors[r].ok() || a.magic != kWhereMagic) {
        std::string why;
        if (!errors[r].ok() && errors[r].code() == base::Code::kTimeout) {
          why = "did not answer within " + std::to_string(setup_.answer_ms) +
                " ms (its control connection is open but silent)";
        } else if (!errors[r].ok()) {
          why = "cannot be asked: " + errors[r].message();
        } else {
          why = "sent an answer that is not one";
        }
        const transport::PeerInfo* p = r < static_cast<int>(setup_.peers.size()) ? &setup_.peers[r] : nullptr;
        const transport::PeerInfo* me =
            setup_.rank < static_cast<int>(setup_.peers.size()) ? &setup_.peers[setup_.rank] : nullptr;
        if (p != nullptr && me != nullptr && p->host_hash == me->host_hash && p->pid > 0) {
          const transport::ProcessState state =
              transport::ProbeProcess(transport::ProcessId{p->pid, p->start_ticks});
          why += std::string("; its process (pid ") + std::to_string(p->pid) + ", this host) is " +
                 (state == transport::ProcessState::kStopped ? "stopped (by a signal or a debugger)"
                  : state == transport::ProcessState::kGone  ? "gone"
                                                              : "running");
        } else if (p != nullptr) {
          why += " (on another host: its process cannot be looked at from here)";
        }
        lines.push_back("rank " + std::to_string(r) + " " + why);
        missing.push_back(r);
        continue;
      }
      const bool entered = a.running && (!collective || a.running_seq == seq);
      if (entered && collective) {
        inside.push_back(r);
        engines.emplace_back(r, a.engine);
      } else if (collective) {
        lines.push_back("rank " + std::to_string(r) + " has not entered " + what + " #" + std::to_string(seq) + ": " +
                        Position(a));
        missing.push_back(r);
      } else {
        lines.push_back("rank " + std::to_string(r) + ": " + Position(a));
      }
    }
  }
  for (const std::string& l : lines) out << "\n  " << l;
  if (collective && !inside.empty()) out << "\n  waiting in it: rank" << (inside.size() > 1 ? "s " : " ") << RankList(inside);
  // Every rank in the call, but with different wire formats: their
  // exchanges never meet (one compresses over point-to-point pairs, the
  // other runs the ring or another wire).
  auto wire_of = [](const std::string& e) { return e.rfind("wire ", 0) == 0 ? e.substr(5) : std::string("none"); };
  bool wires_differ = false;
  const std::string* first_label = nullptr;  // the first rank's that said how it runs the call
  for (const auto& [r, e] : engines) {
    if (e.empty()) continue;
    if (first_label == nullptr) first_label = &e;
    wires_differ = wires_differ || wire_of(e) != wire_of(*first_label);
  }
  if (collective && missing.empty() && wires_differ) {
    out << "\n  every rank has entered it, but with different wire formats (each rank's ringoCommSetWire or "
           "RINGO_WIRE): ";
    for (size_t k = 0; k < engines.size(); ++k) {
      out << (k ? ", " : "") << "rank " << engines[k].first << " " << wire_of(engines[k].second)
          << (engines[k].second.empty() ? "?" : "");
    }
    out << "; their exchanges never meet";
  } else if (collective && missing.empty() && control != nullptr) {
    out << "\n  every rank has entered it: the wait is in the data path (a slow link or a peer that is slow to move)";
  }
  const std::string text = out.str();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (diagnosed_seq_ == seq && seq != 0) return diagnosed_text_;  // another channel's wait got there first
    diagnosed_seq_ = seq;
    diagnosed_text_ = text;
  }
  RINGO_LOG(WARN) << text;
  return text;
}

}  // namespace ringo::collectives
