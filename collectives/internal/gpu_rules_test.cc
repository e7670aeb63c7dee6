// The GPU communicator's rules that need no GPU: ranks per GPU and per
// process from every rank's place, the residency and work-queue checks, the
// stream rule, and the launch order across streams (against a fake event).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "collectives/internal/gpu_order.h"
#include "collectives/internal/gpu_placement.h"

namespace ringo::collectives::internal {
namespace {

GpuPlace Place(uint64_t host, int pid, const char* bus, int sms = 132, int blocks = 1,
               int queues = 32) {
  GpuPlace p;
  std::memset(&p, 0, sizeof(p));
  p.host_hash = host;
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

// Records what LaunchOrder asks of the event.
class FakeEvent final : public LaunchEvent {
 public:
  base::Status MakeStreamWait(void* stream) override {
    log += "wait " + Name(stream) + " for " + recorded_on + "; ";
    return base::Status();
  }
  base::Status Record(void* stream) override {
    if (fail_record) return base::Internal("record failed");
    recorded_on = Name(stream);
    log += "record " + recorded_on + "; ";
    return base::Status();
  }
  static std::string Name(void* s) {
    return s == nullptr ? "null" : std::string(static_cast<const char*>(s));
  }
  std::string log;
  std::string recorded_on = "nothing";
  bool fail_record = false;
};

// One launch as GpuComm makes it: Before, the kernel, After.
void Launch(LaunchOrder& order, FakeEvent& event, const char* stream) {
  void* s = const_cast<char*>(stream);
  ASSERT_TRUE(order.Before(s, event).ok());
  event.log += "kernel " + FakeEvent::Name(s) + "; ";
  ASSERT_TRUE(order.After(s, event).ok());
}

TEST(GpuLaunchOrder, EachLaunchWaitsForThePreviousWhateverTheStream) {
  LaunchOrder order;
  FakeEvent event;
  EXPECT_FALSE(order.launched());
  Launch(order, event, "a");
  Launch(order, event, "b");
  Launch(order, event, "b");
  Launch(order, event, "a");
  EXPECT_TRUE(order.launched());
  EXPECT_EQ(event.log,
            "kernel a; record a; "
            "wait b for a; kernel b; record b; "
            "wait b for b; kernel b; record b; "
            "wait a for b; kernel a; record a; ");
}

TEST(GpuLaunchOrder, AFailedRecordIsReported) {
  LaunchOrder order;
  FakeEvent event;
  event.fail_record = true;
  EXPECT_FALSE(order.After(nullptr, event).ok());
  EXPECT_FALSE(order.launched());
}

}  // namespace
}  // namespace ringo::collectives::internal
