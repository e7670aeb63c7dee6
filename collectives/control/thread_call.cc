#include "collectives/control/thread_call.h"

#include <mutex>
#include <vector>

#include "base/config.h"
#include "collectives/control/recorder.h"

namespace ringo::collectives {
namespace {

// Records of threads that exited, for the next threads.
std::mutex g_free_mu;
std::vector<ThreadCall*>* g_free = new std::vector<ThreadCall*>();  // GUARDED_BY(g_free_mu)

struct Owner {
  ThreadCall* call;
  Owner() {
    std::lock_guard<std::mutex> lock(g_free_mu);
    if (!g_free->empty()) {
      call = g_free->back();
      g_free->pop_back();
    } else {
      call = new ThreadCall();  // kept for the life of the process
    }
    call->fn.store(nullptr);
    call->comm.store(0);
    call->since.store(TraceTicks());
  }
  ~Owner() {
    std::lock_guard<std::mutex> lock(g_free_mu);
    g_free->push_back(call);
  }
};

thread_local bool t_in_call = false;
thread_local uint64_t t_exit_ticks = 0;

}  // namespace

void NoteExitTicks(uint64_t ticks) { t_exit_ticks = ticks; }

ThreadCall* ThisThreadCall() {
  thread_local Owner owner;
  return owner.call;
}

bool TracingOn() {
  static const bool on = base::GetConfig().trace_buffer > 0;
  return on;
}

CallStamp::CallStamp(const char* fn, uint64_t comm, uint64_t ticks) : ticks_(ticks) {
  if (t_in_call) return;
  t_in_call = true;
  t_exit_ticks = 0;
  call_ = ThisThreadCall();
  call_->since.store(ticks, std::memory_order_relaxed);
  call_->comm.store(comm, std::memory_order_relaxed);
  call_->fn.store(fn, std::memory_order_release);
}

CallStamp::~CallStamp() {
  if (call_ == nullptr) return;
  call_->fn.store(nullptr, std::memory_order_relaxed);
  call_->since.store(t_exit_ticks != 0 ? t_exit_ticks : TraceTicks(), std::memory_order_release);
  t_in_call = false;
}

}  // namespace ringo::collectives
