// The network transport this process uses between hosts, chosen once from
// RINGO_NET: the socket transport today (verbs where built and usable, next).
// Thread-safe; the Net lives as long as the process.
#ifndef RINGO_TRANSPORT_NET_REGISTRY_H_
#define RINGO_TRANSPORT_NET_REGISTRY_H_

#include "base/config.h"
#include "base/status.h"
#include "transport/net/net.h"

namespace ringo::transport::net {

base::StatusOr<Net*> ProcessNet(const base::Config& config);

}  // namespace ringo::transport::net

#endif  // RINGO_TRANSPORT_NET_REGISTRY_H_
