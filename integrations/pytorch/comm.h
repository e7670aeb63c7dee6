// One Ringo communicator of a process group, created through the group's
// c10d::Store, with the error handling every operation shares.
//
// Thread safety: a Comm is used by one thread at a time (Ringo's rule), except
// AsyncError(), which any thread may call.
#ifndef RINGO_INTEGRATIONS_PYTORCH_COMM_H_
#define RINGO_INTEGRATIONS_PYTORCH_COMM_H_

#include <chrono>
#include <memory>
#include <string>

#include "integrations/pytorch/torch_compat.h"

namespace ringo::pytorch {

class Comm {
 public:
  // Collective over the group's ranks: rank 0 creates a unique id and
  // publishes it in `store` under a key no other communicator of this store
  // uses (each rank counts the communicators of each `device_kind` it made,
  // and every rank makes them in the same order); the others read it there. `timeout` becomes the
  // communicator's (ringoConfig_t.timeout_ms): every wait on a peer, including
  // this rendezvous, fails after it. `device_kind` is a ringoDeviceKind_t;
  // a GPU communicator uses the calling thread's current CUDA device.
  // Throws std::runtime_error when Ringo fails.
  static std::unique_ptr<Comm> Create(c10d::Store& store, int rank, int size,
                                      std::chrono::milliseconds timeout, int device_kind);

  // Owns `comm` (made by Ringo some other way: a shrink), rank `rank` of `size`.
  static std::unique_ptr<Comm> Adopt(ringoComm_t comm, int rank, int size) {
    return std::unique_ptr<Comm>(new Comm(comm, rank, size));
  }

  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  // Destroys the communicator, or aborts it once it has failed (a failed
  // communicator's peers may be gone: destroy must not wait on them).
  ~Comm();

  ringoComm_t get() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

  // Throws if this communicator failed before: a later operation on it
  // reports the first failure instead of trying the peers again.
  void CheckUsable(const char* what) const;

  // Returns when `rc` is ringoSuccess; otherwise remembers the failure (for
  // CheckUsable) and throws std::runtime_error with Ringo's message, which
  // names the peer when a peer failed or timed out.
  void Check(ringoResult_t rc, const char* what);

  // Names the operations this communicator records next (its flight
  // record's "label") after the torch operation `title` ("ringo:all_reduce"
  // records as "all_reduce"). By the thread that runs them.
  void Label(const char* title);

  // The first asynchronous error (GPU communicators report peer failures
  // here); ringoSuccess when there is none. Any thread.
  ringoResult_t AsyncError() const;

 private:
  Comm(ringoComm_t comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {}

  ringoComm_t comm_;
  const int rank_;
  const int size_;
  std::string failure_;  // the first failure's message; "" while healthy
};

// Ringo's message for a failed call on `comm` (or the thread's last error).
std::string RingoError(ringoComm_t comm, ringoResult_t rc, const char* what);

}  // namespace ringo::pytorch

#endif  // RINGO_INTEGRATIONS_PYTORCH_COMM_H_
