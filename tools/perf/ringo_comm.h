// Ringo behind ringo-perf's Communicator interface: the one place a
// Collective becomes a ringo* call.
#ifndef RINGO_TOOLS_PERF_RINGO_COMM_H_
#define RINGO_TOOLS_PERF_RINGO_COMM_H_

#include <string>

#include "base/cuda_calls.h"
#include "base/status.h"
#include "ringo/ringo.h"
#include "tools/perf/communicator.h"

namespace ringo::perf {

// Wraps an initialised communicator it does not own: the caller finalizes
// and destroys it unless Abort() (ringoCommAbort, which releases it) has run.
// Not thread-safe, like the communicator.
class RingoCommunicator final : public Communicator {
 public:
  explicit RingoCommunicator(ringoComm_t comm);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string Library() const override;
  int CudaDevice() const override { return cuda_device_; }
  // Ringo counts its CUDA runtime calls per thread (base/cuda_calls.h).
  bool CudaCalls(base::CudaCallCounts* counts) const override {
    *counts = base::ThreadCudaCalls();
    return true;
  }
  base::Status Supports(Collective c, base::DataType type, base::RedOp op) const override;
  base::Status Issue(Collective c, const void* send, void* recv, size_t count, base::DataType type,
                     base::RedOp op, int root, void* stream) override;
  void Abort() override;
  base::StatusOr<void*> AllocRegistered(size_t bytes) override;
  void FreeRegistered(void* ptr) override;

  // Fills rank, size and device from the communicator; call once after
  // construction. Errors name the failing ringo* call.
  base::Status Query();
  // Whether Abort() has run (the communicator is released then).
  bool aborted() const { return aborted_; }

 private:
  ringoComm_t comm_;
  int rank_ = 0;
  int size_ = 1;
  int cuda_device_ = -1;
  bool aborted_ = false;
};

// Ringo runs every collective, datatype and op (a SupportFn).
base::Status RingoSupports(Collective c, base::DataType type, base::RedOp op);

// A Status for a failed ringo* call, with ringoGetLastError's message.
base::Status RingoStatus(ringoResult_t result, const char* call, ringoComm_t comm);

}  // namespace ringo::perf

#endif  // RINGO_TOOLS_PERF_RINGO_COMM_H_
