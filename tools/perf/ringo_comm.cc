#include "tools/perf/ringo_comm.h"

namespace ringo::perf {

using base::DataType;
using base::RedOp;
using base::Status;

RingoCommunicator::RingoCommunicator(ringoComm_t comm) : comm_(comm) {}

Status RingoCommunicator::Query() {
  RETURN_IF_ERROR(RingoStatus(ringoCommUserRank(comm_, &rank_), "ringoCommUserRank", comm_));
  RETURN_IF_ERROR(RingoStatus(ringoCommCount(comm_, &size_), "ringoCommCount", comm_));
  return RingoStatus(ringoCommCuDevice(comm_, &cuda_device_), "ringoCommCuDevice", comm_);
}

std::string RingoCommunicator::Library() const {
  int v = 0;
  if (ringoGetVersion(&v) != ringoSuccess) return "Ringo";
  return "Ringo " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

Status RingoCommunicator::Supports(Collective c, DataType type, RedOp op) const {
  return RingoSupports(c, type, op);
}

// The internal enums equal the public ones by design (base/device/dtype.h).
Status RingoCommunicator::Issue(Collective c, const void* send, void* recv, size_t count,
                                DataType type, RedOp op, int root, void* stream_ptr) {
  const auto dt = static_cast<ringoDataType_t>(type);
  const auto rop = static_cast<ringoRedOp_t>(op);
  const auto stream = static_cast<ringoStream_t>(stream_ptr);
  ringoResult_t result = ringoInvalidArgument;
  switch (c) {
    case Collective::kAllReduce:
      result = ringoAllReduce(send, recv, count, dt, rop, comm_, stream);
      break;
    case Collective::kReduceScatter:
      result = ringoReduceScatter(send, recv, count, dt, rop, comm_, stream);
      break;
    case Collective::kAllGather: result = ringoAllGather(send, recv, count, dt, comm_, stream); break;
    case Collective::kBroadcast:
      result = ringoBroadcast(send, recv, count, dt, root, comm_, stream);
      break;
    case Collective::kReduce:
      result = ringoReduce(send, recv, count, dt, rop, root, comm_, stream);
      break;
    case Collective::kSendRecv: {
      // nccl-tests' sendrecv: to the next rank, from the previous, in one group.
      const int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
      result = ringoGroupStart();
      const ringoResult_t s = ringoSend(send, count, dt, next, comm_, stream);
      const ringoResult_t r = ringoRecv(recv, count, dt, prev, comm_, stream);
      const ringoResult_t e = ringoGroupEnd();
      result = s != ringoSuccess ? s : r != ringoSuccess ? r : e;
      break;
    }
    case Collective::kAllToAll: result = ringoAllToAll(send, recv, count, dt, comm_, stream); break;
  }
  return RingoStatus(result, CollectiveName(c), comm_);
}

base::StatusOr<void*> RingoCommunicator::AllocRegistered(size_t bytes) {
  void* ptr = nullptr;
  RETURN_IF_ERROR(RingoStatus(ringoMemAlloc(&ptr, bytes > 0 ? bytes : 1), "ringoMemAlloc", nullptr));
  return ptr;
}

void RingoCommunicator::FreeRegistered(void* ptr) { ringoMemFree(ptr); }

void RingoCommunicator::Abort() {
  if (aborted_) return;
  aborted_ = true;
  ringoCommAbort(comm_);
}

Status RingoSupports(Collective, DataType, RedOp) { return Status(); }

Status RingoStatus(ringoResult_t result, const char* call, ringoComm_t comm) {
  if (result == ringoSuccess) return Status();
  std::string message = std::string(call) + " failed: " + ringoGetErrorString(result);
  const char* detail = ringoGetLastError(comm);
  if (detail != nullptr && detail[0] != '\0') message += ": " + std::string(detail);
  return Status(static_cast<base::Code>(result), message);
}

}  // namespace ringo::perf
