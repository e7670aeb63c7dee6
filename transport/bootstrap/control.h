// The control service: what a rank answers while its data path is stalled
// or its communicator has failed. Requests travel over the communicator's
// message fabric (the mesh of bootstrap connections between processes,
// memory between threads), which hands them to the receiving rank's
// service thread instead of queuing them for a Recv; the handler
// registered for the request's context (a communicator) and kind answers,
// on that thread, whatever the rank's own threads are doing. The hang
// diagnosis asks every rank where it is; the failure agreement runs its
// rounds through it.
//
// Requests carry a number of the asking service's own; the answer goes
// back under a reply tag with that number, for which Ask() waits. A rank
// that does not answer by the deadline is reported as a timeout; one whose
// connection closed, at once (the fabric's Mailbox knows it is gone).
//
// Thread safety: every method from any thread. Handlers run on the service
// thread, one at a time, and must not block for long (they answer from
// state they read).
#ifndef RINGO_TRANSPORT_BOOTSTRAP_CONTROL_H_
#define RINGO_TRANSPORT_BOOTSTRAP_CONTROL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/status.h"
#include "transport/socket.h"

namespace ringo::transport {

class MessageFabric;

// What a request asks; handlers are registered per (context, kind).
enum class ControlKind : uint8_t {
  kWhere = 1,     // where is this rank in the communicator (the hang diagnosis)
  kAgree = 2,     // a round of the failure agreement
  kNotice = 3,    // a message that needs no answer beyond its receipt
  kClock = 4,     // this rank's wall clock (the flight recorder's offsets)
};

// Tags of the control traffic (exchange.h reserves the top byte 4 and 5).
inline constexpr uint64_t kTagControlRequest = uint64_t{4} << 56;
inline constexpr uint64_t kTagControlReply = uint64_t{5} << 56;
inline bool IsControlRequest(uint64_t tag) { return (tag >> 56) == 4; }

class ControlService {
 public:
  // `src` is the asking rank (the fabric's numbering); the returned string
  // is the answer.
  using Handler = std::function<std::string(int src, const std::string& request)>;

  explicit ControlService(MessageFabric* fabric);
  ~ControlService();  // stops the thread; pending requests go unanswered
  ControlService(const ControlService&) = delete;
  ControlService& operator=(const ControlService&) = delete;

  void Register(uint64_t context, ControlKind kind, Handler handler);
  // Removes the handler of (context, kind); waits until it does not run.
  void Unregister(uint64_t context, ControlKind kind);

  // Asks rank `dst` (the fabric's numbering) and waits for its answer
  // until `deadline`. A rank with no handler for (context, kind) answers
  // an error, which Ask returns as kRemoteError.
  base::StatusOr<std::string> Ask(int dst, uint64_t context, ControlKind kind, const std::string& request,
                                  Deadline deadline, const std::atomic<bool>* abort = nullptr);

  // Sends a request whose answer nobody waits for (none is sent back).
  base::Status Tell(int dst, uint64_t context, ControlKind kind, const std::string& request, Deadline deadline);

  // The same request to every rank of `dsts` at once, then every answer:
  // one rank that does not answer costs the deadline once, not once each.
  std::vector<base::StatusOr<std::string>> AskAll(const std::vector<int>& dsts, uint64_t context, ControlKind kind,
                                                  const std::string& request, Deadline deadline);

  // Called by the fabric for every control request it receives.
  void Deliver(int src, uint64_t context, uint64_t tag, std::string data);

 private:
  struct Request {
    int src;
    uint64_t context;
    uint64_t tag;
    std::string data;
  };
  void Serve();

  MessageFabric* const fabric_;
  std::atomic<uint64_t> next_id_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<Request> queue_;                                         // GUARDED_BY(mu_)
  std::map<std::pair<uint64_t, ControlKind>, Handler> handlers_;      // GUARDED_BY(mu_)
  std::pair<uint64_t, ControlKind> running_{0, ControlKind{}};         // GUARDED_BY(mu_)
  bool busy_ = false;                                                 // GUARDED_BY(mu_): a handler runs
  bool stop_ = false;                                                 // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_BOOTSTRAP_CONTROL_H_
