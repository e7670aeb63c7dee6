// GpuTimes against fake events: an operation's record goes enqueued ->
// running -> done with the GPU's times on the host's clock, batches of
// entries, slots running out, overwritten entries, a CUDA error.
#include "collectives/control/gpu_times.h"

#include <map>
#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace ringo::collectives {
namespace {

// Events whose completion and GPU time the test sets.
class FakeEvents : public GpuEvents {
 public:
  struct Event {
    bool recorded = false;
    bool done = false;
    double ms = 0;  // GPU time of completion
    void* stream = nullptr;
  };
  explicit FakeEvents(int n) : events(n) {}
  int size() const override { return static_cast<int>(events.size()); }
  base::Status Record(int e, void* stream) override {
    if (fail) return base::Internal("cudaEventRecord failed (fake)");
    events[e] = Event{true, false, 0, stream};
    ++records;
    return base::Status();
  }
  base::StatusOr<bool> Done(int e) override {
    if (fail) return base::Internal("cudaEventQuery failed (fake)");
    return events[e].done;
  }
  base::StatusOr<double> ElapsedMs(int from, int to) override { return events[to].ms - events[from].ms; }
  base::StatusOr<uint64_t> RecordAnchor(int e) override {
    events[e] = Event{true, anchor_at_once, anchor_ms, nullptr};
    ++anchors;
    return anchor_ticks;
  }
  void Complete(int e, double ms) {
    events[e].done = true;
    events[e].ms = ms;
  }
  std::vector<Event> events;
  bool fail = false;
  int records = 0;
  int anchors = 0;
  bool anchor_at_once = true;  // the GPU completes an anchor before the next query
  double anchor_ms = 5.0;
  uint64_t anchor_ticks = 1000000;
};

constexpr double kTicksPerNs = 2.0;
void* const kStream = reinterpret_cast<void*>(0x1234);

struct Fixture {
  explicit Fixture(size_t capacity, int slots = -1)
      : recorder(capacity), events(new FakeEvents(GpuTimes::EventsFor(slots < 0 ? GpuTimes::SlotsFor(capacity) : slots))) {
    times = std::make_unique<GpuTimes>(std::unique_ptr<GpuEvents>(events), &recorder,
                                       slots < 0 ? GpuTimes::SlotsFor(capacity) : slots, kTicksPerNs);
  }
  // One GPU operation as the communicator records it; returns its slot.
  int Launch(TraceEntry** entry) {
    TraceEntry* e = recorder.Begin(TraceOp::kAllReduce, ++seq, 8, -1, 0, 0, 0, 0, 0, nullptr);
    const int slot = times->Before(kStream);
    recorder.Finish(e, TraceState::kEnqueued);
    times->After(slot, kStream, e->id, 1);
    if (entry != nullptr) *entry = e;
    return slot;
  }
  FlightRecorder recorder;
  FakeEvents* events;  // owned by times
  std::unique_ptr<GpuTimes> times;
  uint64_t seq = 0;
};

TEST(GpuTimes, EnqueuedRunningDone) {
  Fixture f(100);
  TraceEntry* e = nullptr;
  const int slot = f.Launch(&e);
  ASSERT_GE(slot, 0);
  EXPECT_EQ(f.events->anchors, 1);
  EXPECT_EQ(f.events->events[2 + 2 * slot].stream, kStream);  // both events on the caller's stream
  EXPECT_EQ(f.events->events[3 + 2 * slot].stream, kStream);
  const uint64_t enqueued = e->finished;
  f.times->Poll();
  EXPECT_EQ(e->state, TraceState::kEnqueued);

  f.events->Complete(2 + 2 * slot, 5.5);  // started 0.5 ms after the anchor
  f.times->Poll();
  EXPECT_EQ(e->state, TraceState::kRunning);
  EXPECT_EQ(e->started, 1000000u + static_cast<uint64_t>(0.5e6 * kTicksPerNs));
  EXPECT_EQ(e->finished, 0u);
  EXPECT_EQ(e->enqueued, enqueued);

  f.events->Complete(3 + 2 * slot, 7.0);
  f.times->Poll();
  EXPECT_EQ(e->state, TraceState::kDone);
  EXPECT_EQ(e->started, 1000000u + static_cast<uint64_t>(0.5e6 * kTicksPerNs));
  EXPECT_EQ(e->finished, 1000000u + static_cast<uint64_t>(2.0e6 * kTicksPerNs));
  EXPECT_EQ(e->enqueued, enqueued);
  EXPECT_EQ(f.times->tracked(), 0u);

  const std::vector<std::string> lines = f.recorder.JsonLines(TraceClock::Now());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("\"state\":\"done\""), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("\"enqueued_ns\":"), std::string::npos) << lines[0];
}

TEST(GpuTimes, BatchOfEntries) {
  Fixture f(100);
  uint64_t first = 0;
  for (int i = 0; i < 3; ++i) {
    TraceEntry* e = f.recorder.Begin(TraceOp::kSend, 0, 4, 1, 0, 0, 7, 0, 0, nullptr);
    if (first == 0) first = e->id;
  }
  const int slot = f.times->Before(kStream);
  f.recorder.FinishBatch(first, 3, TraceState::kEnqueued);
  f.times->After(slot, kStream, first, 3);
  f.events->Complete(2 + 2 * slot, 6);
  f.events->Complete(3 + 2 * slot, 8);
  f.times->Poll();
  for (const std::string& line : f.recorder.JsonLines(TraceClock::Now())) {
    EXPECT_NE(line.find("\"state\":\"done\""), std::string::npos) << line;
  }
}

