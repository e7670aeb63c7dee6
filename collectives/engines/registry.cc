#include "collectives/engines/registry.h"

#include <algorithm>

#include "collectives/engines/direct.h"
#include "collectives/engines/doubling.h"
#include "collectives/engines/gpu_p2p.h"
#include "collectives/engines/gpu_doubling.h"
#include "collectives/engines/gpu_wire.h"
#include "collectives/engines/gpu_ring.h"
#include "collectives/engines/host_p2p.h"
#include "collectives/engines/host_ring.h"
#include "collectives/engines/oneshot.h"
#include "collectives/engines/ordered.h"
#include "collectives/engines/wire.h"
#include "transport/bootstrap/exchange.h"

namespace ringo::collectives {

using base::Status;
using base::StatusOr;

namespace {

using EnginePtr = std::unique_ptr<Engine>;

bool OnGpu(const EngineSetup& s) { return s.device >= 0; }

StatusOr<std::shared_ptr<GpuRank>> SharedGpu(const EngineSetup& s, EngineSet& set) {
  if (set.gpu == nullptr) {
    ASSIGN_OR_RETURN(set.gpu, GpuRank::Create(s.rank, s.device, s.timeout_ms, s.ranks_sharing_gpu,
                                                     s.settings.local.gpu_track_replays));
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

using P2pPtr = std::unique_ptr<PointToPoint>;

StatusOr<P2pPtr> MakeGpuP2p(const EngineSetup& s, EngineSet& set) {
  if (!OnGpu(s)) return P2pPtr();
  ASSIGN_OR_RETURN(auto gpu, SharedGpu(s, set));
  return P2pPtr(std::make_unique<GpuP2p>(s, gpu));
}

StatusOr<P2pPtr> MakeHostP2p(const EngineSetup& s, EngineSet&) {
  if (OnGpu(s)) return P2pPtr();
  return P2pPtr(std::make_unique<HostP2p>(s));
}

// Tagged pairs: on host communicators where some rank asked for them
// (*refusal says why a tagged call is refused where there are none).
StatusOr<std::unique_ptr<HostTagged>> MakeTagged(const EngineSetup& s, std::string* refusal) {
  if (OnGpu(s)) {
    *refusal = " runs on host communicators only";
    return std::unique_ptr<HostTagged>();
  }
  *refusal = " needs a communicator made with config->tagged_p2p = 1";
  if (!s.tagged) return std::unique_ptr<HostTagged>();
  return std::make_unique<HostTagged>(s.rank, s.nranks, s.connector, TaggedSlotBytes(s.settings.shared.slot_bytes));
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

struct PointToPointRegistration {
  const char* name;
  StatusOr<P2pPtr> (*make)(const EngineSetup&, EngineSet&);
};

// The first that applies is the communicator's.
constexpr PointToPointRegistration kPointToPoint[] = {
    {"GPU point-to-point", MakeGpuP2p},
    {"host point-to-point", MakeHostP2p},
};

}  // namespace

Engine* EngineSet::Find(const std::string& name) const {
  for (const auto& e : engines) {
    if (name == e->name()) return e.get();
  }
  return nullptr;
}

bool EngineSet::asynchronous() const {
  for (const auto& e : engines) {
    if (e->asynchronous()) return true;
  }
  return false;
}

void EngineSet::Abort(const Status& why, uint64_t seq) const {
  if (residence != nullptr) residence->Abort(why, seq);
  for (const auto& engine : engines) engine->Abort(why, seq);
  if (p2p != nullptr) p2p->Abort(why, seq);
  if (tagged != nullptr) tagged->Abort(why, seq);
}

void EngineSet::ReleaseEngines() {
  engines.clear();
  p2p.reset();
  tagged.reset();
  board.reset();
  gpu.reset();
}

namespace {

StatusOr<EngineSet> BuildEngines(const EngineSetup& setup, std::unique_ptr<Residence> residence) {
  EngineSet set;
  set.residence = std::move(residence);
  for (const Registration& r : kEngines) {
    ASSIGN_OR_RETURN(EnginePtr engine, r.make(setup, set));
    if (engine != nullptr) set.engines.push_back(std::move(engine));
  }
  std::reverse(set.engines.begin(), set.engines.end());
  for (const PointToPointRegistration& r : kPointToPoint) {
    ASSIGN_OR_RETURN(set.p2p, r.make(setup, set));
    if (set.p2p != nullptr) break;
  }
  if (set.p2p == nullptr) return base::Internal("no point-to-point engine applies");
  // Over the point-to-point engine, where some pair crosses the network
  // (host memory): small all-reduces by recursive doubling, and before them
  // compressed sums between hosts.
  // GPU communicators: recursive doubling only where RINGO_ALGO=doubling
  // asks for it (never run on a GPU yet).
  if (OnGpu(setup) && setup.nranks > 1 && setup.settings.shared.algorithm == Algorithm::kDoubling &&
      setup.settings.shared.deterministic == 0) {
    ASSIGN_OR_RETURN(auto gpu, SharedGpu(setup, set));
    ASSIGN_OR_RETURN(std::unique_ptr<GpuDoubling> doubling, GpuDoubling::Make(setup, gpu, set.p2p.get()));
    set.engines.insert(set.engines.begin(), std::move(doubling));
  }
  // GPU communicators: the compressed wire only where RINGO_GPU_WIRE=1 asks
  // for it (never run on a GPU yet).
  const bool any_net = setup.nranks > 1 && setup.connector != nullptr &&
                       std::find(setup.connector->spec().net.begin(), setup.connector->spec().net.end(), true) !=
                           setup.connector->spec().net.end();
  if (OnGpu(setup) && any_net && setup.settings.shared.gpu_wire != 0) {
    ASSIGN_OR_RETURN(auto gpu, SharedGpu(setup, set));
    ASSIGN_OR_RETURN(std::unique_ptr<GpuWire> wire, GpuWire::Make(setup, gpu, set.p2p.get()));
    set.engines.insert(set.engines.begin(), std::move(wire));
  }
  if (!OnGpu(setup) && setup.nranks > 1 && setup.connector != nullptr) {
    if (any_net) {
      set.engines.insert(set.engines.begin(), std::make_unique<Doubling>(setup, set.p2p.get()));
      if (setup.settings.local.wire_staged) {
        set.engines.insert(set.engines.begin(), GpuWire::MakeOnHost(setup, set.p2p.get()));
      } else {
        set.engines.insert(set.engines.begin(), std::make_unique<WireEngine>(setup, set.p2p.get()));
      }
    }
  }
  return set;
}

}  // namespace

StatusOr<EngineSet> ConnectEngines(EngineSetup* setup) {
  ASSIGN_OR_RETURN(std::unique_ptr<Residence> residence, PrepareResidence(setup));
  StatusOr<EngineSet> made = BuildEngines(*setup, std::move(residence));
  // A rank that failed here would leave the others' first collective waiting.
  RETURN_IF_ERROR(transport::AgreeOk(*setup->exchange, made.status(), "connect its engines"));
  EngineSet set = std::move(made).value();
  ASSIGN_OR_RETURN(set.tagged, MakeTagged(*setup, &set.tagged_refusal));
  if (set.tagged != nullptr) {
    // Every pair, now: a receive from any source must hear every rank.
    RETURN_IF_ERROR(transport::AgreeOk(*setup->exchange, set.tagged->Connect(setup->abort), "connect its tagged pairs"));
  }
  return set;
}

}  // namespace ringo::collectives
