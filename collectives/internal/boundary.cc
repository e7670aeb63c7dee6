#include "collectives/internal/boundary.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <unordered_set>
#include <vector>

#include "base/logging.h"
#include "collectives/plan/device_choice.h"

using ringo::base::Status;
using ringo::base::StatusOr;
using ringo::collectives::Communicator;

namespace {
thread_local std::string t_last_error;
thread_local std::string t_comm_error_copy;
std::mutex g_live_mu;
std::unordered_set<ringoComm*>* g_live = new std::unordered_set<ringoComm*>();  // GUARDED_BY(g_live_mu)
}  // namespace

namespace ringo::collectives::internal {
// Bumped by every Unregister (boundary.h).
std::atomic<uint64_t> g_unregistered{0};
thread_local ringoComm* t_live_comm = nullptr;
thread_local uint64_t t_live_seen = 0;
}  // namespace ringo::collectives::internal

ringoComm::~ringoComm() { Release(); }

void ringoComm::Release() {
  if (init_thread_.joinable()) init_thread_.join();
  std::unique_ptr<Communicator> impl;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready_.store(nullptr, std::memory_order_release);
    impl = std::move(impl_);
    last_error_.clear();
  }
  impl.reset();  // outside the lock: a GPU communicator's destruction may wait
}

void ringoComm::Set(std::unique_ptr<Communicator> impl) {
  std::lock_guard<std::mutex> lock(mu_);
  impl_ = std::move(impl);
  ready_.store(impl_.get(), std::memory_order_release);
}

void ringoComm::StartInit(std::function<StatusOr<std::unique_ptr<Communicator>>()> init) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    init_running_ = true;
  }
  init_thread_ = std::thread([this, init = std::move(init)] {
    auto made = init();
    std::lock_guard<std::mutex> lock(mu_);
    if (made.ok()) {
      impl_ = std::move(made).value();
      ready_.store(impl_.get(), std::memory_order_release);
    } else {
      init_status_ = made.status();
    }
    init_running_ = false;
  });
}

Status ringoComm::AsyncError() {
  std::lock_guard<std::mutex> lock(mu_);
  if (init_running_) return Status(ringo::base::Code::kInProgress, "initialization in progress");
  if (!init_status_.ok()) return init_status_;
  return impl_ ? impl_->AsyncError() : Status();
}

void ringoComm::SetLastError(const std::string& message) {
  std::lock_guard<std::mutex> lock(mu_);
  last_error_ = message;
}

const char* ringoComm::LastError() {
  std::lock_guard<std::mutex> lock(mu_);
  t_comm_error_copy = last_error_;
  return t_comm_error_copy.c_str();
}

