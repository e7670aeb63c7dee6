#include "collectives/control/recorder.h"

#include <time.h>

#include <cstdio>
#include <algorithm>
#include <cstring>

#include "base/cpu_relax.h"
#include "base/device/dtype.h"
#include "collectives/control/thread_call.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace ringo::collectives {
namespace {

int64_t ClockNs(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// The calibration of the first use: ticks and clocks read together.
struct Origin {
  uint64_t ticks;
  int64_t mono_ns;
};
const Origin& FirstOrigin() {
  static const Origin origin{TraceTicks(), ClockNs(CLOCK_MONOTONIC)};
  return origin;
}

void AppendEscaped(std::string* out, const char* s) {
  for (; *s != '\0'; ++s) {
    const char c = *s;
    if (c == '"' || c == '\\') {
      *out += '\\';
      *out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      *out += buf;
    } else {
      *out += c;
    }
  }
}

}  // namespace

const char* TraceOpName(TraceOp op) {
  switch (op) {
    case TraceOp::kAllReduce: return "AllReduce";
    case TraceOp::kReduceScatter: return "ReduceScatter";
    case TraceOp::kAllGather: return "AllGather";
    case TraceOp::kBroadcast: return "Broadcast";
    case TraceOp::kReduce: return "Reduce";
    case TraceOp::kSend: return "Send";
    case TraceOp::kRecv: return "Recv";
  }
  return "?";
}

const char* TraceStateName(TraceState state) {
  switch (state) {
    case TraceState::kEmpty: return "empty";
    case TraceState::kRunning: return "running";
    case TraceState::kDone: return "done";
    case TraceState::kFailed: return "failed";
    case TraceState::kCaptured: return "captured";
    case TraceState::kEnqueued: return "enqueued";
  }
  return "?";
}

uint64_t TraceTicks() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return static_cast<uint64_t>(ClockNs(CLOCK_MONOTONIC));
#endif
}

TraceClock TraceClock::Now() {
  const Origin& o = FirstOrigin();
  TraceClock c;
  c.ref_wall_ns = ClockNs(CLOCK_REALTIME);
  c.ref_mono_ns = ClockNs(CLOCK_MONOTONIC);
  c.ref_ticks = TraceTicks();
  const int64_t ns = c.ref_mono_ns - o.mono_ns;
  const uint64_t ticks = c.ref_ticks - o.ticks;
  // Too little time since the first use to calibrate: assume 1 tick per ns
  // until there is (only a dump right at start meets this).
  c.ticks_per_ns = ns > 1000000 && ticks > 0 ? static_cast<double>(ticks) / static_cast<double>(ns) : 1.0;
  return c;
}

int64_t TraceClock::MonoNs(uint64_t ticks) const {
  const double delta = (static_cast<double>(ticks) - static_cast<double>(ref_ticks)) / ticks_per_ns;
  return ref_mono_ns + static_cast<int64_t>(delta);
}

int64_t TraceClock::WallNs(uint64_t ticks) const {
  const double delta = (static_cast<double>(ticks) - static_cast<double>(ref_ticks)) / ticks_per_ns;
  return ref_wall_ns + static_cast<int64_t>(delta);
}

FlightRecorder::FlightRecorder(size_t capacity)
    : capacity_(capacity), entries_(capacity > 0 ? new TraceEntry[capacity] : nullptr) {
  (void)FirstOrigin();
}

TraceEntry* FlightRecorder::Begin(TraceOp op, uint64_t seq, int64_t count, int peer, uint8_t dtype, uint8_t redop,
                                  uint64_t group, uint64_t called, uint64_t started, const char* label) {
  if (capacity_ == 0) return nullptr;
  const uint64_t id = ++next_;
  TraceEntry& e = entries_[(id - 1) % capacity_];
  const uint64_t v = Claim(e);
  e.id = id;
  e.seq = seq;
  e.count = count;
  e.group = group;
  e.started = started != 0 ? started : TraceTicks();
  e.called = called != 0 ? called : e.started;
  e.finished = 0;
  e.enqueued = 0;
  e.peer = peer;
  e.op = op;
  e.dtype = dtype;
  e.redop = redop;
  e.state = TraceState::kRunning;
  if (label != nullptr) {
    std::strncpy(e.label, label, sizeof(e.label) - 1);
    e.label[sizeof(e.label) - 1] = '\0';
  } else {
    e.label[0] = '\0';
  }
  Release(e, v);
  ops_.store(id, std::memory_order_relaxed);
  running_op_.store(static_cast<uint8_t>(op), std::memory_order_relaxed);
  running_seq_.store(seq, std::memory_order_relaxed);
  running_since_.store(e.called, std::memory_order_relaxed);
  running_.store(id, std::memory_order_release);
  return &e;
}

void FlightRecorder::Finish(TraceEntry* e, TraceState state) {
  if (e == nullptr) return;
  const uint64_t v = Claim(*e);
  e->finished = TraceTicks();
  NoteExitTicks(e->finished);
  e->state = state;
  Release(*e, v);
  if (static_cast<uint8_t>(e->op) < static_cast<uint8_t>(TraceOp::kSend)) {
    done_seq_.store(e->seq, std::memory_order_relaxed);
    collectives_done_.fetch_add(1, std::memory_order_relaxed);
  }
  done_op_.store(static_cast<uint8_t>(e->op), std::memory_order_relaxed);
  done_at_.store(e->finished, std::memory_order_relaxed);
  if (running_.load(std::memory_order_relaxed) == e->id) running_.store(0, std::memory_order_release);
}

