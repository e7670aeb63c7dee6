// The proxy: a ring edge that crosses hosts keeps an ordinary FIFO on each
// side, in this process's memory, and one proxy thread per rank moves the
// slots of all its network edges, so the executors (and later the kernels)
// see the SendEnd/RecvEnd they see on any edge.
//
// - Sending edge: the executor fills slots of a local FIFO; the proxy copies
//   each slot's metadata (size and the collective's signature, fifo.h's
//   SlotMeta) into the prefix the FIFO keeps before every slot, sends prefix
//   and data as one message, and advances the head once the network has
//   taken it (freeing the slot).
// - Receiving edge: the proxy posts a receive into every free slot (its
//   prefix and data), and when one completes checks the metadata against
//   the size received, stores it and advances the tail.
//
// Waking: while it has work the proxy polls its edges (pausing, or yielding
// the core where cores are scarce); when every edge is idle for a while it
// sleeps in poll() on its connections and an eventfd. It declares that in
// each FIFO it serves (FifoHeader::proxy_sleeping), so an executor that posts
// a slot or frees one writes the eventfd (SendEnd::Post, RecvEnd::Release).
//
// Faults: the executor's abort (its flag and notice in the local FIFO) is
// forwarded to the peer as the connection's abort, carrying the notice; a
// network error, or the peer's abort, is written into the local FIFO as the
// remote end's notice and flag, naming the peer (or the origin it relays),
// the channel and the message, so the executor's wait fails with it.
//
// GPU ranks (connect/net_medium.cc): the FIFO lives in pinned host memory
// mapped into the rank's GPU, with the same layout. The kernel writes a
// slot's data (at the shift its size word carries: fifo/layout.h's
// SlotSpan), the size word, and publishes the tail with a system-scope
// release; the proxy, which acquires the tail before reading the slot, sends
// SlotSpan bytes. On the receiving side the proxy writes data and metadata
// and publishes the tail (release); the kernel acquires it at system scope.
// The head goes the other way alike, and the abort words and notices are
// where a host executor's are. A kernel cannot write the eventfd: the GPU
// engine wakes the proxy when it enqueues work, and the proxy's sleeps are
// bounded (kDeviceSleepMs) while it serves such an edge. With verbs the
// pinned FIFO is registered memory like any other.
//
// Slots apart (FifoMemory::slots_apart: GPUDirect RDMA, the slots in device
// memory and the header in pinned host memory; net/gpudirect.h): the proxy
// can neither write a prefix there nor read one, so each slot goes as two
// messages, its metadata (staged in host memory the proxy registers) and
// then its data, straight from the slot. The receiving proxy posts both,
// checks the metadata against the data's size, calls
// FifoMemory::AfterNetworkWrite (device memory: the NIC's writes made
// visible to the GPU) and only then stores the metadata and publishes the
// tail. Both ends of an edge keep their slots apart or neither does (they
// decide from the same records), so the two sides agree on the messages.
#ifndef RINGO_TRANSPORT_NET_PROXY_H_
#define RINGO_TRANSPORT_NET_PROXY_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "transport/fifo/fifo.h"
#include "transport/net/net.h"

namespace ringo::transport::net {

// Bytes before each slot of a FIFO a proxy serves (the metadata travels there).
inline constexpr size_t kProxySlotPrefix = 64;

struct ProxyOptions {
  int self_rank = -1;
  int spin_count = 1000;    // idle passes with a pause before yielding
  int yield_count = 1000;   // then idle passes that yield the core before sleeping
};

// One proxy per communicator: Start() it, then add edges as the engines
// connect them (from any thread, before or after Start). Stops (and joins)
// on destruction; the FIFOs it serves stay alive as long as it does (it
// holds them).
class Proxy {
 public:
  explicit Proxy(const ProxyOptions& options);
  ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  // `fifo` (formatted with kProxySlotPrefix) whose sender is this rank's
  // executor: its slots go out over `connection`, which registers the
  // FIFO's memory here (an error if it cannot). `device_fed`: a kernel
  // posts its slots (pinned host memory mapped into the GPU), so the proxy
  // never sleeps longer than kDeviceSleepMs while it serves the edge.
  [[nodiscard]] base::Status AddSender(std::shared_ptr<FifoMemory> fifo, std::unique_ptr<SendConnection> connection,
                                       int channel, bool device_fed = false);
  // `fifo` whose receiver is the executor: filled from `connection`.
  [[nodiscard]] base::Status AddReceiver(std::shared_ptr<FifoMemory> fifo, std::unique_ptr<RecvConnection> connection,
                                         int channel, bool device_fed = false);
  // Thread-safe: the two above hand the edge to the running thread, which
  // takes it at its next pass.
  base::Status Start();
  // Stops the thread. With `drain`, first waits (up to `timeout_ms`) until
  // every slot the executors posted has gone out, then closes the
  // connections in good order (the peers read all of it); without, or for
  // an edge whose executor aborted, forwards the abort notice instead.
  // Called once; the destructor calls it without drain if nobody did.
  void Shutdown(bool drain, int64_t timeout_ms);

 private:
  struct Edge;
  base::Status Adopt(std::unique_ptr<Edge> e, std::shared_ptr<FifoMemory> fifo, int channel);
  void TakeAdded();  // moves added_ into edges_ (the thread, or Shutdown once it is gone)
  void Wake();
  void Run();
  // Progresses one edge; whether anything moved.
  // What issuing one request came to: in flight, held back by the
  // connection (Edge::blocked), or failed (the edge failed with it).
  enum class Issue { kIssued, kBlocked, kFailed };
  Issue Track(Edge& e, base::StatusOr<Request*> request);
  bool StepSender(Edge& e);
  bool StepReceiver(Edge& e);
  void FailLocal(Edge& e, const base::Status& st);
  bool Drained() const;  // every send edge has sent what its executor posted
  void Sleep();

  ProxyOptions options_;
  std::vector<std::unique_ptr<Edge>> edges_;  // the thread's (Shutdown's once it is gone)
  std::mutex added_mu_;
  std::vector<std::unique_ptr<Edge>> added_;  // GUARDED_BY(added_mu_): not yet taken by the thread
  bool shut_down_ = false;                    // GUARDED_BY(added_mu_)
  std::atomic<bool> has_added_{false};
  int wake_fd_ = -1;  // an eventfd executors write to wake a sleeping proxy
  std::atomic<bool> stop_{false};
  std::atomic<bool> draining_{false};
  std::atomic<bool> drained_{false};
  std::thread thread_;
};

}  // namespace ringo::transport::net

#endif  // RINGO_TRANSPORT_NET_PROXY_H_
