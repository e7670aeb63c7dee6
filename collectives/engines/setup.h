// What an engine is built from: everything a communicator's setup decided
// before it connects its engines (communicator_init.cc's steps: the ranks'
// records and agreed settings, the ring, the geometry), what the residence
// adds (residence.h: the device geometry, the host's pages), and the shared
// means of connecting (the exchange, the connector).
#ifndef RINGO_COLLECTIVES_ENGINES_SETUP_H_
#define RINGO_COLLECTIVES_ENGINES_SETUP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "base/config.h"
#include "collectives/plan/planner.h"
#include "collectives/plan/ring_choice.h"
#include "collectives/plan/settings.h"
#include "transport/bootstrap/exchange.h"
#include "transport/connect/connector.h"
#include "transport/shm/host_pages.h"

namespace ringo::collectives {

struct EngineSetup {
  int rank = 0;
  int nranks = 1;
  uint64_t tag = 0;                      // names the communicator's shared memory
  int local_ranks = 1;                   // ranks that share this rank's memory domain, itself included
  const base::Config* config = nullptr;  // the communicator's snapshot
  CommSettings settings;                 // rank 0's shared settings, this rank's local ones
  RingChoice ring;                       // order and edge transports, the same on every rank
  int pos = 0;                           // this rank's ring position
  // Host communicators (a GPU communicator's network proxy spins as they do).
  CommGeometry host;
  // Tagged point-to-point pairs: some rank asked for them (CommOptions::tagged).
  bool tagged = false;
  // GPU communicators (device >= 0, or -1 for host memory): the ring's
  // geometry and the ranks of this process on this rank's GPU (itself
  // included), set by the residence.
  int device = -1;
  DeviceGeometry gpu;
  // The GPU ranks span hosts: some ring edges go through pinned host memory
  // and the network proxy, so every rank runs the Simple protocol alone
  // (the proxy moves whole slots) and no call may be captured in a graph.
  bool gpu_hosts_spanned = false;
  int ranks_sharing_gpu = 1;
  // Per rank, 1 where this rank's FIFOs with it are ordered at GPU scope
  // (gpu_placement.h's GpuScopePeers).
  std::vector<uint8_t> gpu_scope_peers;
  // How the engines connect: the communicator's exchange (it carries
  // messages), its connector, and where every rank shares one memory
  // domain, their shared pages (null otherwise).
  transport::Exchange* exchange = nullptr;
  transport::Connector* connector = nullptr;
  std::shared_ptr<transport::HostPages> pages;
  int64_t timeout_ms = 0;
  // The communicator's abort flag, which ends any wait (connections made
  // lazily included).
  const std::atomic<bool>* abort = nullptr;
  // Fails the communicator at once (records `why`, raises the abort flag,
  // tells the peers), for an engine whose failure on one thread must stop
  // its other threads. Any thread.
  std::function<void(const base::Status&)> on_fault;
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_SETUP_H_
