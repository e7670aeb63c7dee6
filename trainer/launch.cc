#include "trainer/launch.h"

#include <cstdio>

#include "launch/fork.h"
#include "launch/launch_env.h"
#include "launch/rendezvous.h"
#include "trainer/comm.h"

namespace ringo::train {

using base::Status;
using base::StatusOr;

namespace {

constexpr char kProgram[] = "ringo-train";

StatusOr<ringoUniqueId> NewUniqueId() {
  ringoUniqueId id;
  RETURN_IF_ERROR(RingoCall(ringoGetUniqueId(&id), "ringoGetUniqueId", nullptr));
  return id;
}

}  // namespace

int RunLocalRanks(int nranks, const RankMain& rank_main, bool elastic) {
  // One rank makes no communicator, so it needs no id (nor its listener).
  if (nranks == 1) return launch::RunForkedRanks(kProgram, 1, [&](int) { return rank_main(0, 1, ringoUniqueId{}); });
  auto id = NewUniqueId();
  if (!id.ok()) {
    std::fprintf(stderr, "ringo-train: %s\n", id.status().message().c_str());
    return 1;
  }
  const ringoUniqueId shared = *id;
  return launch::RunForkedRanks(kProgram, nranks, [&](int rank) { return rank_main(rank, nranks, shared); },
                                /*bind_to_core=*/false, /*survivors_go_on=*/elastic);
}

int RunLaunchedRank(const RankMain& rank_main) {
  auto env = launch::DetectLaunch();
  if (!env.ok()) {
    std::fprintf(stderr, "ringo-train: %s\n", env.status().message().c_str());
    return 1;
  }
  if (env->size == 1) return rank_main(0, 1, ringoUniqueId{});
  auto id = launch::ObtainUniqueId(*env, kProgram, launch::RendezvousTimeout());
  if (!id.ok()) {
    std::fprintf(stderr, "ringo-train: rank %d: %s\n", env->rank, id.status().message().c_str());
    return 1;
  }
  const int rc = rank_main(env->rank, env->size, *id);
  launch::ReleaseUniqueId(*env, kProgram);
  return rc;
}

}  // namespace ringo::train
