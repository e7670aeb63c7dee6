// The mesh: a communicator's control fabric after init, between ranks in
// different processes (and hosts). Each rank listens on a TCP socket (on
// the interface RINGO_SOCKET_IFNAME picks, as the bootstrap root does);
// the addresses go round once through the bootstrap at init. A rank opens
// its connection to a peer when it first sends it something, and keeps it;
// one service thread per mesh accepts the peers' connections and reads
// every message into a Mailbox, so a send never waits for the peer to read;
// control requests go to the mesh's control service (control.h), which
// answers them on a thread of its own.
//
// Every connection opens with a hello (magic, version, the communicator's
// nonce, the sender's rank and the rank count), every message carries a
// magic and a bounded length: garbage or a stranger is dropped with a
// warning, never a crash. A peer whose connection closes is gone: a Recv
// from it fails at once instead of at the timeout.
//
// A mesh belongs to a root communicator and to the children split from it
// (shared_ptr); it stops when the last of them lets go. Thread-safe.
#ifndef RINGO_TRANSPORT_BOOTSTRAP_MESH_H_
#define RINGO_TRANSPORT_BOOTSTRAP_MESH_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "transport/bootstrap/exchange.h"
#include "transport/socket.h"

namespace ringo::transport {

class Mesh : public MessageFabric {
 public:
  // Listens, then all-gathers the listening addresses over `boot`
  // (collective over boot's members, which become the mesh's ranks).
  static base::StatusOr<std::shared_ptr<Mesh>> Create(Exchange& boot, uint64_t nonce, const std::string& ifname_spec);
  ~Mesh() override;
  Mesh(const Mesh&) = delete;
  Mesh& operator=(const Mesh&) = delete;

  int rank() const override { return rank_; }
  int nranks() const override { return static_cast<int>(peers_.size()); }
  base::Status Send(int dst, uint64_t context, uint64_t tag, const void* data, size_t bytes,
                    Deadline deadline) override;
  base::Status Recv(int src, uint64_t context, uint64_t tag, std::string* data, Deadline deadline,
                    const std::atomic<bool>* abort) override;
  ControlService& control() override { return *control_; }

 private:
  struct Out {
    std::mutex mu;
    Socket socket;  // GUARDED_BY(mu); opened at the first send
  };
  Mesh(int rank, uint64_t nonce, Socket listener, std::vector<SocketAddress> peers);
  void Serve();  // the service thread

  const int rank_;
  const uint64_t nonce_;
  Socket listener_;
  std::vector<SocketAddress> peers_;
  std::vector<std::unique_ptr<Out>> out_;
  Mailbox inbox_;
  std::unique_ptr<ControlService> control_;
  int wake_[2] = {-1, -1};  // a pipe that stops the service thread
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace ringo::transport

#endif  // RINGO_TRANSPORT_BOOTSTRAP_MESH_H_
