#include "trainer/comm.h"

namespace ringo::train {

base::Status RingoCall(ringoResult_t result, const std::string& what, ringoComm_t comm) {
  if (result == ringoSuccess) return base::OkStatus();
  const std::string detail = ringoGetLastError(comm);
  const std::string message =
      what + ": " + ringoGetErrorString(result) + (detail.empty() ? "" : ": " + detail);
  switch (result) {
    case ringoInvalidArgument:
      return base::InvalidArgument(message);
    case ringoInvalidUsage:
      return base::InvalidUsage(message);
    case ringoRemoteError:
      return base::RemoteError(message);
    case ringoTimeout:
      return base::Timeout(message);
    case ringoSystemError:
      return base::SystemError(message);
    default:
      return base::Internal(message);
  }
}

base::Status AllReduceDoubles(ringoComm_t comm, double* data, size_t count, ringoRedOp_t op) {
  return RingoCall(ringoAllReduce(data, data, count, ringoFloat64, op, comm, nullptr),
                   "ringoAllReduce", comm);
}

Communicator::~Communicator() {
  if (comm_ != nullptr && !aborted_) (void)ringoCommDestroy(comm_);
}

base::Status Communicator::Init(int nranks, const ringoUniqueId& id, int rank, int timeout_ms, int device_kind) {
  ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
  config.device_kind = device_kind;
  config.timeout_ms = timeout_ms;
  ringoComm_t comm = nullptr;
  RETURN_IF_ERROR(RingoCall(ringoCommInitRankConfig(&comm, nranks, id, rank, &config),
                            "ringoCommInitRank", nullptr));
  comm_ = comm;
  return base::OkStatus();
}

base::Status Communicator::SplitFrom(const Communicator& parent, int rank, int wire, bool host, int timeout_ms) {
  ringoComm_t comm = nullptr;
  ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
  config.device_kind = RINGO_DEVICE_HOST;
  config.timeout_ms = timeout_ms;
  RETURN_IF_ERROR(RingoCall(ringoCommSplit(parent.get(), 0, rank, &comm, host ? &config : nullptr), "ringoCommSplit",
                            parent.get()));
  comm_ = comm;
  if (wire != ringoWireNone) RETURN_IF_ERROR(RingoCall(ringoCommSetWire(comm, wire), "ringoCommSetWire", comm));
  return base::OkStatus();
}

void Communicator::Replace(ringoComm_t comm, bool destroy) {
  if (comm_ != nullptr && !aborted_) (void)(destroy ? ringoCommDestroy(comm_) : ringoCommAbort(comm_));
  comm_ = comm;
  aborted_ = false;
}

void Communicator::Abort() {
  if (comm_ == nullptr || aborted_) return;
  aborted_ = true;
  (void)ringoCommAbort(comm_);
}

}  // namespace ringo::train
