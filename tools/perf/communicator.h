// The library a benchmark rank drives, seen by the benchmark loop (bench.h):
// rank and size, what it can run, and one collective call with nccl-tests'
// semantics. Ringo implements it in tools/perf/ringo_comm.h; the peers of
// bench/peers (Open MPI, Gloo) implement it too, so every program measures
// with the same loop, flags, verification and columns.
//
// Thread safety: one communicator per rank, used by that rank's thread only.
#ifndef RINGO_TOOLS_PERF_COMMUNICATOR_H_
#define RINGO_TOOLS_PERF_COMMUNICATOR_H_

#include <cstddef>
#include <string>

#include "base/cuda_calls.h"
#include "base/device/dtype.h"
#include "base/status.h"
#include "tools/perf/options.h"

namespace ringo::perf {

// What a library can run: OK, or InvalidUsage saying why not ("MPI has no
// float16 datatype"). A plain function so that a program can check its flags
// before it starts any rank.
using SupportFn = base::Status (*)(Collective c, base::DataType type, base::RedOp op);

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The library and its version for the header: "Ringo 0.1.2", "Open MPI v4.1.4".
  virtual std::string Library() const = 0;
  // The CUDA device this rank's buffers must live on; -1 for host memory.
  virtual int CudaDevice() const { return -1; }
  // Whether Issue can run (c, type, op); see SupportFn.
  virtual base::Status Supports(Collective c, base::DataType type, base::RedOp op) const = 0;

  // One collective as ringo.h defines it: `count` is the call's count
  // argument, send == recv (or nccl-tests' in-place layout for reducescatter
  // and allgather) is in place, `root` is used by broadcast and reduce.
  // Buffers come from the Backend; `stream` is the Backend's (NULL on host).
  // Host communicators return once the collective is complete; GPU ones once
  // it is enqueued on `stream`. The error names the failing call.
  virtual base::Status Issue(Collective c, const void* send, void* recv, size_t count,
                             base::DataType type, base::RedOp op, int root, void* stream) = 0;

  // Host memory from the library's own allocator, for -R 1 (ringoMemAlloc);
  // InvalidUsage where the library has none.
  virtual base::StatusOr<void*> AllocRegistered(size_t bytes) {
    (void)bytes;
    return base::InvalidUsage(Library() + " has no buffer allocator of its own (-R 1)");
  }
  virtual void FreeRegistered(void* ptr) { (void)ptr; }

  // The CUDA runtime calls the library has made on this thread so far, where
  // it counts them (--cuda-calls); false where it does not.
  virtual bool CudaCalls(base::CudaCallCounts* counts) const {
    (void)counts;
    return false;
  }

  // After a failure on this rank: make peers blocked on it fail instead of
  // waiting forever, where the library can (best effort; may not return).
  virtual void Abort() = 0;
};

}  // namespace ringo::perf

#endif  // RINGO_TOOLS_PERF_COMMUNICATOR_H_
