// One collective call as a test case: build, run on a rank, check.
#include "tests/collective_case.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "tests/harness.h"

namespace ringo::tests {

const Collective kAllCollectives[5] = {Collective::kAllReduce, Collective::kReduceScatter,
                                       Collective::kAllGather, Collective::kBroadcast,
                                       Collective::kReduce};

ringoResult_t CallCollective(const Case& c, const void* send, void* recv, ringoComm_t comm,
                             ringoStream_t stream) {
  switch (c.collective) {
    case Collective::kAllReduce:
      return ringoAllReduce(send, recv, c.count, c.dtype, c.op, comm, stream);
    case Collective::kReduceScatter:
      return ringoReduceScatter(send, recv, c.count, c.dtype, c.op, comm, stream);
    case Collective::kAllGather:
      return ringoAllGather(send, recv, c.count, c.dtype, comm, stream);
    case Collective::kBroadcast:
      return ringoBroadcast(send, recv, c.count, c.dtype, c.root, comm, stream);
    case Collective::kReduce:
      return ringoReduce(send, recv, c.count, c.dtype, c.op, c.root, comm, stream);
  }
  return ringoInternalError;
}

size_t SendElems(const Case& c) {
  return c.collective == Collective::kReduceScatter ? c.count * c.nranks : c.count;
}
size_t RecvElems(const Case& c) {
  return c.collective == Collective::kAllGather ? c.count * c.nranks : c.count;
}

size_t InPlaceBufferElems(const Case& c) { return std::max(SendElems(c), RecvElems(c)); }
size_t InPlaceSendOffset(const Case& c, int rank) {
  return c.collective == Collective::kAllGather ? rank * c.count : 0;
}
size_t InPlaceRecvOffset(const Case& c, int rank) {
  return c.collective == Collective::kReduceScatter ? rank * c.count : 0;
}

namespace {

bool IsSentinel(const unsigned char* p, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) {
    if (p[i] != GuardedBuffer::kSentinel) return false;
  }
  return true;
}

}  // namespace

std::string CheckOutput(const Case& c, const Expected& e, int rank, const unsigned char* recv,
                        const unsigned char* own_input) {
  const size_t size = DataTypeSize(c.dtype);
  switch (c.collective) {
    case Collective::kAllReduce:
    case Collective::kAllGather:
    case Collective::kBroadcast:
      return CompareToReference(c.dtype, recv, RecvElems(c), e.result, 0);
    case Collective::kReduceScatter:
      return CompareToReference(c.dtype, recv, c.count, e.result, rank * c.count);
    case Collective::kReduce:
      if (rank == c.root) return CompareToReference(c.dtype, recv, c.count, e.result, 0);
      if (c.in_place) {
        std::string diff = CompareBytes(c.dtype, recv, own_input, c.count);
        return diff.empty() ? "" : "non-root in-place buffer changed: " + diff;
      }
      return IsSentinel(recv, c.count * size) ? "" : "non-root recvbuff was written";
  }
  return "unknown collective";
}

const char* CollectiveName(Collective c) {
  switch (c) {
    case Collective::kAllReduce:
      return "AllReduce";
    case Collective::kReduceScatter:
      return "ReduceScatter";
    case Collective::kAllGather:
      return "AllGather";
    case Collective::kBroadcast:
      return "Broadcast";
    case Collective::kReduce:
      return "Reduce";
  }
  return "Unknown";
}

bool HasOp(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kReduceScatter || c == Collective::kReduce;
}

bool HasRoot(Collective c) { return c == Collective::kBroadcast || c == Collective::kReduce; }

std::string Case::Describe() const {
  std::ostringstream out;
  out << CollectiveName(collective) << " " << DataTypeName(dtype);
  if (HasOp(collective)) out << " " << OpName(op);
  out << " nranks=" << nranks << " count=" << count << (in_place ? " in-place" : " out-of-place");
  if (HasRoot(collective)) out << " root=" << root;
  return out.str();
}

Expected BuildExpected(const Case& c) {
  Expected e;
  const size_t size = DataTypeSize(c.dtype);
  switch (c.collective) {
    case Collective::kAllReduce:
    case Collective::kReduce:
      e.result = ReduceInputs(c.dtype, c.op, c.seed, c.nranks, c.count);
      break;
    case Collective::kReduceScatter:
      e.result = ReduceInputs(c.dtype, c.op, c.seed, c.nranks, c.count * c.nranks);
      break;
    case Collective::kAllGather:
      e.result.bytes.resize(c.count * c.nranks * size);
      for (int r = 0; r < c.nranks; ++r) {
        FillInput(c.dtype, c.op, c.seed, r, e.result.bytes.data() + r * c.count * size, c.count);
      }
      break;
    case Collective::kBroadcast:
      e.result.bytes.resize(c.count * size);
      FillInput(c.dtype, c.op, c.seed, c.root, e.result.bytes.data(), c.count);
      break;
  }
  return e;
}

