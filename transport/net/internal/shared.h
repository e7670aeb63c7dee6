// What the network transports (socket/, ib/) share on the wire
// and in their settings: the fault notice as it travels, addresses in
// handles, and RINGO_SOCKET_IFNAME / RINGO_IB_HCA name lists. Private to
// transport/net.
#ifndef RINGO_TRANSPORT_NET_INTERNAL_SHARED_H_
#define RINGO_TRANSPORT_NET_INTERNAL_SHARED_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "transport/peer_state.h"
#include "transport/socket.h"

namespace ringo::transport::net::shared {

// A connection's Test: finds `request` among its `requests` (a sequence of
// unique_ptrs, in any order); when `finished(r)` holds, reports it done with
// `size(r)` bytes and removes it. `progress` is what the connection's
// progress step returned: a finished request is delivered even after an
// error, an unfinished one gets the error.
template <typename Requests, typename Req, typename Finished, typename Size>
base::Status TakeIfDone(Requests& requests, const Req* request, const base::Status& progress,
                        Finished finished, Size size, bool* done, size_t* bytes) {
  *done = false;
  for (auto it = requests.begin(); it != requests.end(); ++it) {
    if (it->get() != request) continue;
    if (!finished(**it)) return progress;
    *done = true;
    *bytes = size(**it);
    requests.erase(it);
    return base::Status();
  }
  return base::Internal("Test of a request this connection does not hold");
}

// A fault notice as an abort frame carries it.
struct Notice {
  int32_t origin;
  int32_t code;
  uint64_t seq;
  char text[kFaultTextBytes];
};

// `why` (not OK) as this rank's notice for collective `seq`.
Notice ToNotice(const base::Status& why, int self_rank, uint64_t seq);
// The status a receiver of `n` reports: `where` and the origin's message,
// naming `peer_rank` where the notice names no rank. Never trusts the text
// to be terminated.
base::Status FromNotice(const Notice& n, const std::string& where, int peer_rank);

// An IPv4 or IPv6 address and port as handles carry them (port in network
// order, 4 or 16 address bytes).
void PutAddress(const SocketAddress& a, uint16_t* family, uint16_t* port, uint8_t addr[16]);
SocketAddress GetAddress(uint16_t family, uint16_t port, const uint8_t addr[16]);
// The peer's address of a connected socket, "?" when unknown.
std::string PeerAddressOf(int fd);

// Whether `name` (and `port`, -1 for none) is one a list such as
// RINGO_SOCKET_IFNAME or RINGO_IB_HCA selects: comma-separated prefixes
// (items may end in ":port"), '^' first to exclude them, '=' for exact
// names; an empty list selects everything.
bool NameListSelects(const std::string& spec, const std::string& name, int port = -1);

}  // namespace ringo::transport::net::shared

#endif  // RINGO_TRANSPORT_NET_INTERNAL_SHARED_H_
