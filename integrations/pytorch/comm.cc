#include "integrations/pytorch/comm.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace ringo::pytorch {

std::string RingoError(ringoComm_t comm, ringoResult_t rc, const char* what) {
  const char* detail = ringoGetLastError(comm);
  if (detail == nullptr || detail[0] == '\0') detail = ringoGetLastError(nullptr);
  std::string msg = std::string("Ringo ") + what + " failed (" + ringoGetErrorString(rc) + ")";
  if (detail != nullptr && detail[0] != '\0') msg += ": " + std::string(detail);
  return msg;
}

std::unique_ptr<Comm> Comm::Create(c10d::Store& store, int rank, int size,
                                   std::chrono::milliseconds timeout, int device_kind) {
  // Every rank counts the communicators it has made through this store; all
  // make them in the same order, so the counts agree and name one key.
  // Host and GPU communicators are made by different threads: one count each.
  const std::string kind = device_kind == RINGO_DEVICE_CUDA ? "cuda" : "host";
  const int64_t serial = store.add("ringo/made/" + kind + "/" + std::to_string(rank), 1);
  const std::string key = "ringo/unique_id/" + kind + "/" + std::to_string(serial);
  ringoUniqueId id;
  if (rank == 0) {
    ringoResult_t rc = ringoGetUniqueId(&id);
    if (rc != ringoSuccess) throw std::runtime_error(RingoError(nullptr, rc, "ringoGetUniqueId"));
    store.set(key, std::vector<uint8_t>(
                       reinterpret_cast<const uint8_t*>(id.internal),
                       reinterpret_cast<const uint8_t*>(id.internal) + sizeof(id.internal)));
  } else {
    std::vector<uint8_t> bytes = store.get(key);
    if (bytes.size() != sizeof(id.internal)) {
      throw std::runtime_error("ringo_torch: the store's unique id has " +
                               std::to_string(bytes.size()) + " bytes, want " +
                               std::to_string(sizeof(id.internal)));
    }
    std::memcpy(id.internal, bytes.data(), sizeof(id.internal));
  }
  ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
  config.timeout_ms =
      static_cast<int>(std::clamp<int64_t>(timeout.count(), 1, static_cast<int64_t>(INT_MAX)));
  config.device_kind = device_kind;
  // Host groups connect every pair for send/recv with gloo's matching (tags,
  // any source): Ringo's tagged point-to-point.
  config.tagged_p2p = device_kind == RINGO_DEVICE_HOST ? 1 : 0;
  ringoComm_t comm = nullptr;
  ringoResult_t rc = ringoCommInitRankConfig(&comm, size, id, rank, &config);
  if (rc != ringoSuccess) {
    std::string msg = RingoError(comm, rc, "ringoCommInitRankConfig");
    if (comm != nullptr) ringoCommAbort(comm);
    throw std::runtime_error(msg + " (rank " + std::to_string(rank) + " of " +
                             std::to_string(size) + ")");
  }
  return std::unique_ptr<Comm>(new Comm(comm, rank, size));
}

Comm::~Comm() {
  if (comm_ == nullptr) return;
  if (failure_.empty()) {
    ringoCommDestroy(comm_);
  } else {
    ringoCommAbort(comm_);
  }
}

void Comm::CheckUsable(const char* what) const {
  if (!failure_.empty()) {
    throw std::runtime_error(std::string("Ringo ") + what +
                             ": the communicator failed earlier: " + failure_);
  }
}

void Comm::Check(ringoResult_t rc, const char* what) {
  if (rc == ringoSuccess) return;
  std::string msg = RingoError(comm_, rc, what);
  // Bad arguments leave the communicator usable; anything else (a peer gone,
  // a timeout, a system error mid-collective) leaves the ring out of step.
  if (rc != ringoInvalidArgument && rc != ringoInvalidUsage && failure_.empty()) failure_ = msg;
  throw std::runtime_error(msg);
}

void Comm::Label(const char* title) {
  constexpr char kPrefix[] = "ringo:";
  if (std::strncmp(title, kPrefix, sizeof(kPrefix) - 1) == 0) title += sizeof(kPrefix) - 1;
  ringoCommSetTraceLabel(comm_, title);
}

ringoResult_t Comm::AsyncError() const {
  ringoResult_t err = ringoSuccess;
  if (ringoCommGetAsyncError(comm_, &err) != ringoSuccess) return ringoInternalError;
  return err;
}

}  // namespace ringo::pytorch
