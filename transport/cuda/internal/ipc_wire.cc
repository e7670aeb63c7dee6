#include "transport/cuda/internal/ipc_wire.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>

namespace ringo::transport::internal {

IpcRecord FailedIpcRecord(int rank) {
  IpcRecord r;
  std::memset(&r, 0, sizeof(r));
  r.magic = kIpcRecordMagic;
  r.version = kIpcRecordVersion;
  r.ok = 0;
  r.rank = rank;
  r.pid = static_cast<int32_t>(::getpid());
  r.process_nonce = ProcessNonce();
  return r;
}

base::Status CheckIpcRecord(const IpcRecord& theirs, int rank, const IpcRecord& mine) {
  const std::string who = "rank " + std::to_string(rank);
  if (theirs.magic != kIpcRecordMagic || theirs.version != kIpcRecordVersion) {
    return base::Internal(who + " sent a malformed CUDA IPC record (magic " +
                          std::to_string(theirs.magic) + ", version " +
                          std::to_string(theirs.version) + ")");
  }
  if (theirs.rank != rank) {
    return base::Internal(who + "'s CUDA IPC record names rank " + std::to_string(theirs.rank));
  }
  if (theirs.ok != 1) {
    return base::RemoteError(who +
                             " could not allocate or export its GPU connectors (see its log)");
  }
  if (theirs.nchannels != mine.nchannels || theirs.slot_bytes != mine.slot_bytes ||
      theirs.ll_slot_bytes != mine.ll_slot_bytes || theirs.stride != mine.stride) {
    return base::Internal(
        who + "'s GPU connectors have another geometry (" + std::to_string(theirs.nchannels) +
        " channels, slots " + std::to_string(theirs.slot_bytes) + "/" +
        std::to_string(theirs.ll_slot_bytes) + " B) than this rank's (" +
        std::to_string(mine.nchannels) + " channels, slots " + std::to_string(mine.slot_bytes) +
        "/" + std::to_string(mine.ll_slot_bytes) + " B)");
  }
  if (std::memchr(theirs.bus_id, '\0', kBusIdBytes) == nullptr) {
    return base::Internal(who + "'s CUDA IPC record has an unterminated bus id");
  }
  if (theirs.device_pointer == 0)
    return base::Internal(who + "'s CUDA IPC record has a null allocation");
  return base::OkStatus();
}

bool SameProcess(const IpcRecord& a, const IpcRecord& b) {
  return a.pid == b.pid && a.process_nonce == b.process_nonce;
}

std::string BusId(const IpcRecord& r) {
  const void* end = std::memchr(r.bus_id, '\0', kBusIdBytes);
  const size_t n =
      end == nullptr ? kBusIdBytes : static_cast<size_t>(static_cast<const char*>(end) - r.bus_id);
  return std::string(r.bus_id, n);
}

uint64_t ProcessNonce() {
  static const uint64_t nonce = [] {
    std::random_device rd;
    const uint64_t t =
        static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ (t * 0x9E3779B97F4A7C15ull);
  }();
  return nonce;
}

}  // namespace ringo::transport::internal
