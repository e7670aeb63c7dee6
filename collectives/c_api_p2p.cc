// Point-to-point and what is built on it at the C boundary (ringoSend,
// ringoRecv, ringoAllToAll, ringoGather, ringoScatter) and ringoCommSplit:
// argument validation, then a batch of sends and receives (or a split) run
// now or queued until the outermost ringoGroupEnd (internal/group.h).
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "base/device/dtype.h"
#include "collectives/communicator.h"
#include "collectives/plan/device_choice.h"
#include "collectives/internal/boundary.h"
#include "collectives/internal/group.h"
#include "collectives/engines/engine.h"
#include "ringo/ringo.h"

namespace {

namespace base = ringo::base;
using base::Status;
using ringo::collectives::Communicator;
using ringo::collectives::P2pOp;
using ringo::collectives::internal::Guard;
using ringo::collectives::internal::QueuedOp;
using ringo::collectives::internal::ResolveReady;

// Why BytesOf refused (out of line: the checks themselves inline).
[[gnu::cold, gnu::noinline]] Status BytesError(size_t count, int datatype) {
  if (!base::IsValidDataType(datatype)) {
    return base::InvalidArgument("datatype " + std::to_string(datatype) + " is not a ringoDataType_t");
  }
  return base::InvalidArgument("count " + std::to_string(count) + " of " +
                               base::DataTypeName(static_cast<base::DataType>(datatype)) +
                               " overflows the addressable size");
}

// The bytes of `count` elements (times `blocks`), or why they overflow.
inline base::StatusOr<size_t> BytesOf(size_t count, int datatype, size_t blocks) {
  if (!base::IsValidDataType(datatype)) return BytesError(count, datatype);
  const uint64_t elem = base::DataTypeSize(static_cast<base::DataType>(datatype));
  if (blocks == 0) blocks = 1;
  uint64_t bytes = 0, all = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(count), elem, &bytes) ||
      __builtin_mul_overflow(bytes, static_cast<uint64_t>(blocks), &all) ||
      all > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return BytesError(count, datatype);
  }
  return static_cast<size_t>(bytes);
}

[[gnu::cold, gnu::noinline]] Status RankError(int r, int nranks, const char* what) {
  return base::InvalidArgument(std::string(what) + " " + std::to_string(r) + " is not in [0, " +
                               std::to_string(nranks) + ")");
}

inline Status CheckRank(int r, int nranks, const char* what) {
  if (r < 0 || r >= nranks) return RankError(r, nranks, what);
  return Status();
}

inline Status CheckStream(const Communicator* c, ringoStream_t stream) {
  if (stream != nullptr && c->kind() == ringo::collectives::DeviceKind::kHost) {
    RETURN_IF_ERROR(c->CheckCapture(stream));  // a graph being captured: say so
    return base::InvalidArgument("stream must be NULL on a host communicator");
  }
  return Status();
}

// Validates with `validate` (which fills op.ops), then runs or queues.
template <typename Validate>
ringoResult_t IssueP2p(const char* name, ringoComm* comm, ringoStream_t stream, Validate validate) {
  return Guard(name, comm, [&]() -> Status {
    ASSIGN_OR_RETURN(Communicator * c, ResolveReady(comm));
    RETURN_IF_ERROR(CheckStream(c, stream));
    QueuedOp& op = ringo::collectives::internal::NextOp(QueuedOp::Kind::kP2p, comm, name, stream);
    RETURN_IF_ERROR(validate(c, op));
    if (c->finalized()) return base::InvalidUsage("the communicator was finalized");
    if (ringo::collectives::internal::InGroup()) {
      ringo::collectives::internal::Queue(op);
      return Status();
    }
    return ringo::collectives::internal::RunNow(op);
  });
}

P2pOp SendOp(int peer, const void* buf, size_t bytes) {
  P2pOp op;
  op.send = true;
  op.peer = peer;
  op.send_buf = buf;
  op.bytes = bytes;
  return op;
}

P2pOp RecvOp(int peer, void* buf, size_t bytes) {
  P2pOp op;
  op.send = false;
  op.peer = peer;
  op.recv_buf = buf;
  op.bytes = bytes;
  return op;
}

}  // namespace