namespace {
bool use_ringo_mem_alloc = false;
}  // namespace

void SetUseRingoMemAlloc(bool use) { use_ringo_mem_alloc = use; }

GuardedBuffer::GuardedBuffer(size_t bytes) : bytes_(bytes) {
  const size_t total = bytes + 2 * kGuardBytes;
  void* p = nullptr;
  if (use_ringo_mem_alloc && ringoMemAlloc(&p, total) == ringoSuccess) {
    from_ringo_ = true;
    storage_ = static_cast<unsigned char*>(p);
  } else if (use_ringo_mem_alloc) {
    std::fprintf(stderr, "ringoMemAlloc(%zu) failed: %s\n", total, ringoGetLastError(nullptr));
    std::abort();
  } else {
    storage_ = new unsigned char[total];
  }
  std::memset(storage_, kSentinel, total);
}

GuardedBuffer::~GuardedBuffer() {
  if (from_ringo_) {
    ringoMemFree(storage_);
  } else {
    delete[] storage_;
  }
}

std::string GuardedBuffer::CheckGuards(const char* name) const {
  std::ostringstream out;
  for (size_t i = 0; i < kGuardBytes; ++i) {
    if (storage_[i] != kSentinel) {
      out << name << ": guard byte " << (static_cast<long>(i) - static_cast<long>(kGuardBytes))
          << " (before the buffer) was overwritten; ";
      break;
    }
  }
  for (size_t i = 0; i < kGuardBytes; ++i) {
    if (storage_[kGuardBytes + bytes_ + i] != kSentinel) {
      out << name << ": guard byte " << i << " after the buffer's end was overwritten; ";
      break;
    }
  }
  return out.str();
}

CaseRun::CaseRun(const Case& c, const Expected& expected, int rank)
    : case_(c),
      expected_(expected),
      rank_(rank),
      own_input_(SendElems(c) * DataTypeSize(c.dtype)),
      send_buf_(c.in_place ? 0 : SendElems(c) * DataTypeSize(c.dtype)),
      recv_buf_((c.in_place ? InPlaceBufferElems(c) : RecvElems(c)) * DataTypeSize(c.dtype)) {
  const size_t size = DataTypeSize(c.dtype);
  FillInput(c.dtype, c.op, c.seed, rank, own_input_.data(), SendElems(c));
  if (!c.in_place) {
    std::memcpy(send_buf_.data(), own_input_.data(), own_input_.size());
    send_ = send_buf_.data();
    recv_ = recv_buf_.data();
    return;
  }
  unsigned char* base = recv_buf_.data();
  unsigned char* send = base + InPlaceSendOffset(c, rank) * size;
  // A non-root Broadcast rank's buffer only receives; an AllGather's other
  // slots stay at the sentinel until filled.
  if (c.collective != Collective::kBroadcast || rank == c.root) {
    std::memcpy(send, own_input_.data(), own_input_.size());
  }
  send_ = send;
  recv_ = base + InPlaceRecvOffset(c, rank) * size;
}

ringoResult_t CaseRun::Issue(ringoComm_t comm) { return CallCollective(case_, send_, recv_, comm, nullptr); }

std::string CaseRun::Check() const {
  std::string problems = CheckOutput(case_, expected_, rank_, recv_, own_input_.data());
  if (!problems.empty()) problems += " ";
  if (!case_.in_place) {
    std::string diff =
        CompareBytes(case_.dtype, send_buf_.data(), own_input_.data(), SendElems(case_));
    if (!diff.empty()) problems += "sendbuff changed: " + diff + " ";
    problems += send_buf_.CheckGuards("sendbuff");
  }
  problems += recv_buf_.CheckGuards(case_.in_place ? "buffer" : "recvbuff");
  if (problems.empty()) return "";
  return case_.Describe() + " rank " + std::to_string(rank_) + ": " + problems;
}

std::string RunCaseOnRank(const Case& c, const Expected& expected, int rank, ringoComm_t comm,
                          bool* call_failed) {
  CaseRun run(c, expected, rank);
  ringoResult_t rc = run.Issue(comm);
  *call_failed = rc != ringoSuccess;
  if (rc != ringoSuccess) {
    return c.Describe() + " rank " + std::to_string(rank) + ": returned " + ResultName(rc) + ": " +
           ringoGetLastError(comm);
  }
  return run.Check();
}

std::vector<size_t> SweepCounts(ringoDataType_t dt, int nranks) {
  const size_t chunk = 64 / DataTypeSize(dt);
  std::vector<size_t> counts = {
      0, 1, 7, chunk - 1, chunk, chunk + 1, static_cast<size_t>(nranks) * chunk * 11 + 5};
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

}  // namespace ringo::tests
