#include "collectives/control/observer.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <thread>

#include "base/logging.h"

namespace ringo::collectives {
namespace {

std::mutex g_observers_mu;
std::set<Observer*>* g_observers = new std::set<Observer*>();  // GUARDED_BY(g_observers_mu)

// RINGO_TRACE_SIGNAL: the handler writes a byte; a thread reads it and dumps.
int g_signal_pipe[2] = {-1, -1};

void OnTraceSignal(int) {
  const char c = 1;
  if (g_signal_pipe[1] >= 0) (void)!::write(g_signal_pipe[1], &c, 1);
}

void StartSignalThread(int signo) {
  static std::once_flag once;
  std::call_once(once, [signo] {
    if (::pipe2(g_signal_pipe, O_CLOEXEC) != 0) {
      RINGO_LOG(WARN) << "RINGO_TRACE_SIGNAL=" << signo << ": no pipe (" << std::strerror(errno) << ")";
      return;
    }
    std::thread([] {
      char buf[64];
      while (true) {
        const ssize_t n = ::read(g_signal_pipe[0], buf, sizeof(buf));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        DumpEveryObserver("signal");
      }
    }).detach();
    struct sigaction sa {};
    sa.sa_handler = OnTraceSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (::sigaction(signo, &sa, nullptr) != 0) {
      RINGO_LOG(WARN) << "RINGO_TRACE_SIGNAL=" << signo << ": cannot handle it (" << std::strerror(errno) << ")";
    }
  });
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "?";
  return buf;
}

std::string Escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

}  // namespace

Observer::Observer(ObserverSetup setup)
    : setup_(std::move(setup)),
      recorder_(setup_.config != nullptr ? static_cast<size_t>(setup_.config->trace_buffer) : kDefaultTraceEntries) {
  const base::Config& config = *setup_.config;
  const int slots = GpuTimes::SlotsFor(recorder_.capacity());
  if (setup_.gpu && setup_.device >= 0 && slots > 0 && config.trace_gpu_times) {
    auto events = MakeCudaEvents(setup_.device, GpuTimes::EventsFor(slots));
    if (events.ok()) {
      gpu_times_ = std::make_unique<GpuTimes>(std::move(events).value(), &recorder_, slots,
                                              TraceClock::Now().ticks_per_ns);
    } else {
      RINGO_LOG(WARN) << "rank " << setup_.rank << ": flight recorder without GPU times: "
                      << events.status().message();
    }
  }
  transport::ControlService* control = setup_.exchange != nullptr ? setup_.exchange->control() : nullptr;
  if (control != nullptr) {
    DiagnosisSetup d;
    d.rank = setup_.rank;
    d.nranks = setup_.nranks;
    d.comm_id = setup_.comm_id;
    d.exchange = setup_.exchange;
    d.recorder = &recorder_;
    d.driver = &driver_;
    d.engine = &engine_;
    d.peers = setup_.peers;
    d.stall_ms = config.stall_ms;
    d.stall_abort = config.stall_abort;
    d.answer_ms = config.control_timeout_ms;
    diagnosis_ = std::make_unique<Diagnosis>(std::move(d));
  }
  if (control != nullptr && !config.trace_dir.empty() && recorder_.on()) {
    // Every rank answers its clock; ranks other than 0 estimate theirs
    // against rank 0's (three tries, the fastest round trip wins). Rank 0
    // may not answer yet: a rank asks again for up to a second.
    control->Register(setup_.exchange->context(), transport::ControlKind::kClock, [](int, const std::string&) {
      const int64_t now = TraceClock::Now().ref_wall_ns;
      return std::string(reinterpret_cast<const char*>(&now), sizeof(now));
    });
    clock_registered_ = true;
    if (setup_.rank != 0) {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      for (int tries = 0; tries < 3 && std::chrono::steady_clock::now() < give_up;) {
        const int64_t t1 = TraceClock::Now().ref_wall_ns;
        auto got = control->Ask(setup_.exchange->FabricRank(0), setup_.exchange->context(),
                                transport::ControlKind::kClock, "", transport::DeadlineAfterMs(200));
        const int64_t t3 = TraceClock::Now().ref_wall_ns;
        if (!got.ok() || got->size() != sizeof(int64_t)) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
          continue;
        }
        ++tries;
        int64_t t2 = 0;
        std::memcpy(&t2, got->data(), sizeof(t2));
        const int64_t error = (t3 - t1) / 2;
        if (clock_error_ns_ < 0 || error < clock_error_ns_) {
          clock_error_ns_ = error;
          clock_offset_ns_ = (t1 + t3) / 2 - t2;
        }
      }
    } else {
      clock_error_ns_ = 0;
    }
  }
  if (config.trace_signal > 0) StartSignalThread(static_cast<int>(config.trace_signal));
  std::lock_guard<std::mutex> lock(g_observers_mu);
  g_observers->insert(this);
}