TEST(GpuTimes, SlotsRunOut) {
  Fixture f(100, 2);
  TraceEntry* a = nullptr;
  TraceEntry* b = nullptr;
  TraceEntry* c = nullptr;
  const int sa = f.Launch(&a);
  f.Launch(&b);
  f.Launch(&c);  // no slot free: a is no longer tracked
  EXPECT_EQ(f.times->tracked(), 2u);
  f.events->Complete(2 + 2 * sa, 6);  // a's events complete (the slot was reused: c's now)
  f.events->Complete(3 + 2 * sa, 7);
  f.times->Poll();
  EXPECT_EQ(a->state, TraceState::kEnqueued);
  EXPECT_EQ(c->state, TraceState::kDone);
  EXPECT_EQ(b->state, TraceState::kEnqueued);
}

TEST(GpuTimes, OverwrittenEntryLeftAlone) {
  Fixture f(4, 2);  // two slots for four entries
  TraceEntry* e = nullptr;
  const int slot = f.Launch(&e);
  const uint64_t id = e->id;
  // Host calls overwrite the ring past that entry (the communicator would
  // have dropped it first; here the recorder alone checks the id).
  for (int i = 0; i < 4; ++i) f.recorder.Finish(f.recorder.Begin(TraceOp::kAllReduce, 100 + i, 1, -1, 0, 0, 0, 0, 0, nullptr), TraceState::kDone);
  EXPECT_NE(e->id, id);
  f.events->Complete(2 + 2 * slot, 6);
  f.events->Complete(3 + 2 * slot, 7);
  f.times->Poll();
  EXPECT_EQ(e->state, TraceState::kDone);
  EXPECT_EQ(e->enqueued, 0u);  // the new entry was not touched
}

TEST(GpuTimes, ReanchorsOnlyWhenIdle) {
  Fixture f(100);
  f.Launch(nullptr);
  f.Launch(nullptr);
  EXPECT_EQ(f.events->anchors, 1);  // the first call's anchor serves the next
}

// A launch that failed gives its slot back; a followed entry the GPU had
// started goes back to "enqueued" when it is no longer followed.
TEST(GpuTimes, CancelAndDrop) {
  Fixture f(100, 1);
  for (int i = 0; i < 5; ++i) {
    const int slot = f.times->Before(kStream);
    ASSERT_GE(slot, 0) << "launch " << i;  // one slot, given back each time
    f.times->Cancel(slot);
  }
  EXPECT_EQ(f.times->tracked(), 0u);
  TraceEntry* a = nullptr;
  TraceEntry* b = nullptr;
  const int slot = f.Launch(&a);
  f.events->Complete(2 + 2 * slot, 6);
  f.times->Poll();
  EXPECT_EQ(a->state, TraceState::kRunning);
  f.Launch(&b);  // the one slot: a is no longer followed
  EXPECT_EQ(a->state, TraceState::kEnqueued);
  EXPECT_EQ(f.times->tracked(), 1u);
}

TEST(GpuTimes, ErrorStopsTracking) {
  Fixture f(100);
  TraceEntry* e = nullptr;
  f.Launch(&e);
  f.events->fail = true;
  f.times->Poll();
  EXPECT_TRUE(f.times->stopped());
  EXPECT_EQ(f.times->tracked(), 0u);
  EXPECT_EQ(f.times->Before(kStream), -1);
  EXPECT_EQ(e->state, TraceState::kEnqueued);
}

TEST(GpuTimes, Slots) {
  EXPECT_EQ(GpuTimes::SlotsFor(0), 0);
  EXPECT_EQ(GpuTimes::SlotsFor(1), 0);
  EXPECT_EQ(GpuTimes::SlotsFor(10), 5);
  EXPECT_EQ(GpuTimes::SlotsFor(2000), 64);
}

// The anchor is never waited for: a launch records it and goes on, and the
// operations counted from it stay "enqueued" (their GPU times unknown on
// the host's clock) until the GPU has completed it, then get their times.
TEST(GpuTimes, TheAnchorIsNeverWaitedFor) {
  Fixture f(100);
  f.events->anchor_at_once = false;  // as behind another rank's kernel on a shared GPU
  TraceEntry* e = nullptr;
  const int slot = f.Launch(&e);
  ASSERT_GE(slot, 0);
  EXPECT_EQ(f.events->anchors, 1);
  f.events->Complete(2 + 2 * slot, 5.5);
  f.events->Complete(3 + 2 * slot, 7.0);
  f.times->Poll();
  EXPECT_EQ(e->state, TraceState::kEnqueued);  // the anchor has not completed
  EXPECT_EQ(f.times->tracked(), 1u);
  TraceEntry* second = nullptr;
  const int slot2 = f.Launch(&second);  // a second launch does not wait either
  ASSERT_GE(slot2, 0);
  EXPECT_EQ(f.events->anchors, 1);
  f.events->Complete(0, 5.0);  // the GPU reaches the anchor
  f.times->Poll();
  EXPECT_EQ(e->state, TraceState::kDone);
  EXPECT_EQ(e->started, 1000000u + static_cast<uint64_t>(0.5e6 * kTicksPerNs));
  EXPECT_EQ(e->finished, 1000000u + static_cast<uint64_t>(2.0e6 * kTicksPerNs));
  EXPECT_EQ(second->state, TraceState::kEnqueued);  // its events have not completed
  f.events->Complete(2 + 2 * slot2, 8.0);
  f.events->Complete(3 + 2 * slot2, 9.0);
  f.times->Poll();
  EXPECT_EQ(second->state, TraceState::kDone);
  EXPECT_EQ(f.times->tracked(), 0u);
}

}  // namespace
}  // namespace ringo::collectives
