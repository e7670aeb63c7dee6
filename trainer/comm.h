// ringo-train's use of the public C API (include/ringo/ringo.h): results as
// Status with Ringo's own message, and the few collectives the training loop
// calls directly. Nothing here reaches past the public header.
#ifndef RINGO_TRAINER_COMM_H_
#define RINGO_TRAINER_COMM_H_

#include <cstddef>
#include <string>

#include "base/status.h"
#include "ringo/ringo.h"

namespace ringo::train {

// OK for ringoSuccess; otherwise a Status whose message is
// "<what>: <result name>: <ringoGetLastError(comm)>".
base::Status RingoCall(ringoResult_t result, const std::string& what, ringoComm_t comm);

// Sums (or maxes) `count` doubles in place over the communicator. Blocking.
base::Status AllReduceDoubles(ringoComm_t comm, double* data, size_t count, ringoRedOp_t op);

// A communicator made as ringoCommInitRankConfig with host memory (the CPU
// backend's gradients, and every rank's metadata), or with GPU memory
// (--device's gradients), destroyed (or aborted, when Abort was
// called) with the object.
class Communicator {
 public:
  Communicator() = default;
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // `device_kind`: RINGO_DEVICE_HOST, or RINGO_DEVICE_CUDA (the calling
  // thread's current GPU).
  base::Status Init(int nranks, const ringoUniqueId& id, int rank, int timeout_ms,
                    int device_kind = RINGO_DEVICE_HOST);
  // A second communicator over the same ranks, split from `parent` (no
  // unique id of its own, so none to collide with a launcher's
  // RINGO_COMM_ID); collective over the parent's ranks.
  // A child of `parent` with every rank, this one as `rank`, sending its
  // sums between hosts in `wire` (a ringoWire_t); `host`: in host memory
  // whatever the parent's (the metadata communicator of GPU ranks), with
  // `timeout_ms` (0: RINGO_TIMEOUT_MS).
  base::Status SplitFrom(const Communicator& parent, int rank, int wire = ringoWireNone, bool host = false,
                         int timeout_ms = 0);
  ringoComm_t get() const { return comm_; }
  // Marks the communicator aborted (its peers see ringoRemoteError) and
  // releases it. Any thread; once.
  void Abort();
  // Takes `comm` (a shrunk or grown communicator) in place of the one held,
  // which is aborted (after a shrink: the parent's work is over) or, with
  // `destroy`, destroyed (after a grow every rank leaves it together).
  void Replace(ringoComm_t comm, bool destroy = false);

 private:
  ringoComm_t comm_ = nullptr;
  bool aborted_ = false;
};

}  // namespace ringo::train

#endif  // RINGO_TRAINER_COMM_H_
