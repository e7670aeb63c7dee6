// One collective call as a test case: its description, the expected result
// (computed before ranks start, so forked ranks inherit it), and the per-rank
// run-and-check with guard regions around every buffer.
//
// Thread safety: a Case and its Expected are read-only once built and may be
// shared by every rank; RunCaseOnRank touches only its own buffers.
#ifndef RINGO_TESTS_COLLECTIVE_CASE_H_
#define RINGO_TESTS_COLLECTIVE_CASE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ringo/ringo.h"
#include "tests/reference.h"

namespace ringo::tests {

enum class Collective { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce };

extern const Collective kAllCollectives[5];
const char* CollectiveName(Collective c);
bool HasOp(Collective c);    // takes a reduction operator
bool HasRoot(Collective c);  // takes a root

struct Case {
  Collective collective = Collective::kAllReduce;
  ringoDataType_t dtype = ringoFloat32;
  ringoRedOp_t op = ringoSum;  // ignored by AllGather and Broadcast
  int nranks = 1;
  // The API's count argument: count (AllReduce, Broadcast, Reduce),
  // recvcount (ReduceScatter), sendcount (AllGather).
  size_t count = 0;
  bool in_place = false;
  int root = 0;  // Broadcast and Reduce
  uint32_t seed = 0;

  std::string Describe() const;
};

// Elements in the send and receive buffers of one rank.
size_t SendElems(const Case& c);
size_t RecvElems(const Case& c);

// In place, ringo.h's layout inside one buffer of InPlaceBufferElems
// elements: where this rank's send and receive pointers sit, in elements
// from its start (AllGather sends from its own slot, ReduceScatter receives
// into it; everything else uses the start for both).
size_t InPlaceBufferElems(const Case& c);
size_t InPlaceSendOffset(const Case& c, int rank);
size_t InPlaceRecvOffset(const Case& c, int rank);

// Calls the collective `c` names on `comm` with these buffers and stream.
ringoResult_t CallCollective(const Case& c, const void* send, void* recv, ringoComm_t comm,
                             ringoStream_t stream);

// What every rank should hold afterwards. For AllReduce and Reduce, the
// reduction of `count` elements; ReduceScatter, of nranks*count (rank r
// checks its slice); AllGather, every rank's input concatenated; Broadcast,
// the root's input.
struct Expected {
  ReducedReference result;
};

Expected BuildExpected(const Case& c);

// Checks what `rank` received, at its receive pointer `recv` (host memory):
// the reference result, or for a non-root Reduce that its buffer is
// untouched (in place: still `own_input`, its input). "" or what is wrong.
std::string CheckOutput(const Case& c, const Expected& e, int rank, const unsigned char* recv,
                        const unsigned char* own_input);

// Where this process's GuardedBuffers come from: the heap (the default), or
// ringoMemAlloc (buffers the other processes' ranks can map). Per process;
// set it before building CaseRuns.
void SetUseRingoMemAlloc(bool use);

// A buffer with guard regions of kGuardBytes on both sides, filled with a
// sentinel. data() keeps the allocation's 16-byte alignment: this tests
// bounds, not misaligned buffers.
class GuardedBuffer {
 public:
  static constexpr size_t kGuardBytes = 256;  // catches a slot (64 B) overrun
  static constexpr unsigned char kSentinel = 0xA5;
  explicit GuardedBuffer(size_t bytes);
  ~GuardedBuffer();
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  unsigned char* data() { return storage_ + kGuardBytes; }
  const unsigned char* data() const { return storage_ + kGuardBytes; }
  // "" or which guard was overwritten, naming the buffer.
  std::string CheckGuards(const char* name) const;

 private:
  size_t bytes_;
  bool from_ringo_ = false;        // ringoMemAlloc, else new[]
  unsigned char* storage_ = nullptr;  // bytes_ + 2 * kGuardBytes
};

// One rank's part of a Case: its buffers, laid out and filled on
// construction (in-place layouts as ringo.h defines them), then Issue, then
// Check once the call has completed (at once for a host communicator, or
// after ringoGroupEnd).
class CaseRun {
 public:
  CaseRun(const Case& c, const Expected& expected, int rank);
  CaseRun(const CaseRun&) = delete;
  CaseRun& operator=(const CaseRun&) = delete;

  // Calls the collective with stream NULL.
  ringoResult_t Issue(ringoComm_t comm);
  // Checks the output, that an out-of-place send buffer is unchanged, that
  // Reduce leaves non-root receive buffers alone, and every guard region.
  // "" or what is wrong, prefixed with the case and rank.
  std::string Check() const;

 private:
  const Case& case_;
  const Expected& expected_;
  int rank_;
  std::vector<unsigned char> own_input_;
  GuardedBuffer send_buf_;  // empty when in place
  GuardedBuffer recv_buf_;  // the only buffer when in place
  const void* send_ = nullptr;
  unsigned char* recv_ = nullptr;
};

// Runs `c` as rank `rank` on `comm` and checks it (CaseRun). Sets
// *call_failed when the call itself returned an error: the ranks may then be
// out of step and the caller should stop issuing collectives.
std::string RunCaseOnRank(const Case& c, const Expected& expected, int rank, ringoComm_t comm,
                          bool* call_failed);

// Count sweep for `dt` with 64-byte slots: 0, 1, 7, chunk-1, chunk, chunk+1
// and a count with about 11 slots per rank (several FIFO loops), where chunk
// is 64 / sizeof(dt) elements. Duplicates removed.
std::vector<size_t> SweepCounts(ringoDataType_t dt, int nranks);

}  // namespace ringo::tests

#endif  // RINGO_TESTS_COLLECTIVE_CASE_H_