Observer::~Observer() {
  {
    std::lock_guard<std::mutex> lock(g_observers_mu);
    g_observers->erase(this);
  }
  diagnosis_.reset();
  if (clock_registered_) {
    setup_.exchange->control()->Unregister(setup_.exchange->context(), transport::ControlKind::kClock);
  }
}

base::Status Observer::Dump(const std::string& reason, const std::string& dir_arg, std::string* path_out) {
  const std::string dir = !dir_arg.empty() ? dir_arg : setup_.config->trace_dir;
  if (dir.empty() || !recorder_.on()) return base::OkStatus();
  std::lock_guard<std::mutex> lock(dump_mu_);
  if (gpu_times_ != nullptr) gpu_times_->Poll();  // what the GPU has done by now
  if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) {
    return base::SystemError("cannot make the trace folder " + dir + ": " + std::strerror(errno));
  }
  const TraceClock clock = TraceClock::Now();
  std::string text = "{\"ringo_trace\":1,\"comm\":\"" + Hex(setup_.comm_id) + "\",\"rank\":" +
                     std::to_string(setup_.rank) + ",\"nranks\":" + std::to_string(setup_.nranks) + ",\"host\":\"" +
                     Escaped(HostName()) + "\",\"pid\":" + std::to_string(::getpid()) + ",\"device\":\"" +
                     (setup_.gpu ? "cuda" : "host") + "\",\"reason\":\"" + Escaped(reason) +
                     "\",\"earlier\":\"" + Escaped(reasons_) + "\",\"dumped_ns\":" + std::to_string(clock.ref_wall_ns) + ",\"capacity\":" +
                     std::to_string(recorder_.capacity());
  if (clock_error_ns_ >= 0) {
    text += ",\"clock_offset_ns\":" + std::to_string(clock_offset_ns_) +
            ",\"clock_error_ns\":" + std::to_string(clock_error_ns_) + ",\"clock\":\"estimated against rank 0 at init\"";
  } else {
    text += ",\"clock\":\"not estimated\"";
  }
  text += "}\n";
  for (const std::string& line : recorder_.JsonLines(clock)) text += line + "\n";
  const std::string path = dir + "/ringo-trace-" + Hex(setup_.comm_id) + "-rank" + std::to_string(setup_.rank) + ".jsonl";
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return base::SystemError("cannot write " + tmp + ": " + std::strerror(errno));
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return base::SystemError("cannot write " + path + ": " + std::strerror(errno));
  }
  reasons_ += (reasons_.empty() ? "" : ",") + reason;
  if (path_out != nullptr) *path_out = path;
  RINGO_LOG(INFO) << "rank " << setup_.rank << ": flight record (" << reason << ") written to " << path;
  return base::OkStatus();
}

void DumpEveryObserver(const std::string& reason) {
  std::lock_guard<std::mutex> lock(g_observers_mu);
  for (Observer* o : *g_observers) {
    const base::Status st = o->Dump(reason);
    if (!st.ok()) RINGO_LOG(WARN) << "flight record: " << st.message();
  }
}

}  // namespace ringo::collectives
