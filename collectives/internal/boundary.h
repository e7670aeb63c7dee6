// Helpers of the extern "C" boundary: the handle behind ringoComm_t, the
// registry of live handles, and Guard(), which runs a body, catches
// everything, maps the Status to ringoResult_t and keeps the message.
#ifndef RINGO_COLLECTIVES_INTERNAL_BOUNDARY_H_
#define RINGO_COLLECTIVES_INTERNAL_BOUNDARY_H_

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "base/status.h"
#include "collectives/communicator.h"
#include "collectives/control/thread_call.h"
#include "ringo/ringo.h"

// The object behind ringoComm_t. `impl` is null while a non-blocking init runs.
// A destroyed handle's object is never freed (Retire), so its address is
// never given to another communicator: a stale handle stays invalid.
struct ringoComm {
  ~ringoComm();
  // Joins a background init and destroys the communicator; the object stays.
  void Release();
  ringo::collectives::Communicator* Get() { return ready_.load(std::memory_order_acquire); }
  void Set(std::unique_ptr<ringo::collectives::Communicator> impl);
  // Runs `init` on a background thread (non-blocking init).
  void StartInit(std::function<ringo::base::StatusOr<std::unique_ptr<ringo::collectives::Communicator>>()> init);
  // ringoInProgress while init runs, init's error, or the communicator's.
  ringo::base::Status AsyncError();
  void SetLastError(const std::string& message);
  const char* LastError();  // valid until this thread's next call

 private:
  std::mutex mu_;
  std::unique_ptr<ringo::collectives::Communicator> impl_;  // GUARDED_BY(mu_)
  // impl_.get(), published (release) once set: Get() reads it without the lock.
  std::atomic<ringo::collectives::Communicator*> ready_{nullptr};
  bool init_running_ = false;                                // GUARDED_BY(mu_)
  ringo::base::Status init_status_;                          // GUARDED_BY(mu_)
  std::string last_error_;                                   // GUARDED_BY(mu_)
  std::thread init_thread_;
};

namespace ringo::collectives::internal {

ringoResult_t Finish(ringoComm* comm, const char* fn, const base::Status& st);

// While a C call runs: stamps the calling thread's record (which call, on
// which communicator, since when) and tells the communicator which thread
// drives it, for the hang diagnosis; nothing when the recorder is off.
class CallScope {
 public:
  CallScope(const char* fn, ringoComm* comm);
  ~CallScope() = default;
  // The call's ticks (TraceTicks), 0 when the recorder is off.
  static uint64_t Ticks();

 private:
  std::optional<CallStamp> stamp_;
};

template <typename Body>
ringoResult_t Guard(const char* fn, ringoComm* comm, Body&& body) {
  CallScope scope(fn, comm);
  try {
    base::Status st = body();
    if (st.ok()) return ringoSuccess;
    return Finish(comm, fn, st);
  } catch (const std::exception& e) {
    return Finish(comm, fn, base::Internal(std::string("unexpected exception: ") + e.what()));
  } catch (...) {
    return Finish(comm, fn, base::Internal("unexpected exception"));
  }
}

ringoComm* Register(ringoComm* comm);
void Unregister(ringoComm* comm);
// Unregisters a handle the application holds and releases its communicator,
// keeping the small object itself for the life of the process (about 150
// bytes per communicator ever destroyed): were it freed, a later
// communicator could be given the same address and a stale handle would
// reach it.
void Retire(ringoComm* comm);
bool IsLive(ringoComm* comm);
// The communicator behind a live handle (null while init runs), or why not.
base::StatusOr<Communicator*> Resolve(ringoComm* comm);
// As Resolve, but an initialising communicator is an error too.
base::StatusOr<Communicator*> ResolveReadySlow(ringoComm* comm);

// This thread's last handle found live, and the count of handles
// unregistered when it was: while that count holds, the handle is live
// without a lock (every call resolves its handle, most often the same one).
extern thread_local ringoComm* t_live_comm;
extern thread_local uint64_t t_live_seen;
extern std::atomic<uint64_t> g_unregistered;

inline base::StatusOr<Communicator*> ResolveReady(ringoComm* comm) {
  if (comm != nullptr && comm == t_live_comm && t_live_seen == g_unregistered.load(std::memory_order_acquire)) {
    if (Communicator* c = comm->Get()) return c;
  }
  return ResolveReadySlow(comm);
}

const char* ThreadLastError();

// The caller's ringoConfig_t over RINGO_CONFIG_INITIALIZER's defaults: its
// `size` may be an earlier header's (fields it lacks keep their defaults),
// never less than the fields every version has. Checks blocking and
// timeout_ms.
base::StatusOr<ringoConfig_t> ReadConfig(const ringoConfig_t* config);
// A split's, shrink's or grow's child options from `config` (null: every
// option inherited from the parent, *inherit set); whether the call blocks
// in *blocking. `parent` may be null (a rank joining by ringoCommGrow).
base::Status ChildConfig(const ringoConfig_t* config, const Communicator* parent, CommOptions* options,
                         bool* inherit, bool* blocking);

}  // namespace ringo::collectives::internal

#endif  // RINGO_COLLECTIVES_INTERNAL_BOUNDARY_H_
