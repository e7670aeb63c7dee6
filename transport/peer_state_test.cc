// What a rank publishes about itself: process liveness as peers probe it
// (zombies and reused pids are gone, stopped processes are told apart),
// fault notices written once and read back with their origin whatever the
// peer wrote, and wait cells.
#include "transport/peer_state.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "gtest/gtest.h"

namespace ringo::transport {
namespace {

TEST(PeerState, SelfIsRunning) {
  const ProcessId self = SelfProcessId();
  EXPECT_EQ(self.pid, getpid());
  EXPECT_NE(self.start_ticks, 0u);
  EXPECT_EQ(ProbeProcess(self), ProcessState::kRunning);
  EXPECT_EQ(ProbeProcess(ProcessId{0, 0}), ProcessState::kRunning);  // unknown
}

TEST(PeerState, ZombieStoppedAndReusedPids) {
  const pid_t child = fork();
  if (child == 0) {
    while (true) pause();
  }
  ASSERT_GT(child, 0);
  const ProcessId id{child, 0};  // start time unknown: the pid alone
  // A start time other than the process's: the pid was reused, the peer is gone.
  EXPECT_EQ(ProbeProcess(ProcessId{child, 1}), ProcessState::kGone);
  EXPECT_EQ(ProbeProcess(id), ProcessState::kRunning);
  ASSERT_EQ(kill(child, SIGSTOP), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, WUNTRACED), child);  // stopped, not only signalled
  ASSERT_TRUE(WIFSTOPPED(status));
  EXPECT_EQ(ProbeProcess(id), ProcessState::kStopped);
  ASSERT_EQ(kill(child, SIGKILL), 0);
  // Dead and not reaped (WNOWAIT): a zombie, which kill(pid, 0) still finds.
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
  EXPECT_EQ(kill(child, 0), 0);
  EXPECT_EQ(ProbeProcess(id), ProcessState::kGone);
  waitpid(child, nullptr, 0);
  EXPECT_EQ(ProbeProcess(id), ProcessState::kGone);
}

TEST(PeerState, NoticesCarryTheOriginAndAreWrittenOnce) {
  FaultNotice n;
  EXPECT_TRUE(NoticeStatus(n, "rank 0 waiting", 1, 4).ok());
  WriteFaultNotice(n, base::Timeout("rank 3 stalled"), /*self_rank=*/1, /*seq=*/7);
  base::Status st = NoticeStatus(n, "rank 0 waiting", 1, 4);
  EXPECT_EQ(st.code(), base::Code::kTimeout);
  EXPECT_EQ(st.origin(), 1);  // its own fault: the writer
  EXPECT_EQ(st.origin_seq(), 7u);
  EXPECT_NE(st.message().find("failure started at rank 1 in collective #7: rank 3 stalled"), std::string::npos)
      << st.message();
  // Written once: a later fault does not replace the first.
  WriteFaultNotice(n, base::RemoteError("later"), 1, 9);
  EXPECT_EQ(NoticeStatus(n, "x", 1, 4).code(), base::Code::kTimeout);
  // A relayed fault keeps its origin, message and collective.
  FaultNotice relay;
  WriteFaultNotice(relay, st, /*self_rank=*/2, /*seq=*/8);
  base::Status again = NoticeStatus(relay, "rank 3 waiting", 2, 4);
  EXPECT_EQ(again.origin(), 1);
  EXPECT_EQ(again.origin_seq(), 7u);
  EXPECT_EQ(again.origin_message(), "rank 3 stalled");
}

TEST(PeerState, GarbageNoticesAreBounded) {
  FaultNotice n;
  std::memset(static_cast<void*>(&n), 0x7f, sizeof(n));  // no NUL, absurd origin and code
  n.set.store(1);
  base::Status st = NoticeStatus(n, "rank 0 waiting", 2, 4);
  EXPECT_EQ(st.code(), base::Code::kRemoteError);
  EXPECT_EQ(st.origin(), 2);  // an origin out of range is the peer itself
  EXPECT_LE(st.origin_message().size(), kFaultTextBytes);
}

TEST(PeerState, WaitCells) {
  WaitCells cells{};
  EXPECT_FALSE(ReadWait(cells).waiting);
  cells.cell[3].store(EncodeWait(5, NowMs() - 1000));
  cells.cell[1].store(EncodeWait(2, NowMs() - 10));
  PeerWait w = ReadWait(cells);
  EXPECT_TRUE(w.waiting);
  EXPECT_EQ(w.on_rank, 5);  // the oldest
  EXPECT_GE(w.age_ms, 1000);
}

}  // namespace
}  // namespace ringo::transport
