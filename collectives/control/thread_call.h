// Which Ringo call each application thread is in: the C boundary stamps a
// thread's record when a call enters and when it leaves, so that a rank
// asked where it is (the hang diagnosis) can say "inside ringoAllReduce on
// communicator X for 3.2 s" or "outside Ringo for 60 s" about the thread
// that drives the communicator in question.
//
// Records live as long as the process (a thread that exits gives its
// record back for the next thread); every field is an atomic, written by
// the owning thread and read by the control service's.
#ifndef RINGO_COLLECTIVES_CONTROL_THREAD_CALL_H_
#define RINGO_COLLECTIVES_CONTROL_THREAD_CALL_H_

#include <atomic>
#include <cstdint>

namespace ringo::collectives {

struct ThreadCall {
  std::atomic<const char*> fn{nullptr};  // the C function running, null: outside Ringo
  std::atomic<uint64_t> comm{0};         // its communicator (Communicator::id()), 0: none
  std::atomic<uint64_t> since{0};        // ticks (TraceTicks): when it entered, or when the last call left
};

// This thread's record.
ThreadCall* ThisThreadCall();

// Whether the recorder is on in this process (RINGO_TRACE_BUFFER > 0):
// the boundary stamps records only then.
bool TracingOn();

// The recorder's finishing stamp of this thread's operation, which the
// call's own end then reuses (one time-stamp read fewer per call).
void NoteExitTicks(uint64_t ticks);

// Stamps this thread's record for the span of one C call (nests: an inner
// call leaves the outer one's stamp in place).
class CallStamp {
 public:
  CallStamp(const char* fn, uint64_t comm, uint64_t ticks);
  ~CallStamp();
  uint64_t ticks() const { return ticks_; }

 private:
  ThreadCall* call_ = nullptr;  // null: not stamped (tracing off, or nested)
  uint64_t ticks_;
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_CONTROL_THREAD_CALL_H_
