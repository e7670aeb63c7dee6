// The control service: a rank answers while its own threads are busy or
// blocked; a rank without a handler, a slow one, a stopped process and a
// dead one each end an Ask the way control.h says, between threads (memory)
// and between processes (the mesh).
#include "transport/bootstrap/control.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "base/config.h"
#include "gtest/gtest.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/exchange.h"
#include "transport/bootstrap/mesh.h"

namespace ringo::transport {
namespace {

using base::Code;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr uint64_t kContext = 77;

int64_t MsSince(steady_clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(steady_clock::now() - t).count();
}

TEST(ControlService, ARankAnswersWhileItsOwnThreadIsBlocked) {
  auto fabric = std::make_shared<LocalFabric>(3);
  std::vector<std::shared_ptr<MessageFabric>> views;
  for (int r = 0; r < 3; ++r) views.push_back(LocalFabric::View(fabric, r));
  for (int r = 0; r < 3; ++r) {
    views[r]->control().Register(kContext, ControlKind::kWhere, [r](int src, const std::string& req) {
      return "rank " + std::to_string(r) + " answers " + std::to_string(src) + ": " + req;
    });
  }
  // Rank 1's own thread waits for a message that never comes.
  std::atomic<bool> stop{false};
  std::thread blocked([&] {
    std::string data;
    (void)views[1]->Recv(2, kContext, 12345, &data, DeadlineAfterMs(10000), &stop);
  });
  auto answer = views[0]->control().Ask(1, kContext, ControlKind::kWhere, "where?", DeadlineAfterMs(2000));
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ(*answer, "rank 1 answers 0: where?");
  // A rank asks itself, and every rank asks every rank.
  for (int a = 0; a < 3; ++a) {
    for (int b = 0; b < 3; ++b) {
      auto x = views[a]->control().Ask(b, kContext, ControlKind::kWhere, "x", DeadlineAfterMs(2000));
      ASSERT_TRUE(x.ok()) << a << "->" << b << ": " << x.status().ToString();
      EXPECT_EQ(*x, "rank " + std::to_string(b) + " answers " + std::to_string(a) + ": x");
    }
  }
  stop.store(true);
  blocked.join();
}

TEST(ControlService, NoHandlerIsAnErrorAndASlowOneATimeout) {
  auto fabric = std::make_shared<LocalFabric>(2);
  auto a = LocalFabric::View(fabric, 0);
  auto b = LocalFabric::View(fabric, 1);
  auto none = a->control().Ask(1, kContext, ControlKind::kWhere, "", DeadlineAfterMs(2000));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Code::kRemoteError) << none.status().ToString();
  // Another kind of the same context is not answered by this handler.
  // The handler answers far later than the deadline, so the bound below
  // tells a deadline kept from an answer awaited, with room for a loaded machine.
  b->control().Register(kContext, ControlKind::kAgree, [](int, const std::string&) {
    std::this_thread::sleep_for(milliseconds(2000));
    return std::string("late");
  });
  EXPECT_FALSE(a->control().Ask(1, kContext, ControlKind::kWhere, "", DeadlineAfterMs(2000)).ok());
  const auto start = steady_clock::now();
  auto slow = a->control().Ask(1, kContext, ControlKind::kAgree, "", DeadlineAfterMs(100));
  ASSERT_FALSE(slow.ok());
  EXPECT_EQ(slow.status().code(), Code::kTimeout) << slow.status().ToString();
  EXPECT_LT(MsSince(start), 1000);
  // Unregister waits for the running handler, and then nothing answers.
  b->control().Unregister(kContext, ControlKind::kAgree);
  EXPECT_FALSE(a->control().Ask(1, kContext, ControlKind::kAgree, "", DeadlineAfterMs(2000)).ok());
}

std::string IfName() {
  const std::string& spec = base::GetConfig().socket_ifname;
  return spec.empty() ? "lo" : spec;
}

// Rank 1 is a child process with a mesh and a handler; the parent (rank 0)
// asks it, stops it, resumes it, kills it.
TEST(ControlService, AcrossProcessesAStoppedRankTimesOutAndADeadOneFailsAtOnce) {
  auto id = CreateUniqueId("", IfName(), 20000);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  const pid_t child = fork();
  if (child == 0) {
    auto boot = Bootstrap::Connect(*id, 1, 2, 20000);
    if (!boot.ok()) _exit(2);
    auto mesh = Mesh::Create(**boot, id->nonce, IfName());
    if (!mesh.ok()) _exit(3);
    (*mesh)->control().Register(kContext, ControlKind::kWhere,
                                [](int, const std::string& req) { return "child: " + req; });
    (void)(*boot)->Barrier();
    pause();  // answers from the service thread until killed
    _exit(0);
  }
  ASSERT_GT(child, 0);
  auto boot = Bootstrap::Connect(*id, 0, 2, 20000);
  ASSERT_TRUE(boot.ok()) << boot.status().ToString();
  auto mesh = Mesh::Create(**boot, id->nonce, IfName());
  ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
  ASSERT_TRUE((*boot)->Barrier().ok());
  ControlService& control = (*mesh)->control();
  auto first = control.Ask(1, kContext, ControlKind::kWhere, "hello", DeadlineAfterMs(5000));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(*first, "child: hello");

  ASSERT_EQ(kill(child, SIGSTOP), 0);
  // kill() returns before the child stops: until it has, it may still answer.
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, WUNTRACED), child);
  ASSERT_TRUE(WIFSTOPPED(status));
  auto start = steady_clock::now();
  auto stopped = control.Ask(1, kContext, ControlKind::kWhere, "stopped?", DeadlineAfterMs(300));
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.status().code(), Code::kTimeout) << stopped.status().ToString();
  EXPECT_GE(MsSince(start), 250);
  ASSERT_EQ(kill(child, SIGCONT), 0);
  ASSERT_EQ(waitpid(child, &status, WCONTINUED), child);
  ASSERT_TRUE(WIFCONTINUED(status));
  auto resumed = control.Ask(1, kContext, ControlKind::kWhere, "back", DeadlineAfterMs(5000));
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(*resumed, "child: back");

  ASSERT_EQ(kill(child, SIGKILL), 0);
  ASSERT_EQ(waitpid(child, &status, 0), child);
  // The mesh notices the closed connection; an Ask then fails long before its deadline.
  std::this_thread::sleep_for(milliseconds(200));
  start = steady_clock::now();
  auto dead = control.Ask(1, kContext, ControlKind::kWhere, "gone?", DeadlineAfterMs(5000));
  ASSERT_FALSE(dead.ok());
  EXPECT_NE(dead.status().code(), Code::kTimeout) << dead.status().ToString();
  EXPECT_LT(MsSince(start), 1000);
}

}  // namespace
}  // namespace ringo::transport
