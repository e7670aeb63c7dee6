// The GPU communicator's rules that need no GPU: ranks per GPU and per
// process from every rank's place, the residency and work-queue checks, the
// stream rule, and the launch order across streams (against a fake event).
#include <gtest/gtest.h>

#include <cstring>
#include <utility>
#include <string>
#include <vector>

#include "collectives/engines/gpu_order.h"
#include "collectives/engines/gpu_placement.h"

namespace ringo::collectives {
namespace {

GpuPlace Place(uint64_t host, int pid, const char* bus, int sms = 132, int blocks = 1,
               int queues = 32) {
  GpuPlace p;
  std::memset(&p, 0, sizeof(p));
  p.machine_hash = host;
  p.pid = pid;
  p.ok = 1;
  p.sms = sms;
  p.blocks_per_sm = blocks;
  p.work_queues = queues;
  p.device = 0;
  std::strncpy(p.bus_id, bus, sizeof(p.bus_id) - 1);
  return p;
}

TEST(GpuPlacement, RanksPerGpuAndPerProcess) {
  // Two processes of host 1 on GPU A (2 ranks in process 10, 1 in 11), one
  // rank on GPU B, and one rank on another host's bus id A (another GPU).
  const std::vector<GpuPlace> places = {Place(1, 10, "0000:07:00.0"), Place(1, 10, "0000:07:00.0"),
                                        Place(1, 11, "0000:07:00.0"), Place(1, 11, "0000:08:00.0"),
                                        Place(2, 10, "0000:07:00.0", 108)};
  EXPECT_TRUE(SameGpu(places[0], places[2]));
  EXPECT_FALSE(SameGpu(places[0], places[3]));
  EXPECT_FALSE(SameGpu(places[0], places[4]));  // same bus id, another host
  EXPECT_EQ(RanksSharingGpuInProcess(places, 0), 2);
  EXPECT_EQ(RanksSharingGpuInProcess(places, 1), 2);
  EXPECT_EQ(RanksSharingGpuInProcess(places, 2), 1);
  EXPECT_EQ(RanksSharingGpuInProcess(places, 3), 1);
  EXPECT_EQ(RanksSharingGpuInProcess(places, 4), 1);
  const GpuLayout l = LayoutOf(places);
  EXPECT_EQ(l.max_ranks_per_gpu, 3);
  EXPECT_EQ(l.residency.sms, 108);  // the smallest GPU's
  EXPECT_EQ(l.residency.blocks_per_sm, 1);
}

// GPU scope only where both ends are kernels of one GPU (any process) and
// the FIFO is device memory: not with another GPU of the host, not with
// the same bus id on another host, never for a FIFO the network proxy
// serves, never for oneself, and nowhere unless asked for.
TEST(GpuPlacement, GpuScopeOnlyBetweenKernelsOfOneGpu) {
  const std::vector<GpuPlace> places = {Place(1, 10, "0000:07:00.0"), Place(1, 10, "0000:07:00.0"),
                                        Place(1, 11, "0000:07:00.0"), Place(1, 11, "0000:08:00.0"),
                                        Place(2, 10, "0000:07:00.0")};
  // Rank 2 shares the GPU from another process: system scope.
  EXPECT_EQ(GpuScopePeers(places, 0, true), (std::vector<uint8_t>{0, 1, 0, 0, 0}));
  EXPECT_EQ(GpuScopePeers(places, 3, true), (std::vector<uint8_t>{0, 0, 0, 0, 0}));
  EXPECT_EQ(GpuScopePeers(places, 0, false), (std::vector<uint8_t>{0, 0, 0, 0, 0}));
  const std::vector<uint8_t> peers = GpuScopePeers(places, 0, true);
  transport::FifoLink link;
  link.peer = 1;
  link.medium = transport::Medium::kCudaPeer;
  EXPECT_EQ(GpuScopeOf(peers, link), 1u);
  link.peer = 2;
  link.medium = transport::Medium::kCudaIpc;
  EXPECT_EQ(GpuScopeOf(peers, link), 0u);
  link.peer = 1;
  link.medium = transport::Medium::kNet;  // a proxy (a CPU thread) at the other end
  EXPECT_EQ(GpuScopeOf(peers, link), 0u);
  link.peer = 3;
  link.medium = transport::Medium::kCudaPeer;  // another GPU
  EXPECT_EQ(GpuScopeOf(peers, link), 0u);
  link.peer = 7;  // not a rank
  EXPECT_EQ(GpuScopeOf(peers, link), 0u);
}

TEST(GpuPlacement, EveryGpuMustHoldItsRanksBlocks) {
  std::vector<GpuPlace> eight(8, Place(1, 10, "0000:07:00.0"));
  EXPECT_TRUE(CheckPlaces(eight, 16).ok());        // 128 of 132
  const base::Status st = CheckPlaces(eight, 17);  // 136 of 132
  EXPECT_EQ(st.code(), base::Code::kInvalidUsage);
  EXPECT_NE(st.message().find("0000:07:00.0"), std::string::npos) << st.message();
  // Two blocks per multiprocessor hold twice as many.
  std::vector<GpuPlace> roomy(8, Place(1, 10, "0000:07:00.0", 132, 2));
  EXPECT_TRUE(CheckPlaces(roomy, 33).ok());
  // Ranks on different GPUs do not add up.
  std::vector<GpuPlace> spread;
  for (int g = 0; g < 8; ++g)
    spread.push_back(Place(1, 10, ("0000:0" + std::to_string(g) + ":00.0").c_str()));
  EXPECT_TRUE(CheckPlaces(spread, 64).ok());
  // Processes on one GPU (MPS runs them at once) add up too.
  std::vector<GpuPlace> procs;
  for (int r = 0; r < 4; ++r) procs.push_back(Place(1, 100 + r, "0000:07:00.0"));
  EXPECT_TRUE(CheckPlaces(procs, 33).ok());
  EXPECT_FALSE(CheckPlaces(procs, 34).ok());
}

TEST(GpuPlacement, RanksOfAProcessOnAGpuNeedAWorkQueueEach) {
  std::vector<GpuPlace> nine(9, Place(1, 10, "0000:07:00.0", 132, 1, 8));
  const base::Status st = CheckPlaces(nine, 1);
  EXPECT_EQ(st.code(), base::Code::kInvalidUsage);
  EXPECT_NE(st.message().find("CUDA_DEVICE_MAX_CONNECTIONS"), std::string::npos) << st.message();
  nine.pop_back();
  EXPECT_TRUE(CheckPlaces(nine, 1).ok());  // 8 ranks, 8 queues
  // Separate processes have a context (and queues) each.
  std::vector<GpuPlace> procs;
  for (int r = 0; r < 9; ++r) procs.push_back(Place(1, 100 + r, "0000:07:00.0", 132, 1, 8));
  EXPECT_TRUE(CheckPlaces(procs, 1).ok());
}

TEST(GpuPlacement, StreamRule) {
  EXPECT_TRUE(GpuStreamRule(false, true, 1).ok());  // alone on its GPU: any stream
  EXPECT_TRUE(GpuStreamRule(true, false, 8).ok());  // non-blocking: always
  const base::Status legacy = GpuStreamRule(false, true, 2);
  EXPECT_EQ(legacy.code(), base::Code::kInvalidUsage);
  EXPECT_NE(legacy.message().find("legacy default stream"), std::string::npos) << legacy.message();
  EXPECT_NE(legacy.message().find("cudaStreamNonBlocking"), std::string::npos) << legacy.message();
  const base::Status blocking = GpuStreamRule(false, false, 2);
  EXPECT_EQ(blocking.code(), base::Code::kInvalidUsage);
  EXPECT_NE(blocking.message().find("blocking stream"), std::string::npos) << blocking.message();
}

// Records what LaunchOrder asks of an event, in a log shared by both events.
class FakeEvent final : public LaunchEvent {
 public:
  FakeEvent(std::string name, std::string* log) : name_(std::move(name)), log_(log) {}
  base::Status MakeStreamWait(void* stream) override {
    *log_ += "wait " + Name(stream) + " for " + name_ + "@" + recorded_on + "; ";
    return base::Status();
  }
  base::Status Record(void* stream) override {
    if (fail_record) return base::Internal("record failed");
    recorded_on = Name(stream);
    *log_ += "record " + name_ + "@" + recorded_on + "; ";
    return base::Status();
  }
  static std::string Name(void* s) {
    return s == nullptr ? "null" : std::string(static_cast<const char*>(s));
  }
  std::string recorded_on = "nothing";
  bool fail_record = false;

