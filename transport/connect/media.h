// The media of connector.h, one class each (medium.h's interface).
#ifndef RINGO_TRANSPORT_CONNECT_MEDIA_H_
#define RINGO_TRANSPORT_CONNECT_MEDIA_H_

#include <functional>
#include <memory>

#include "base/config.h"
#include "transport/connect/medium.h"
#include "transport/net/proxy.h"

namespace ringo::transport {

// Host FIFOs between threads of one process: plain memory handed over
// through a process-wide registry.
std::unique_ptr<FifoMedium> MakeProcessMedium();
// Host FIFOs between processes of one memory domain: POSIX shared memory.
std::unique_ptr<FifoMedium> MakeShmMedium();
// Host FIFOs between hosts (or memory domains): a local FIFO on each side,
// registered with the proxy `proxy()` returns (started at its first use).
std::unique_ptr<FifoMedium> MakeNetMedium(const base::Config& config,
                                          std::function<base::StatusOr<net::Proxy*>()> proxy);
// GPU FIFOs on one host: device memory of the receiver, addressed by
// pointer in one process (kCudaPeer) or through CUDA IPC (kCudaIpc).
std::unique_ptr<FifoMedium> MakeCudaMedium(Medium kind);

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_CONNECT_MEDIA_H_
