#include "collectives/engines/registry.h"

#include <algorithm>

#include "collectives/engines/direct.h"
#include "collectives/engines/gpu_p2p.h"
#include "collectives/engines/gpu_ring.h"
#include "collectives/engines/host_p2p.h"
#include "collectives/engines/host_ring.h"
#include "collectives/engines/oneshot.h"
#include "collectives/engines/ordered.h"

namespace ringo::collectives {

using base::Status;
using base::StatusOr;

namespace {

using EnginePtr = std::unique_ptr<Engine>;

bool OnGpu(const EngineSetup& s) { return s.device >= 0; }

StatusOr<std::shared_ptr<GpuRank>> SharedGpu(const EngineSetup& s, EngineSet& set) {
  if (set.gpu == nullptr) {
    ASSIGN_OR_RETURN(set.gpu, GpuRank::Create(s.rank, s.device, s.timeout_ms, s.ranks_sharing_gpu));
  }
  return set.gpu;
}

// The board, where every rank shares one memory domain and the planner gave
// it room. Every rank formats its own header before any posts (the barrier),
// then checks every rank's.
StatusOr<std::shared_ptr<BoardState>> SharedBoard(const EngineSetup& s, EngineSet& set) {
  if (set.board == nullptr && s.pages != nullptr && s.host.board_bytes > 0) {
    set.board = std::make_shared<BoardState>(s.pages, static_cast<size_t>(s.host.board_bytes));
    RETURN_IF_ERROR(s.exchange->Barrier().WithContext("board"));
    RETURN_IF_ERROR(transport::CheckBoards(*s.pages, static_cast<size_t>(s.host.board_bytes)));
  }
  return set.board;
}

// ---- the factories: null where the engine does not apply ----

StatusOr<EnginePtr> MakeGpuRing(const EngineSetup& s, EngineSet& set) {
  if (!OnGpu(s)) return EnginePtr();
  ASSIGN_OR_RETURN(auto gpu, SharedGpu(s, set));
  ASSIGN_OR_RETURN(auto ring, GpuRing::Connect(s, gpu));
  return EnginePtr(std::move(ring));
}

StatusOr<EnginePtr> MakeHostRing(const EngineSetup& s, EngineSet& set) {
  if (OnGpu(s)) return EnginePtr();
  ASSIGN_OR_RETURN(auto board, SharedBoard(s, set));
  ASSIGN_OR_RETURN(std::unique_ptr<HostRing> ring, HostRing::Connect(s, board));
  if (s.host.deterministic && s.nranks > 1) return EnginePtr(std::make_unique<Ordered>(std::move(ring), s.host));
  return EnginePtr(std::move(ring));
}

StatusOr<EnginePtr> MakeOneShot(const EngineSetup& s, EngineSet& set) {
  if (OnGpu(s)) return EnginePtr();
  ASSIGN_OR_RETURN(auto board, SharedBoard(s, set));
  if (board == nullptr) return EnginePtr();
  return EnginePtr(std::make_unique<OneShot>(s, board));
}

StatusOr<EnginePtr> MakeDirect(const EngineSetup& s, EngineSet& set) {
  if (OnGpu(s) || s.nranks < 2) return EnginePtr();
  ASSIGN_OR_RETURN(auto board, SharedBoard(s, set));
  if (board == nullptr) return EnginePtr();
  Engine* ring = set.Find("ordered ring");
  if (ring == nullptr) ring = set.Find("ring");
  return EnginePtr(std::make_unique<Direct>(s, board, set.Find("one-shot"), ring));
}

struct Registration {
  const char* name;
  StatusOr<EnginePtr> (*make)(const EngineSetup&, EngineSet&);
};

// Built in this order; asked in the reverse one.
constexpr Registration kEngines[] = {
    {"GPU ring", MakeGpuRing},
    {"ring", MakeHostRing},
    {"one-shot", MakeOneShot},
    {"direct", MakeDirect},
};

}  // namespace

Engine* EngineSet::Find(const std::string& name) const {
  for (const auto& e : engines) {
    if (name == e->name()) return e.get();
  }
  return nullptr;
}

StatusOr<EngineSet> ConnectEngines(const EngineSetup& setup) {
  EngineSet set;
  for (const Registration& r : kEngines) {
    ASSIGN_OR_RETURN(EnginePtr engine, r.make(setup, set));
    if (engine != nullptr) set.engines.push_back(std::move(engine));
  }
  std::reverse(set.engines.begin(), set.engines.end());
  if (OnGpu(setup)) {
    ASSIGN_OR_RETURN(auto gpu, SharedGpu(setup, set));
    set.p2p = std::make_unique<GpuP2p>(setup, gpu);
  } else {
    set.p2p = std::make_unique<HostP2p>(setup);
  }
  return set;
}

}  // namespace ringo::collectives
