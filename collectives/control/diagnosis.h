// The hang diagnosis: where every rank of a communicator is, asked over the
// control service (transport/bootstrap/control.h) when a wait has lasted
// longer than RINGO_STALL_MS, and said once on every rank.
//
// A rank whose wait passes the threshold (counter.h's StallHook; the
// point-to-point engine's own waits) asks every rank where it is in this
// communicator: the operation it runs and since when, the collective it
// last finished and how long ago, and, when it runs none, whether the
// thread that drives this communicator is inside another Ringo call (which,
// on which communicator) or outside Ringo, and for how long. From the
// answers it names the ranks that have not entered the collective it waits
// in (or, where every rank has, ranks that run it with different wire
// formats: ringoCommSetWire or RINGO_WIRE set unlike on some rank, whose
// exchanges never meet) and logs the diagnosis (WARN), once per call; a rank that does not
// answer is named with what can be known: its control connection closed,
// or open but silent, and where it shares this host, its process's state
// (running, stopped, gone). A rank asked about a collective it has not
// entered says so in its own log, once. The diagnosis goes into the
// timeout's error; RINGO_STALL_ABORT=1 fails the wait right after it.
//
// Thread safety: OnStall from any of the communicator's waiting threads
// (one diagnosis per call); the answers on the control service's thread.
#ifndef RINGO_COLLECTIVES_CONTROL_DIAGNOSIS_H_
#define RINGO_COLLECTIVES_CONTROL_DIAGNOSIS_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/control/recorder.h"
#include "collectives/control/thread_call.h"
#include "transport/bootstrap/exchange.h"
#include "transport/connect/peer_info.h"
#include "transport/fifo/counter.h"

namespace ringo::collectives {

struct DiagnosisSetup {
  int rank = 0;
  int nranks = 1;
  uint64_t comm_id = 0;
  transport::Exchange* exchange = nullptr;  // its control service and members
  const FlightRecorder* recorder = nullptr;
  const std::atomic<ThreadCall*>* driver = nullptr;  // the thread that last called this communicator
  // How this rank runs its current collective ("ring", "wire bf16", ...; ""
  // between calls): ranks that run one call by different wires are named.
  const std::atomic<const char*>* engine = nullptr;
  std::vector<transport::PeerInfo> peers;            // every rank's record (host, process)
  int64_t stall_ms = 0;                              // 0: no diagnosis
  bool stall_abort = false;
  int64_t answer_ms = 1000;                          // how long a rank is given to answer
};

class Diagnosis {
 public:
  // Registers this rank's answers on the exchange's control service (where
  // it has one).
  explicit Diagnosis(DiagnosisSetup setup);
  ~Diagnosis();
  Diagnosis(const Diagnosis&) = delete;
  Diagnosis& operator=(const Diagnosis&) = delete;

  // The hook every wait of this communicator carries (null when off).
  const transport::StallHook* hook() const { return setup_.stall_ms > 0 ? &hook_ : nullptr; }

  // Asks every rank and returns the diagnosis of the wait of `coll` #`seq`
  // (logged once per call; a second wait of the same call gets the text).
  std::string OnStall(const char* coll, uint64_t seq, int waited_on, int64_t waited_ms);

  // The diagnosis this rank made of call #`seq`, or "" (none made). So that
  // an error of that call relayed from another rank (whose diagnosis may
  // not have travelled whole) carries this rank's own.
  std::string TextFor(uint64_t seq);

  // What this rank answers to `request` from rank `src` (its handler).
  std::string Answer(int src, const std::string& request);

 private:
  DiagnosisSetup setup_;
  transport::StallHook hook_;
  bool registered_ = false;
  std::mutex mu_;
  uint64_t diagnosed_seq_ = 0;      // GUARDED_BY(mu_): the call last diagnosed
  std::string diagnosed_text_;      // GUARDED_BY(mu_)
  std::mutex told_mu_;
  uint64_t told_seq_ = 0;           // GUARDED_BY(told_mu_): the call this rank last said it had not entered
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_CONTROL_DIAGNOSIS_H_
