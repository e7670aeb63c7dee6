// An in-memory net (net.h) for tests: connections are message queues inside
// this process, so the net conformance suite and the proxy run without
// sockets. Messages complete at the first Test after the peer posts the
// matching receive, in order; Abort, a closed peer and a receive that is
// too small fail as the real transports do.
#ifndef RINGO_TRANSPORT_NET_FAKE_NET_H_
#define RINGO_TRANSPORT_NET_FAKE_NET_H_

#include <memory>

#include "transport/net/net.h"

namespace ringo::transport::net {

std::unique_ptr<Net> MakeFakeNet();

}  // namespace ringo::transport::net

#endif  // RINGO_TRANSPORT_NET_FAKE_NET_H_