 private:
  std::string name_;
  std::string* log_;
};

// A rank's launch order with its events, as GpuRank keeps them; replays
// tracked or not.
struct Order {
  explicit Order(bool track_replays = false) : track(track_replays) {}
  std::string log;
  FakeEvent eager{"eager", &log};
  FakeEvent captured{"captured", &log};
  FakeEvent replayed{"replayed", &log};
  bool track;
  LaunchOrder order;

  LaunchEvents Events() {
    LaunchEvents e;
    e.eager = &eager;
    e.captured = &captured;
    e.replayed = track ? &replayed : nullptr;
    return e;
  }
  // A stream named `stream`, with `id` (a stream's process-unique id; by
  // default its name's first letter, so equal names are one stream).
  static LaunchSite Site(const char* stream, unsigned long long capture, unsigned long long id = 0) {
    LaunchSite site;
    site.stream = const_cast<char*>(stream);
    site.stream_id = id != 0 ? id : static_cast<unsigned char>(stream[0]);
    site.capturing = capture != 0;
    site.capture_id = capture;
    return site;
  }
  // One launch as GpuRank makes it: Before, the kernel, After; `capture`
  // 0 for an eager launch, else the capture sequence's id.
  void Launch(const char* stream, unsigned long long capture = 0, unsigned long long id = 0) {
    const LaunchSite site = Site(stream, capture, id);
    ASSERT_TRUE(order.Before(site, Events()).ok());
    log += std::string(site.capturing ? "node " : "kernel ") + FakeEvent::Name(site.stream) + "; ";
    ASSERT_TRUE(order.After(site, Events()).ok());
  }
};

// A launch on another stream than the previous eager launch waits for it;
// on the same stream the stream orders them and nothing is enqueued.
TEST(GpuLaunchOrder, ALaunchOnAnotherStreamWaitsForThePrevious) {
  Order o;
  EXPECT_FALSE(o.order.launched());
  o.Launch("a");
  o.Launch("b");
  o.Launch("b");
  o.Launch("a");
  EXPECT_TRUE(o.order.launched());
  EXPECT_EQ(o.log,
            "kernel a; record eager@a; "
            "wait b for eager@a; kernel b; record eager@b; "
            "kernel b; record eager@b; "
            "wait a for eager@b; kernel a; record eager@a; ");
}

// A destroyed stream's handle coming back as a new stream's has a new id:
// the new stream waits.
TEST(GpuLaunchOrder, StreamsAreToldApartByIdNotHandle) {
  Order o;
  o.Launch("a", 0, 1);
  o.Launch("a", 0, 2);  // the same handle, another stream
  EXPECT_EQ(o.log, "kernel a; record eager@a; wait a for eager@a; kernel a; record eager@a; ");
}

TEST(GpuLaunchOrder, AFailedRecordIsReported) {
  Order o;
  o.eager.fail_record = true;
  EXPECT_FALSE(o.order.After(Order::Site("a", 0), o.Events()).ok());
  EXPECT_FALSE(o.order.launched());
  o.eager.fail_record = false;
  o.Launch("a");  // the failed launch set nothing: no wait for it
  EXPECT_EQ(o.log, "kernel a; record eager@a; ");
}

// A captured launch neither waits for nor records the eager event (either
// would cross the capture's boundary); launches of one capture are chained
// by the captured event, also across the capture's streams; a new capture
// starts its own chain; eager launches after a capture wait only for the
// last eager launch (on another stream), as if the capture had not
// happened: replays are the caller's to order where they are not tracked.
TEST(GpuLaunchOrder, CapturedLaunchesChainInsideTheirCaptureOnly) {
  Order o;
  o.Launch("a");        // eager
  o.Launch("g", 7);     // capture 7 on stream g: first of its capture
  o.Launch("h", 7);     // capture 7 on a forked stream h: after the node on g
  o.Launch("b");        // eager again: after the eager launch, not the nodes
  o.Launch("g", 9);     // a new capture: no wait
  o.Launch("g", 9);
  EXPECT_EQ(o.order.last_capture(), 9u);
  EXPECT_FALSE(o.order.replays_tracked());
  EXPECT_EQ(o.log,
            "kernel a; record eager@a; "
            "node g; record captured@g; "
            "wait h for captured@g; node h; record captured@h; "
            "wait b for eager@a; kernel b; record eager@b; "
            "node g; record captured@g; "
            "wait g for captured@g; node g; record captured@g; ");
}

// Tracked replays: each captured launch adds a node recording the replayed
// event after it; once one was added, every eager launch waits for that
// event (an eager call after a replay runs after it, whatever its stream),
// also on the stream of the previous eager launch.
TEST(GpuLaunchOrder, TrackedReplaysOrderTheEagerLaunchesAfterThem) {
  Order o(true);
  o.Launch("a");
  EXPECT_FALSE(o.order.replays_tracked());
  o.Launch("g", 7);
  o.Launch("h", 7);
  EXPECT_TRUE(o.order.replays_tracked());
  o.Launch("a");
  o.Launch("a");
  EXPECT_EQ(o.log,
            "kernel a; record eager@a; "
            "node g; record captured@g; record replayed@g; "
            "wait h for captured@g; node h; record captured@h; record replayed@h; "
            "wait a for replayed@h; kernel a; record eager@a; "
            "wait a for replayed@h; kernel a; record eager@a; ");
}

// Capturing first (no eager launch yet): the first eager launch waits for
// no eager launch; tracked, for the replayed event.
TEST(GpuLaunchOrder, ACaptureBeforeAnyEagerLaunch) {
  Order o;
  o.Launch("g", 3);
  EXPECT_FALSE(o.order.launched());
  o.Launch("a");
  EXPECT_EQ(o.log, "node g; record captured@g; kernel a; record eager@a; ");
  Order t(true);
  t.Launch("g", 3);
  t.Launch("a");
  EXPECT_EQ(t.log, "node g; record captured@g; record replayed@g; wait a for replayed@g; kernel a; record eager@a; ");
}

// A failed record inside a capture leaves the chain as it was.
TEST(GpuLaunchOrder, AFailedCapturedRecordIsReported) {
  Order o;
  o.captured.fail_record = true;
  EXPECT_FALSE(o.order.After(Order::Site("g", 5), o.Events()).ok());
  EXPECT_EQ(o.order.last_capture(), 0u);
}

}  // namespace
}  // namespace ringo::collectives
