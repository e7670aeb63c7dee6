// A group's control channel: all-gathers among its members and, where the
// implementation carries them, tagged messages between two members. The
// bootstrap's root (bootstrap.h) serves one communicator's init with
// all-gathers only; after init a communicator keeps a FabricExchange over a
// message fabric (a Mesh of TCP connections between its processes, mesh.h,
// or a LocalFabric between ranks that are threads of one process), which
// lazy point-to-point connections and ringoCommSplit's children use.
//
// Members are numbered 0..nranks-1 within the exchange; a Subgroup names
// members of its parent in its own order and a context of its own, so its
// messages never meet the parent's or a sibling's.
//
// Thread safety: an Exchange object is used by one thread at a time (its
// communicator's); fabrics are thread-safe (parents and children share one).
#ifndef RINGO_TRANSPORT_BOOTSTRAP_EXCHANGE_H_
#define RINGO_TRANSPORT_BOOTSTRAP_EXCHANGE_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "base/status.h"
#include "transport/bootstrap/control.h"
#include "transport/socket.h"

namespace ringo::transport {

class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;

  // Gathers `bytes` from every member into `all` (nranks * bytes, in member
  // order). Every member must pass the same `bytes`. Collective.
  virtual base::Status AllGather(const void* mine, size_t bytes, void* all) = 0;
  base::Status Barrier();

  // Whether Send/Recv/Subgroup work (the bootstrap's root: no).
  virtual bool CarriesMessages() const { return false; }
  // Queues `bytes` for member `peer` under `tag` (ordered per (peer, tag));
  // does not wait for the peer. A message to oneself is allowed.
  virtual base::Status Send(int peer, uint64_t tag, const void* data, size_t bytes);
  // The next message from `peer` under `tag`: waits until `deadline`, or
  // until *abort (when given) is raised. A timeout names the peer.
  virtual base::Status Recv(int peer, uint64_t tag, std::string* data, Deadline deadline,
                            const std::atomic<bool>* abort = nullptr);
  // The members `members` (ranks of this exchange, in the new order; each
  // member passes the same list) under `context`, as this member sees them.
  virtual base::StatusOr<std::unique_ptr<Exchange>> Subgroup(uint64_t context, const std::vector<int>& members);
  // The control service of this member's fabric (control.h), a member's
  // rank on that fabric, and the context control requests of this group
  // name; no service (null) where the exchange has no fabric.
  virtual ControlService* control() { return nullptr; }
  virtual int FabricRank(int member) const { return member; }
  virtual uint64_t context() const { return 0; }
};

// A step every member must pass: each says whether its own part succeeded
// (`mine`). Returns `mine` if it failed, else an error naming the first
// member that could not `what`, else OK. Every member calls it even after a
// local failure, so the others fail at once instead of at the timeout.
base::Status AgreeOk(Exchange& exchange, const base::Status& mine, const std::string& what);

// Where tagged messages travel between the ranks of a root communicator
// (numbered as in that communicator), in contexts. Thread-safe.
class MessageFabric {
 public:
  virtual ~MessageFabric() = default;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  virtual base::Status Send(int dst, uint64_t context, uint64_t tag, const void* data, size_t bytes,
                            Deadline deadline) = 0;
  virtual base::Status Recv(int src, uint64_t context, uint64_t tag, std::string* data, Deadline deadline,
                            const std::atomic<bool>* abort) = 0;
  // This rank's control service (control.h), which answers the requests
  // that reach it over this fabric.
  virtual ControlService& control() = 0;
};

// Received messages by (source, context, tag), in arrival order, and the
// sources known to be gone. Thread-safe; shared by the fabrics.
class Mailbox {
 public:
  // Control requests (control.h) go to `sink` instead of a queue; null:
  // they are dropped.
  void SetControlSink(ControlService* sink);
  void Put(int src, uint64_t context, uint64_t tag, std::string data);
  // A source that will send nothing more (its connection closed): a Recv
  // that finds nothing queued from it fails with `why`.
  void MarkGone(int src, const std::string& why);
  base::Status Take(int src, uint64_t context, uint64_t tag, std::string* data, Deadline deadline,
                    const std::atomic<bool>* abort, int self_rank);
  void WakeAll();

 private:
  using Key = std::tuple<int, uint64_t, uint64_t>;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, std::deque<std::string>> queued_;  // GUARDED_BY(mu_)
  std::map<int, std::string> gone_;                // GUARDED_BY(mu_)
  ControlService* sink_ = nullptr;                 // GUARDED_BY(mu_)
};

// The fabric between ranks that are threads of one process: messages are
// handed over in memory.
class LocalFabric {
 public:
  explicit LocalFabric(int nranks) : nranks_(nranks) {}
  // Rank `rank`'s view (shares this fabric).
  static std::shared_ptr<MessageFabric> View(const std::shared_ptr<LocalFabric>& fabric, int rank);
  int nranks() const { return nranks_; }
  Mailbox& mailbox(int rank);

 private:
  const int nranks_;
  std::mutex mu_;
  std::map<int, std::unique_ptr<Mailbox>> boxes_;  // GUARDED_BY(mu_)
};

// An exchange over a fabric: `members` are fabric ranks in member order,
// all-gathers go to member 0 and back (two hops), messages are the fabric's
// under `context`.
class FabricExchange : public Exchange {
 public:
  FabricExchange(std::shared_ptr<MessageFabric> fabric, uint64_t context, std::vector<int> members,
                 int64_t timeout_ms);
  int rank() const override { return rank_; }
  int nranks() const override { return static_cast<int>(members_.size()); }
  base::Status AllGather(const void* mine, size_t bytes, void* all) override;
  bool CarriesMessages() const override { return true; }
  base::Status Send(int peer, uint64_t tag, const void* data, size_t bytes) override;
  base::Status Recv(int peer, uint64_t tag, std::string* data, Deadline deadline,
                    const std::atomic<bool>* abort = nullptr) override;
  base::StatusOr<std::unique_ptr<Exchange>> Subgroup(uint64_t context, const std::vector<int>& members) override;
  ControlService* control() override { return &fabric_->control(); }
  int FabricRank(int member) const override { return members_[member]; }
  uint64_t context() const override { return context_; }

 private:
  std::shared_ptr<MessageFabric> fabric_;
  uint64_t context_;
  std::vector<int> members_;
  int rank_ = -1;
  int64_t timeout_ms_;
  uint64_t gathers_ = 0;  // all-gathers run, for their tags
};

// Tags: the top byte says what a message is for, so the users of one
// context never collide.
inline constexpr uint64_t kTagAllGather = uint64_t{1} << 56;
inline constexpr uint64_t kTagPeerOffer = uint64_t{2} << 56;
inline constexpr uint64_t kTagPeerAck = uint64_t{3} << 56;
// 4 and 5: control requests and their answers (control.h).

// A context for a child group, the same on every member that passes the
// same arguments.
uint64_t ChildContext(uint64_t parent, uint64_t split_seq, int color);

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_BOOTSTRAP_EXCHANGE_H_
