// POSIX shared memory holding FIFOs between processes of one host. The
// receiver creates and formats a segment, the sender opens it by name, and the
// creator unlinks the name once both have it mapped, so a crash later leaves
// nothing behind in /dev/shm.
#ifndef RINGO_TRANSPORT_SHM_SEGMENT_H_
#define RINGO_TRANSPORT_SHM_SEGMENT_H_

#include <memory>
#include <string>

#include "base/status.h"
#include "transport/fifo/fifo.h"

namespace ringo::transport {

// A shared segment of `bytes`, created (O_EXCL) or opened, mapped and touched.
base::StatusOr<std::shared_ptr<FifoMemory>> CreateShm(const std::string& name, size_t bytes);
base::StatusOr<std::shared_ptr<FifoMemory>> OpenShm(const std::string& name, size_t bytes);

// A FIFO's segment name for the edge into `receiver_rank` on `channel`.
std::string ShmFifoName(uint64_t tag, int receiver_rank, int channel);

base::StatusOr<std::shared_ptr<FifoMemory>> CreateShmFifo(const std::string& name, size_t slot_bytes,
                                                          int receiver_rank);
base::StatusOr<std::shared_ptr<FifoMemory>> OpenShmFifo(const std::string& name, size_t slot_bytes);
void UnlinkShm(const std::string& name);

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_SHM_SEGMENT_H_