void FlightRecorder::FinishBatch(uint64_t first, size_t n, TraceState state) {
  if (first == 0 || capacity_ == 0) return;
  const uint64_t last = first + n - 1;
  const uint64_t from = last >= capacity_ ? std::max(first, last - capacity_ + 1) : first;
  for (uint64_t id = from; id <= last; ++id) {
    TraceEntry& e = entries_[(id - 1) % capacity_];
    if (e.id == id) Finish(&e, state);
  }
}

uint64_t FlightRecorder::Claim(TraceEntry& e) {
  uint64_t v = e.version.load(std::memory_order_relaxed);
  if (!shared_writes_) {  // the owning thread is the one writer
    e.version.store(v + 1, std::memory_order_relaxed);  // odd: being written
    std::atomic_thread_fence(std::memory_order_release);
    return v;
  }
  while ((v & 1) != 0 || !e.version.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel,
                                                             std::memory_order_relaxed)) {
    base::CpuRelax();
    v = e.version.load(std::memory_order_relaxed);
  }
  return v;
}

void FlightRecorder::SetGpuTimes(uint64_t first, size_t n, uint64_t started, uint64_t finished, TraceState state) {
  if (!shared_writes_) return;  // only GpuTimes calls it, having enabled them
  for (uint64_t id = first; id < first + n && capacity_ > 0; ++id) {
    TraceEntry& e = entries_[(id - 1) % capacity_];
    const uint64_t v = Claim(e);
    if (e.id == id) {  // not rewritten since
      if (e.enqueued == 0) e.enqueued = e.finished;  // the enqueue's, kept
      if (started != 0) e.started = started;
      e.finished = finished;
      e.state = state;
    }
    Release(e, v);
  }
}

TracePosition FlightRecorder::Where() const {
  TracePosition p;
  p.on = on();
  p.ops = ops_.load(std::memory_order_relaxed);
  p.running = running_.load(std::memory_order_acquire) != 0;
  p.running_op = static_cast<TraceOp>(running_op_.load(std::memory_order_relaxed));
  p.running_seq = running_seq_.load(std::memory_order_relaxed);
  p.running_since = running_since_.load(std::memory_order_relaxed);
  p.done_seq = done_seq_.load(std::memory_order_relaxed);
  p.done_op = static_cast<TraceOp>(done_op_.load(std::memory_order_relaxed));
  p.done_at = done_at_.load(std::memory_order_relaxed);
  p.collectives_done = collectives_done_.load(std::memory_order_relaxed);
  return p;
}

std::vector<std::string> FlightRecorder::JsonLines(const TraceClock& clock) const {
  std::vector<std::string> lines;
  const uint64_t last = ops_.load(std::memory_order_acquire);
  const uint64_t first = last > capacity_ ? last - capacity_ + 1 : 1;
  for (uint64_t id = first; id <= last && capacity_ > 0; ++id) {
    const TraceEntry& src = entries_[(id - 1) % capacity_];
    const uint64_t v1 = src.version.load(std::memory_order_acquire);
    if (v1 & 1) continue;
    TraceEntry e;  // a copy, checked against a concurrent rewrite
    e.id = src.id;
    e.seq = src.seq;
    e.count = src.count;
    e.group = src.group;
    e.called = src.called;
    e.started = src.started;
    e.finished = src.finished;
    e.enqueued = src.enqueued;
    e.peer = src.peer;
    e.op = src.op;
    e.dtype = src.dtype;
    e.redop = src.redop;
    e.state = src.state;
    std::memcpy(e.label, src.label, sizeof(e.label));
    e.label[sizeof(e.label) - 1] = '\0';
    std::atomic_thread_fence(std::memory_order_acquire);
    if (src.version.load(std::memory_order_relaxed) != v1 || e.id != id) continue;
    const bool send_recv = e.op == TraceOp::kSend || e.op == TraceOp::kRecv;
    const bool reduces = e.op == TraceOp::kAllReduce || e.op == TraceOp::kReduceScatter || e.op == TraceOp::kReduce;
    std::string line = "{\"id\":" + std::to_string(e.id) + ",\"op\":\"" + TraceOpName(e.op) + "\"";
    line += ",\"seq\":" + std::to_string(e.seq);
    if (e.label[0] != '\0') {
      line += ",\"label\":\"";
      AppendEscaped(&line, e.label);
      line += "\"";
    }
    line += std::string(",\"dtype\":\"") +
            (base::IsValidDataType(e.dtype) ? base::DataTypeName(static_cast<base::DataType>(e.dtype)) : "?") + "\"";
    if (reduces) line += std::string(",\"redop\":\"") + base::RedOpName(static_cast<base::RedOp>(e.redop)) + "\"";
    line += ",\"count\":" + std::to_string(e.count);
    if (send_recv) line += ",\"peer\":" + std::to_string(e.peer);
    if (!send_recv && e.peer >= 0) line += ",\"root\":" + std::to_string(e.peer);
    line += ",\"group\":" + std::to_string(e.group);
    line += ",\"called_ns\":" + std::to_string(clock.WallNs(e.called));
    line += ",\"started_ns\":" + std::to_string(clock.WallNs(e.started));
    if (e.finished != 0) line += ",\"finished_ns\":" + std::to_string(clock.WallNs(e.finished));
    if (e.enqueued != 0) line += ",\"enqueued_ns\":" + std::to_string(clock.WallNs(e.enqueued));
    line += std::string(",\"state\":\"") + TraceStateName(e.state) + "\"}";
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace ringo::collectives
