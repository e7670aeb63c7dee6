#include "transport/peer_state.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ringo::transport {
namespace {

// The state letter and start time from /proc/<pid>/stat; false when it
// cannot be read (no such process).
bool ReadStat(int pid, char* state, uint64_t* start) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // "pid (comm) S ppid ...": the command may hold spaces and parentheses.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr || p[1] != ' ') return false;
  p += 2;
  *state = *p;
  // Field 3 is the state; the start time is field 22.
  for (int field = 3; field < 22; ++field) {
    p = std::strchr(p, ' ');
    if (p == nullptr) return false;
    ++p;
  }
  *start = std::strtoull(p, nullptr, 10);
  return true;
}

}  // namespace

ProcessId SelfProcessId() {
  ProcessId id;
  id.pid = static_cast<int32_t>(getpid());
  char state = 0;
  uint64_t start = 0;
  if (ReadStat(id.pid, &state, &start)) id.start_ticks = start;
  return id;
}

ProcessState ProbeProcess(const ProcessId& id) {
  if (id.pid <= 0) return ProcessState::kRunning;
  if (::kill(id.pid, 0) == -1 && errno == ESRCH) return ProcessState::kGone;
  char state = 0;
  uint64_t start = 0;
  if (!ReadStat(id.pid, &state, &start)) {
    // kill() saw it a moment ago: gone since, or /proc is not mounted.
    return ::kill(id.pid, 0) == -1 && errno == ESRCH ? ProcessState::kGone : ProcessState::kRunning;
  }
  if (state == 'Z' || state == 'X') return ProcessState::kGone;  // dead, not yet reaped
  if (id.start_ticks != 0 && start != id.start_ticks) return ProcessState::kGone;  // pid reused
  if (state == 'T' || state == 't') return ProcessState::kStopped;
  return ProcessState::kRunning;
}

void WriteFaultNotice(FaultNotice& notice, const base::Status& st, int self_rank, uint64_t seq) {
  if (st.ok() || notice.set.load(std::memory_order_acquire) != 0) return;
  const bool relayed = st.origin() >= 0;
  notice.origin = relayed ? st.origin() : self_rank;
  notice.code = static_cast<int32_t>(st.code());
  notice.seq = relayed && st.origin_seq() != 0 ? st.origin_seq() : seq;
  const std::string& text = relayed ? st.origin_message() : st.message();
  const size_t n = text.size() < kFaultTextBytes - 1 ? text.size() : kFaultTextBytes - 1;
  std::memcpy(notice.text, text.data(), n);
  notice.text[n] = '\0';
  notice.set.store(1, std::memory_order_release);
}

base::Status NoticeStatus(const FaultNotice& notice, const std::string& where, int peer_rank, int nranks) {
  if (notice.set.load(std::memory_order_acquire) == 0) return base::OkStatus();
  // The text is the peer's: bound it, whatever the peer wrote.
  const std::string text(notice.text, strnlen(notice.text, kFaultTextBytes));
  int code = notice.code;
  if (code <= static_cast<int>(base::Code::kOk) || code > static_cast<int>(base::Code::kTimeout) ||
      code == static_cast<int>(base::Code::kInProgress)) {
    code = static_cast<int>(base::Code::kRemoteError);
  }
  const int origin = notice.origin >= 0 && notice.origin < nranks ? notice.origin : peer_rank;
  std::string msg = where + ": the failure started at rank " + std::to_string(origin);
  if (notice.seq > 0 && notice.seq != kAfterEveryCollective) msg += " in collective #" + std::to_string(notice.seq);
  msg += ": " + text;
  return base::Status(static_cast<base::Code>(code), msg).WithOrigin(origin, text, notice.seq);
}

uint64_t EncodeWait(int rank, int64_t since_ms) {
  return (static_cast<uint64_t>(since_ms) << 16) | (static_cast<uint64_t>(rank + 1) & 0xffffu);
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

PeerWait ReadWait(const WaitCells& cells) {
  PeerWait w;
  const int64_t now = NowMs();
  for (const auto& c : cells.cell) {
    const uint64_t v = c.load(std::memory_order_relaxed);
    if (v == 0) continue;
    const int64_t age = now - static_cast<int64_t>(v >> 16);
    if (!w.waiting || age > w.age_ms) {
      w.waiting = true;
      w.on_rank = static_cast<int>(v & 0xffffu) - 1;
      w.age_ms = age;
    }
  }
  return w;
}

}  // namespace ringo::transport
