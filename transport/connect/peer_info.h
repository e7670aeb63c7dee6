// What a rank tells the others about itself at init, so that every rank
// decides alike how each pair connects: its host (memory), its machine
// (CPUs), its process, its device and NUMA node. Fixed-size, sent raw over
// the exchange; everything a peer sent is checked before it is used.
// Settings of the collectives (channels, algorithm, ...) travel beside it in
// a record of collectives/'s own.
#ifndef RINGO_TRANSPORT_CONNECT_PEER_INFO_H_
#define RINGO_TRANSPORT_CONNECT_PEER_INFO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "transport/bootstrap/exchange.h"

namespace ringo::transport {

struct PeerInfo {
  uint64_t host_hash;     // boot id, host name and network namespace (or RINGO_HOSTID)
  uint64_t machine_hash;  // boot id: ranks that share CPUs, whatever their hosts
  int32_t pid;
  int32_t rank;
  int32_t device;  // CUDA device, -1 for host memory
  int32_t numa;    // NUMA node this rank runs on, -1 unknown
  int32_t cores;   // this rank's CPUs (std::thread::hardware_concurrency)
  int32_t reserved;
  uint64_t start_ticks;  // with pid: the process (peer_state.h)
};

// This rank's record. Its host is named by RINGO_HOSTID (`host_id`) when
// set, else by the boot id, the host name and the network namespace.
PeerInfo LocalPeerInfo(int rank, int device, const std::string& host_id = "");

// Whether every rank's record is one a Ringo rank of this version could
// send (ranks in order, values in range); says which rank's field is wrong
// otherwise.
base::Status ValidatePeerInfos(const std::vector<PeerInfo>& peers);

// Whether two records are the same process (and so share its memory).
inline bool SameProcess(const PeerInfo& a, const PeerInfo& b) {
  return a.host_hash == b.host_hash && a.pid == b.pid && a.start_ticks == b.start_ticks;
}

// Which ranks can open each other's POSIX shared memory: ranks of one host
// usually can, but two containers of one host (the same host name and
// network namespace, each with its own /dev/shm) cannot. Collective over
// `exchange` (whose members are the ranks of `peers`): every rank makes a
// probe segment named after `tag`, tries to open those of the ranks that
// share its host, and the answers go round, so every rank computes the same
// domains. Returns, per rank, the smallest rank of its memory domain: two
// ranks share memory when both opened each other's probe (the same process
// always does).
base::StatusOr<std::vector<int>> MemoryDomains(Exchange& exchange, uint64_t tag, const std::vector<PeerInfo>& peers);

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_CONNECT_PEER_INFO_H_
