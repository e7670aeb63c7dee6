// Bootstrap: the TCP rendezvous that lets the ranks of a new communicator
// find each other. A root (a thread in the process that made the unique id,
// or in rank 0's when RINGO_COMM_ID names its address) accepts one connection
// per rank and serves all-gathers over them until every rank disconnects.
//
// Every message carries a magic, a version, the id's nonce, the sender's rank
// and rank count, and a bounded length, so garbage, a stranger, or a rank of
// another communicator is an error, never a crash or a hang; every step has a
// deadline.
#ifndef RINGO_TRANSPORT_BOOTSTRAP_BOOTSTRAP_H_
#define RINGO_TRANSPORT_BOOTSTRAP_BOOTSTRAP_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "transport/bootstrap/exchange.h"
#include "transport/socket.h"

namespace ringo::transport {

inline constexpr size_t kUniqueIdBytes = 128;  // equals RINGO_UNIQUE_ID_BYTES

// The decoded unique id.
struct UniqueId {
  uint64_t nonce = 0;
  SocketAddress root;
  bool root_started_by_rank0 = false;  // RINGO_COMM_ID: rank 0 starts the root

  void Encode(char out[kUniqueIdBytes]) const;
  static base::StatusOr<UniqueId> Decode(const char in[kUniqueIdBytes]);
};

// Makes a unique id. With `comm_id` ("host:port") names that address and
// starts nothing; otherwise starts a root listening on an interface chosen by
// `ifname_spec` that serves one communicator and exits after it (or after
// `timeout_ms` without progress).
base::StatusOr<UniqueId> CreateUniqueId(const std::string& comm_id, const std::string& ifname_spec,
                                        int64_t timeout_ms);

// Starts the root for an id whose root_started_by_rank0 is set (rank 0 only).
base::Status StartRootForRank0(const UniqueId& id, int64_t timeout_ms);

// One rank's connection to the root: all-gathers only. Owned by one thread.
class Bootstrap : public Exchange {
 public:
  // Connects to the root and announces (rank, nranks).
  static base::StatusOr<std::unique_ptr<Bootstrap>> Connect(const UniqueId& id, int rank, int nranks,
                                                            int64_t timeout_ms);

  // Gathers `bytes` from every rank into `all` (nranks * bytes, in rank order).
  // Every rank must pass the same `bytes`.
  base::Status AllGather(const void* mine, size_t bytes, void* all) override;

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }

 private:
  Bootstrap(Socket socket, uint64_t nonce, int rank, int nranks, int64_t timeout_ms)
      : socket_(std::move(socket)), nonce_(nonce), rank_(rank), nranks_(nranks), timeout_ms_(timeout_ms) {}
  Socket socket_;
  uint64_t nonce_;
  int rank_;
  int nranks_;
  int64_t timeout_ms_;
};

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_BOOTSTRAP_BOOTSTRAP_H_