namespace ringo::collectives::internal {

ringoResult_t Finish(ringoComm* comm, const char* fn, const Status& st) {
  if (st.ok()) return ringoSuccess;
  std::string msg = std::string(fn) + ": " + st.message();
  t_last_error = msg;
  if (comm != nullptr && IsLive(comm)) comm->SetLastError(msg);
  if (st.code() != base::Code::kInProgress) RINGO_LOG(INFO) << msg;
  return static_cast<ringoResult_t>(st.code());
}

ringoComm* Register(ringoComm* comm) {
  std::lock_guard<std::mutex> lock(g_live_mu);
  g_live->insert(comm);
  return comm;
}

void Unregister(ringoComm* comm) {
  std::lock_guard<std::mutex> lock(g_live_mu);
  g_live->erase(comm);
  g_unregistered.fetch_add(1, std::memory_order_release);
}

void Retire(ringoComm* comm) {
  static std::mutex* const retired_mu = new std::mutex();
  static std::vector<ringoComm*>* const retired = new std::vector<ringoComm*>();
  Unregister(comm);
  comm->Release();
  std::lock_guard<std::mutex> lock(*retired_mu);
  retired->push_back(comm);  // never freed, never reused
}

bool IsLive(ringoComm* comm) {
  if (comm == t_live_comm && t_live_seen == g_unregistered.load(std::memory_order_acquire)) return true;
  std::lock_guard<std::mutex> lock(g_live_mu);
  if (g_live->count(comm) == 0) return false;
  t_live_comm = comm;
  t_live_seen = g_unregistered.load(std::memory_order_relaxed);  // stable while the lock is held
  return true;
}

StatusOr<Communicator*> Resolve(ringoComm* comm) {
  if (comm == nullptr) return base::InvalidArgument("comm is NULL");
  if (!IsLive(comm)) return base::InvalidArgument("comm is not a live communicator (destroyed, aborted or never created)");
  return comm->Get();
}

StatusOr<Communicator*> ResolveReadySlow(ringoComm* comm) {
  ASSIGN_OR_RETURN(Communicator * c, Resolve(comm));
  if (c == nullptr) {
    Status st = comm->AsyncError();
    if (!st.ok() && st.code() != base::Code::kInProgress) return st.WithContext("initialization failed");
    return base::InvalidUsage("initialization is still in progress; poll ringoCommGetAsyncError");
  }
  return c;
}

const char* ThreadLastError() { return t_last_error.c_str(); }

namespace {
thread_local uint64_t t_call_ticks = 0;
}  // namespace

CallScope::CallScope(const char* fn, ringoComm* comm) {
  if (!TracingOn()) return;
  const uint64_t ticks = TraceTicks();
  // Only a live handle is read: the caller's pointer may never have been a
  // communicator (the call itself refuses it after this stamp).
  Communicator* c = comm != nullptr && IsLive(comm) ? comm->Get() : nullptr;
  stamp_.emplace(fn, c != nullptr ? c->id() : 0, ticks);
  t_call_ticks = ticks;
  if (c != nullptr && c->observer() != nullptr) c->observer()->Driven(ThisThreadCall());
}

uint64_t CallScope::Ticks() { return TracingOn() ? t_call_ticks : 0; }

base::StatusOr<ringoConfig_t> ReadConfig(const ringoConfig_t* config) {
  ringoConfig_t cfg = RINGO_CONFIG_INITIALIZER;
  if (config == nullptr) return cfg;
  // Every version's config has these first five fields.
  constexpr size_t kOldest = offsetof(ringoConfig_t, tagged_p2p);
  if (config->size < kOldest) {
    return base::InvalidArgument("config->size " + std::to_string(config->size) +
                                 " is smaller than any ringoConfig_t; use RINGO_CONFIG_INITIALIZER");
  }
  std::memcpy(&cfg, config, std::min(config->size, sizeof(cfg)));
  cfg.size = sizeof(cfg);
  if (cfg.blocking != 0 && cfg.blocking != 1) return base::InvalidArgument("config->blocking must be 0 or 1");
  if (cfg.timeout_ms < 0) return base::InvalidArgument("config->timeout_ms is negative");
  if (cfg.tagged_p2p != 0 && cfg.tagged_p2p != 1) return base::InvalidArgument("config->tagged_p2p must be 0 or 1");
  if (cfg.wire < -1 || cfg.wire > ringoWireFp8e5m2) {
    return base::InvalidArgument("config->wire " + std::to_string(cfg.wire) + " is not a ringoWire_t (or -1: RINGO_WIRE)");
  }
  return cfg;
}

Status ChildConfig(const ringoConfig_t* config, const Communicator* parent, CommOptions* options, bool* inherit,
                   bool* blocking) {
  *inherit = config == nullptr;
  *blocking = true;
  if (config == nullptr) return Status();
  ASSIGN_OR_RETURN(const ringoConfig_t cfg, ReadConfig(config));
  const int kind = cfg.device_kind;
  if (kind != RINGO_DEVICE_AUTO && kind != RINGO_DEVICE_HOST && kind != RINGO_DEVICE_CUDA) {
    return base::InvalidArgument("config->device_kind " + std::to_string(kind) + " is not a ringoDeviceKind_t");
  }
  const bool gpu = parent != nullptr && parent->kind() == DeviceKind::kCuda;
  if (kind == RINGO_DEVICE_CUDA && parent != nullptr && !gpu) {
    return base::InvalidUsage("config->device_kind is RINGO_DEVICE_CUDA, but the parent is a host communicator");
  }
  *blocking = cfg.blocking == 1;
  options->timeout_ms = cfg.timeout_ms;
  options->device_wish = kind == RINGO_DEVICE_HOST ? static_cast<int32_t>(DeviceWish::kHost) : kInheritDevice;
  options->tagged = cfg.tagged_p2p == 1;
  options->wire = cfg.wire;
  return Status();
}

}  // namespace ringo::collectives::internal
