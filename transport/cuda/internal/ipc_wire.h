// What each rank tells the others when a p2p ring is built across processes
// (transport/p2p_ipc.h): one fixed-size record per rank, all-gathered through
// the bootstrap. It names the rank's receive connectors (a CUDA IPC handle, and
// the raw device pointer for a peer that turns out to be the same process),
// their geometry, and whether the rank got that far. Pure data and checks: no
// CUDA, tested on the CPU.
#ifndef RINGO_TRANSPORT_CUDA_INTERNAL_IPC_WIRE_H_
#define RINGO_TRANSPORT_CUDA_INTERNAL_IPC_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace ringo::transport::internal {

inline constexpr uint32_t kIpcRecordMagic = 0x43504952;  // "RIPC"
inline constexpr uint16_t kIpcRecordVersion = 1;
// sizeof(cudaIpcMemHandle_t) (CUDA_IPC_HANDLE_SIZE); p2p_ipc.cc asserts it.
inline constexpr size_t kIpcHandleBytes = 64;
inline constexpr size_t kBusIdBytes = 32;

struct IpcRecord {
  uint32_t magic;
  uint16_t version;
  uint16_t ok;  // 1: the fields below are valid; 0: this rank failed before the exchange
  int32_t rank;
  int32_t nchannels;
  int32_t pid;
  int32_t reserved;
  uint64_t process_nonce;                 // random per process (fork keeps it: compare with pid)
  uint64_t slot_bytes;                    // Simple slot
  uint64_t ll_slot_bytes;                 // LL slot
  uint64_t stride;                        // bytes from one channel's connector to the next
  uint64_t device_pointer;                // the allocation as its owner addresses it
  char bus_id[kBusIdBytes];               // the owner's GPU, NUL-terminated (cudaDeviceGetPCIBusId)
  unsigned char handle[kIpcHandleBytes];  // cudaIpcMemHandle_t of the allocation
};
static_assert(sizeof(IpcRecord) == 160, "fixed-size record, sent raw");

// The record of a rank that could not allocate or export its connectors:
// ok = 0, so the others fail at once naming it.
IpcRecord FailedIpcRecord(int rank);

// Checks `theirs`, gathered from rank `rank`, against this rank's own record:
// magic, version, rank, success, and the same channel count and sizes (every
// rank must have chosen the same geometry). RemoteError when that rank
// reported a failure; Internal for a malformed record.
base::Status CheckIpcRecord(const IpcRecord& theirs, int rank, const IpcRecord& mine);

// Whether the two records come from the same process (then the connector is
// addressed by its plain device pointer: CUDA refuses to open an IPC handle in
// the process that exported it).
bool SameProcess(const IpcRecord& a, const IpcRecord& b);

// The bus id as a string (bounded even if the record lacks its NUL).
std::string BusId(const IpcRecord& r);

// A random number drawn once per process (not per fork: pair it with the pid).
uint64_t ProcessNonce();

}  // namespace ringo::transport::internal

#endif  // RINGO_TRANSPORT_CUDA_INTERNAL_IPC_WIRE_H_
