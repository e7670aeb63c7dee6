// The network transports this process uses between hosts, each made once on
// first use: TCP sockets, and InfiniBand verbs where libibverbs loads and an
// active port exists. Which one an edge takes is agreed from both ends'
// records (ChooseNet), so the two ends always pick the same.
// Thread-safe; the Nets live as long as the process.
#ifndef RINGO_TRANSPORT_NET_CHOICE_H_
#define RINGO_TRANSPORT_NET_CHOICE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/status.h"
#include "transport/net/net.h"

namespace ringo::transport::net {

enum class NetKind { kSocket = 0, kIb = 1 };

const char* NetKindName(NetKind kind);

// The process's Net of `kind`; for verbs, an error saying why it cannot be
// used. `numa` (this rank's NUMA node, -1 unknown) orders the verbs ports
// nearest first; the first call's value holds.
base::StatusOr<Net*> ProcessNet(const base::Config& config, NetKind kind, int numa = -1);

// This process's verbs fabric, for its peer record: nonzero where verbs can
// be used (its first port's NetProperties::fabric), 0 where RINGO_NET=socket,
// RINGO_IB_DISABLE=1, or verbs is unusable (said once at INFO, with why).
uint64_t VerbsFabric(const base::Config& config, int numa = -1);

// The transport of an edge between this rank (verbs fabric `mine`) and
// `peer_rank` (fabric `theirs`): verbs when both have one and it is the
// same, sockets otherwise; with RINGO_NET=ib, an error where verbs cannot
// join them. Both ends compute the same answer from the same records.
base::StatusOr<NetKind> ChooseNet(const base::Config& config, uint64_t mine, uint64_t theirs, int self_rank,
                                  int peer_rank);

// The order in which ring channels take `net`'s devices, and so how many
// they spread over: those that reach what device 0 reaches (verbs ports on
// its fabric; every socket interface), on NUMA node `numa` first, then on
// other nodes, then those whose node is unknown (virtual interfaces, or
// every device when `numa` is -1), each group in the transport's own order. `node_of` gives
// a device's NUMA node from its sysfs path (-1: unknown); by default it
// reads PATH/numa_node.
std::vector<int> DevicesNearFirst(const Net& net, int numa,
                                  const std::function<int(const std::string& pci_path)>& node_of = nullptr);

}  // namespace ringo::transport::net

#endif  // RINGO_TRANSPORT_NET_CHOICE_H_