extern "C" {

ringoResult_t ringoSend(const void* sendbuff, size_t count, ringoDataType_t datatype, int peer, ringoComm_t comm,
                        ringoStream_t stream) {
  return IssueP2p("ringoSend", comm, stream, [&](Communicator* c, QueuedOp& op) -> Status {
    ASSIGN_OR_RETURN(const size_t bytes, BytesOf(count, datatype, 1));
    RETURN_IF_ERROR(CheckRank(peer, c->nranks(), "peer"));
    if (bytes > 0) RETURN_IF_ERROR(c->CheckBuffer(sendbuff, "sendbuff"));
    op.ops.push_back(SendOp(peer, sendbuff, bytes));
    return Status();
  });
}

ringoResult_t ringoRecv(void* recvbuff, size_t count, ringoDataType_t datatype, int peer, ringoComm_t comm,
                        ringoStream_t stream) {
  return IssueP2p("ringoRecv", comm, stream, [&](Communicator* c, QueuedOp& op) -> Status {
    ASSIGN_OR_RETURN(const size_t bytes, BytesOf(count, datatype, 1));
    RETURN_IF_ERROR(CheckRank(peer, c->nranks(), "peer"));
    if (bytes > 0) RETURN_IF_ERROR(c->CheckBuffer(recvbuff, "recvbuff"));
    op.ops.push_back(RecvOp(peer, recvbuff, bytes));
    return Status();
  });
}

namespace {

// ringoSendTagged and ringoRecvTagged: checked here, run now (never queued).
ringoResult_t IssueTagged(const char* name, bool send, void* buf, size_t count, ringoDataType_t datatype, int peer,
                          int tag, int* source, ringoComm* comm, ringoStream_t stream) {
  return Guard(name, comm, [&]() -> Status {
    ASSIGN_OR_RETURN(Communicator * c, ResolveReady(comm));
    RETURN_IF_ERROR(CheckStream(c, stream));
    if (c->kind() != ringo::collectives::DeviceKind::kHost) {
      return base::InvalidUsage(std::string(name) + " runs on host communicators only");
    }
    ASSIGN_OR_RETURN(const size_t bytes, BytesOf(count, datatype, 1));
    if (!(peer == RINGO_ANY_SOURCE && !send)) RETURN_IF_ERROR(CheckRank(peer, c->nranks(), "peer"));
    if (tag < 0) return base::InvalidArgument("tag " + std::to_string(tag) + " is negative");
    if (bytes > 0) RETURN_IF_ERROR(c->CheckBuffer(buf, send ? "sendbuff" : "recvbuff"));
    if (ringo::collectives::internal::InGroup()) {
      return base::InvalidUsage(std::string(name) + " cannot be grouped (call it outside ringoGroupStart/End)");
    }
    if (c->finalized()) return base::InvalidUsage("the communicator was finalized");
    return c->RunTagged(send, buf, bytes, peer, tag, source);
  });
}

}  // namespace

ringoResult_t ringoSendTagged(const void* sendbuff, size_t count, ringoDataType_t datatype, int peer, int tag,
                              ringoComm_t comm, ringoStream_t stream) {
  return IssueTagged("ringoSendTagged", true, const_cast<void*>(sendbuff), count, datatype, peer, tag, nullptr, comm,
                     stream);
}

ringoResult_t ringoRecvTagged(void* recvbuff, size_t count, ringoDataType_t datatype, int peer, int tag,
                              int* source, ringoComm_t comm, ringoStream_t stream) {
  return IssueTagged("ringoRecvTagged", false, recvbuff, count, datatype, peer, tag, source, comm, stream);
}

ringoResult_t ringoAllToAll(const void* sendbuff, void* recvbuff, size_t count, ringoDataType_t datatype,
                            ringoComm_t comm, ringoStream_t stream) {
  return IssueP2p("ringoAllToAll", comm, stream, [&](Communicator* c, QueuedOp& op) -> Status {
    const int n = c->nranks();
    ASSIGN_OR_RETURN(const size_t bytes, BytesOf(count, datatype, static_cast<size_t>(n)));
    if (bytes > 0) {
      RETURN_IF_ERROR(c->CheckBuffer(sendbuff, "sendbuff"));
      RETURN_IF_ERROR(c->CheckBuffer(recvbuff, "recvbuff"));
    }
    const char* from = static_cast<const char*>(sendbuff);
    if (bytes > 0 && sendbuff == recvbuff && c->kind() == ringo::collectives::DeviceKind::kCuda) {
      return base::InvalidUsage("an in-place ringoAllToAll on a GPU communicator is not supported yet: "
                                "pass separate send and receive buffers");
    }
    if (bytes > 0 && sendbuff == recvbuff) {
      // In place: the blocks go out from a copy of the input, taken when the batch runs.
      op.staged = std::make_shared<std::vector<char>>(bytes * static_cast<size_t>(n));
      op.stage_from = sendbuff;
      from = op.staged->data();
    }
    char* to = static_cast<char*>(recvbuff);
    // Peers in the order rank + 1, rank + 2, ...: every rank starts with a
    // different partner.
    for (int i = 0; i < n; ++i) {
      const int p = (c->rank() + i) % n;
      const size_t off = static_cast<size_t>(p) * bytes;
      op.ops.push_back(SendOp(p, bytes > 0 ? from + off : nullptr, bytes));
      op.ops.push_back(RecvOp(p, bytes > 0 ? to + off : nullptr, bytes));
    }
    return Status();
  });
}

ringoResult_t ringoGather(const void* sendbuff, void* recvbuff, size_t count, ringoDataType_t datatype, int root,
                          ringoComm_t comm, ringoStream_t stream) {
  return IssueP2p("ringoGather", comm, stream, [&](Communicator* c, QueuedOp& op) -> Status {
    const int n = c->nranks();
    ASSIGN_OR_RETURN(const size_t bytes, BytesOf(count, datatype, static_cast<size_t>(n)));
    RETURN_IF_ERROR(CheckRank(root, n, "root"));
    const bool is_root = c->rank() == root;
    if (bytes > 0) {
      RETURN_IF_ERROR(c->CheckBuffer(sendbuff, "sendbuff"));
      if (is_root) RETURN_IF_ERROR(c->CheckBuffer(recvbuff, "recvbuff"));
    }
    if (!is_root) {
      op.ops.push_back(SendOp(root, sendbuff, bytes));
      return Status();
    }
    char* to = static_cast<char*>(recvbuff);
    for (int r = 0; r < n; ++r) {
      char* slot = bytes > 0 ? to + static_cast<size_t>(r) * bytes : nullptr;
      if (r != root) {
        op.ops.push_back(RecvOp(r, slot, bytes));
      } else if (slot != sendbuff) {
        op.ops.push_back(SendOp(r, sendbuff, bytes));
        op.ops.push_back(RecvOp(r, slot, bytes));
      }
    }
    return Status();
  });
}

ringoResult_t ringoScatter(const void* sendbuff, void* recvbuff, size_t count, ringoDataType_t datatype, int root,
                           ringoComm_t comm, ringoStream_t stream) {
  return IssueP2p("ringoScatter", comm, stream, [&](Communicator* c, QueuedOp& op) -> Status {
    const int n = c->nranks();
    ASSIGN_OR_RETURN(const size_t bytes, BytesOf(count, datatype, static_cast<size_t>(n)));
    RETURN_IF_ERROR(CheckRank(root, n, "root"));
    const bool is_root = c->rank() == root;
    if (bytes > 0) {
      RETURN_IF_ERROR(c->CheckBuffer(recvbuff, "recvbuff"));
      if (is_root) RETURN_IF_ERROR(c->CheckBuffer(sendbuff, "sendbuff"));
    }
    if (!is_root) {
      op.ops.push_back(RecvOp(root, recvbuff, bytes));
      return Status();
    }
    const char* from = static_cast<const char*>(sendbuff);
    for (int r = 0; r < n; ++r) {
      const char* block = bytes > 0 ? from + static_cast<size_t>(r) * bytes : nullptr;
      if (r != root) {
        op.ops.push_back(SendOp(r, block, bytes));
      } else if (block != recvbuff) {
        op.ops.push_back(SendOp(r, block, bytes));
        op.ops.push_back(RecvOp(r, recvbuff, bytes));
      }
    }
    return Status();
  });
}

ringoResult_t ringoCommSplit(ringoComm_t comm, int color, int key, ringoComm_t* newcomm,
                             const ringoConfig_t* config) {
  return Guard("ringoCommSplit", comm, [&]() -> Status {
    if (newcomm == nullptr) return base::InvalidArgument("newcomm is NULL");
    *newcomm = nullptr;
    ASSIGN_OR_RETURN(Communicator * c, ResolveReady(comm));
    QueuedOp& op = ringo::collectives::internal::NextOp(QueuedOp::Kind::kSplit, comm, "ringoCommSplit", nullptr);
    op.color = color < 0 ? RINGO_SPLIT_NOCOLOR : color;
    op.key = key;
    op.newcomm = newcomm;
    bool blocking = true;  // a split blocks, as NCCL's
    RETURN_IF_ERROR(ringo::collectives::internal::ChildConfig(config, c, &op.options, &op.inherit, &blocking));
    if (ringo::collectives::internal::InGroup()) {
      ringo::collectives::internal::Queue(op);
      return Status();
    }
    return ringo::collectives::internal::RunNow(op);
  });
}

}  // extern "C"
