// The ring loop (kernels/ring_loop.h) over the kernels' parameter building
// (launch.cc's BuildRingParams) and element loop (internal/reduce_copy.h),
// run on the CPU: ranks are threads, the primitives move chunks through host
// queues and compute with the kernels' own ReduceCopy, run once per emulated
// GPU thread. Every collective x datatype x op against the host reference.
// Chunks sit in 16-byte aligned messages at the Simple protocol's shift
// (internal/slot_shift.h), so buffers that are not 16-byte aligned are
// checked to take the vector path, as on the GPU.
// What this cannot see (the FIFO counters, LL flags, barriers, memory
// ordering) is ring_kernel_test's, on a GPU.
//
// RingLoopOverNetwork runs the same loop over the FIFOs a GPU ring has
// between hosts: ranks as threads whose records say they are on hosts of
// their own, so that the connector gives each ring edge a FIFO of the
// network medium (the allocator and layout of GPU edges between hosts,
// transport/connect/net_medium.cc; plain host memory here) on each side
// and the proxy moves the slots over loopback TCP. The primitives post and
// take slots as the kernels do (data at the shift, the size word carrying
// it, the tail published with release; the head released by the receiver).
// SlotsApartEveryCollectiveDatatypeOp does it with every edge's slots apart
// from its header, as a GPUDirect edge keeps them (process memory here).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "base/device/dtype.h"
#include "kernels/cuda/device_types.h"
#include "kernels/cuda/internal/reduce_copy.h"
#include "kernels/cuda/internal/ring_params.h"
#include "kernels/cuda/internal/slot_shift.h"
#include "kernels/cuda/internal/test_reference.h"
#include "kernels/reduce_op.h"
#include "kernels/ring_loop.h"
#include "transport/bootstrap/exchange.h"
#include "transport/connect/connector.h"
#include "transport/fifo/fifo.h"

namespace ringo::kernels::gpu::internal {
namespace {

using base::BFloat16;
using base::DataType;
using base::Half;
using base::RedOp;

// Emulated threads per block: few, so strides, heads and tails all show.
constexpr int kThreads = 3;

// A chunk in flight: 16-byte aligned storage holding `bytes` at `shift`,
// as a Simple slot does.
struct alignas(16) Line16 {
  unsigned char b[16];
};
struct Message {
  std::vector<Line16> storage;
  uint32_t shift = 0;
  size_t bytes = 0;
  unsigned char* data() { return reinterpret_cast<unsigned char*>(storage.data()) + shift; }
};

Message MakeMessage(size_t bytes, uint32_t shift) {
  Message m;
  m.storage.resize((bytes + shift) / 16 + 1);
  m.shift = shift;
  m.bytes = bytes;
  return m;
}

// One ring edge of one channel: the chunks in flight, in order; or (net)
// the two ends of a FIFO pair across hosts, the sender's and the receiver's.
struct Edge {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Message> chunks;
  bool net = false;
  transport::FifoLink send, recv;
  uint64_t sent = 0, received = 0;  // slots, for the life of the links
};

// Slot k's data, where the kernels' DeviceFifo says (DeviceFifoAt): after
// the header, or in the slots kept apart (GPUDirect's layout).
char* SlotData(const transport::FifoLink& l, uint64_t k) {
  const DeviceFifo f = DeviceFifoAt(l.header, l.geometry, !l.sending, l.peer, nullptr, l.slots);
  return static_cast<char*>(f.slots) + (k % transport::kSlots) * f.slot_stride;
}

// A kernel's post of a Simple slot (primitives.cuh): the data at its shift,
// the size word, the tail (release).
bool FifoPost(Edge* e, const Message& m) {
  transport::FifoHeader* h = e->send.header;
  const uint64_t k = e->sent;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (k - h->head.value.load(std::memory_order_acquire) >= static_cast<uint64_t>(transport::kSlots)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  char* slot = SlotData(e->send, k);
  if (m.bytes > 0) std::memcpy(slot + m.shift, const_cast<Message&>(m).data(), m.bytes);
  h->meta[k % transport::kSlots].bytes = EncodeSlotSize(m.bytes, m.shift);
  h->tail.value.store(k + 1, std::memory_order_release);
  transport::WakeProxy(h);  // as the GPU engine does when it launches
  ++e->sent;
  return true;
}

// A kernel's take of one: the tail (acquire), the size word, the data at
// its shift; then the head (release).
bool FifoTake(Edge* e, Message* m) {
  transport::FifoHeader* h = e->recv.header;
  const uint64_t k = e->received;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (h->tail.value.load(std::memory_order_acquire) <= k) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  const uint64_t word = h->meta[k % transport::kSlots].bytes;
  *m = MakeMessage(SlotSizeBytes(word), SlotSizeShift(word));
  const char* slot = SlotData(e->recv, k);
  if (m->bytes > 0) std::memcpy(m->data(), slot + m->shift, m->bytes);
  h->head.value.store(k + 1, std::memory_order_release);
  transport::WakeProxy(h);
  ++e->received;
  return true;
}

// Element-loop calls that touched a message, by path taken (all tests).
std::atomic<int64_t> g_vector_steps{0};
std::atomic<int64_t> g_scalar_steps{0};

// The primitives over host queues, with primitives.cuh's semantics.
template <typename T, RedOp kOp>
class QueuePrims {
 public:
  QueuePrims(Edge* in, Edge* out, int nranks) : in_(in), out_(out), f_(ReduceFunc<T, kOp>::Make(nranks)) {}
  bool failed() const { return failed_; }

  void Copy(const T* src, T* dst, int64_t n) {
    if (dst != nullptr) Loop<Mode::kCopy>(src, nullptr, dst, nullptr, n, false);
  }
  void Send(const T* src, int64_t n, int64_t) {
    Message m = Out(src, nullptr, n);
    Loop<kSendMode<T, kOp>>(src, nullptr, At(m), nullptr, n, true);
    Push(std::move(m));
  }
  void CopySend(const T* src, T* dst, int64_t n, int64_t) {
    Message m = Out(src, dst, n);
    Loop<Mode::kCopy>(src, nullptr, At(m), dst, n, true);
    Push(std::move(m));
  }
  void RecvReduceSend(const T* src, int64_t n, int64_t step) {
    Message in = Pop(n, step), m = Out(src, nullptr, n);
    Loop<Mode::kReduce>(At(in), src, At(m), nullptr, n, true);
    Push(std::move(m));
  }
  void RecvReduceCopySend(const T* src, T* dst, int64_t n, int64_t step) {
    Message in = Pop(n, step), m = Out(src, dst, n);
    Loop<Mode::kReduceFinal>(At(in), src, At(m), dst, n, true);
    Push(std::move(m));
  }
  void RecvReduceCopy(const T* src, T* dst, int64_t n, int64_t step) {
    Message in = Pop(n, step);
    Loop<Mode::kReduceFinal>(At(in), src, dst, nullptr, n, true);
  }
  void RecvCopySend(T* dst, int64_t n, int64_t step) {
    Message in = Pop(n, step), m = Out(nullptr, dst, n);
    Loop<Mode::kCopy>(At(in), nullptr, At(m), dst, n, true);
    Push(std::move(m));
  }
  void Recv(T* dst, int64_t n, int64_t step) {
    Message in = Pop(n, step);
    Loop<Mode::kCopy>(At(in), nullptr, dst, nullptr, n, true);
  }

  std::string error;

 private:
  // Each emulated thread's share in turn: a thread touches only its own
  // elements, so running them one after another equals running them at once.
  template <Mode kMode>
  void Loop(const T* a, const T* b, T* d0, T* d1, int64_t n, bool slot) {
    if (failed_) return;
    if (slot && n > 0)
      (VectorPath(a, b, d0, d1, kModeReads2<kMode>) ? g_vector_steps : g_scalar_steps)++;
    for (int tid = 0; tid < kThreads; ++tid) ReduceCopy<T, kOp, kMode>(f_, tid, kThreads, a, b, d0, d1, n);
  }
  static T* At(Message& m) { return reinterpret_cast<T*>(m.data()); }
  // The outgoing slot of a step, at the shift the GPU's Simple protocol uses.
  static Message Out(const T* src, const T* dst, int64_t n) {
    return MakeMessage(static_cast<size_t>(n) * sizeof(T), SendShift(src, dst));
  }
  void Push(Message m) {
    if (failed_) return;
    if (out_->net) {
      if (!FifoPost(out_, m)) Fail("no free slot for 20 s");
      return;
    }
    std::lock_guard<std::mutex> lock(out_->mu);
    out_->chunks.push_back(std::move(m));
    out_->cv.notify_all();
  }
  Message Pop(int64_t n, int64_t step) {
    const size_t want = static_cast<size_t>(n) * sizeof(T);
    if (failed_) return MakeMessage(want, 0);
    Message m;
    if (in_->net) {
      if (!FifoTake(in_, &m)) {
        Fail("timed out at step " + std::to_string(step));
        return MakeMessage(want, 0);
      }
    } else {
      std::unique_lock<std::mutex> lock(in_->mu);
      if (!in_->cv.wait_for(lock, std::chrono::seconds(20), [&] { return !in_->chunks.empty(); })) {
        Fail("timed out at step " + std::to_string(step));
        return MakeMessage(want, 0);
      }
      m = std::move(in_->chunks.front());
      in_->chunks.pop_front();
    }
    if (m.bytes != want) {
      Fail("step " + std::to_string(step) + ": got " + std::to_string(m.bytes) + " bytes, want " +
           std::to_string(want));
      return MakeMessage(want, 0);
    }
    return m;
  }
  void Fail(const std::string& why) {
    failed_ = true;
    error = why;
  }

  Edge* in_;
  Edge* out_;
  ReduceFunc<T, kOp> f_;
  bool failed_ = false;
};

struct Case {
  Coll coll;
  DataType dtype;
  RedOp op;
  int nranks;
  int nchannels;
  int64_t count;
  int64_t slice_bytes;
  int offset;  // elements past a 16-byte boundary (send and recv)
  bool in_place;
  std::string Name() const {
    return "coll " + std::to_string(static_cast<int>(coll)) + " " + base::DataTypeName(dtype) + " " +
           base::RedOpName(op) + " ranks " + std::to_string(nranks) + " channels " + std::to_string(nchannels) +
           " count " + std::to_string(count) + " slice " + std::to_string(slice_bytes) + " offset " +
           std::to_string(offset) + (in_place ? " in place" : "");
  }
};

// Runs one rank's channels as the kernel's blocks would, with the kernel's
// (datatype, op) as BuildRingParams chose it.
template <typename K, RedOp kOp>
std::string RunRank(const RingKernelParams& p, std::vector<Edge>& edges) {
  const RingArgs& r = p.ring;
  const int n = r.nranks;
  for (int c = 0; c < r.nchannels; ++c) {
    Edge* in = &edges[c * n + (r.pos + n - 1) % n];
    Edge* out = &edges[c * n + r.pos];
    QueuePrims<K, kOp> prims(in, out, n);
    RunRingChannel<K>(r, c, prims);
    if (prims.failed()) return "rank " + std::to_string(r.rank) + " channel " + std::to_string(c) + ": " + prims.error;
  }
  return "";
}

template <typename T, RedOp kOp>
std::string RunRankTyped(const RingKernelParams& p, std::vector<Edge>& edges) {
  if (p.ring.call.dtype == DataType::kUint8 && !std::is_same<T, uint8_t>::value) {
    return RunRank<uint8_t, RedOp::kSum>(p, edges);  // AllGather / Broadcast as bytes
  }
  return RunRank<T, kOp>(p, edges);
}

// The edges of a ring over the network (RingLoopOverNetwork), kept across
// cases; null: in-process queues made per case.
std::vector<Edge>* g_net_edges = nullptr;

template <typename T, RedOp kOp>
void RunCase(const Case& c) {
  SCOPED_TRACE(c.Name());
  const int n = c.nranks;
  const std::vector<std::vector<T>> in = testref::Inputs<T>(c.coll, n, c.count, c.op);
  const int64_t send_elems = testref::SendElems(c.coll, n, c.count);
  const int64_t recv_elems = testref::RecvElems(c.coll, n, c.count);
  // Buffers as 16-byte-aligned storage with the data `offset` elements in.
  std::vector<std::vector<uint4>> send_mem(n), recv_mem(n);
  std::vector<T*> send(n), recv(n);
  const T kFill = testref::Value<T>(12345, RedOp::kSum);
  for (int r = 0; r < n; ++r) {
    send_mem[r].resize((send_elems + c.offset) * sizeof(T) / 16 + 2);
    recv_mem[r].resize((recv_elems + c.offset) * sizeof(T) / 16 + 2);
    recv[r] = reinterpret_cast<T*>(recv_mem[r].data()) + c.offset;
    for (int64_t i = 0; i < recv_elems; ++i) recv[r][i] = kFill;
    send[r] = c.in_place ? (c.coll == Coll::kAllGather ? recv[r] + r * c.count : recv[r])
                         : reinterpret_cast<T*>(send_mem[r].data()) + c.offset;
    if (send_elems > 0) std::memcpy(send[r], in[r].data(), send_elems * sizeof(T));
  }

  std::vector<Edge> local_edges(g_net_edges != nullptr ? 0 : static_cast<size_t>(n) * c.nchannels);
  std::vector<Edge>& edges = g_net_edges != nullptr ? *g_net_edges : local_edges;
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  std::vector<int> order(n);
  for (int q = 0; q < n; ++q) order[q] = n % 3 != 0 ? (3 * q + 1) % n : n - 1 - q;  // not the identity
  if (g_net_edges != nullptr) {
    for (int q = 0; q < n; ++q) order[q] = q;  // the connected ring's positions are the ranks
  }
  const int root = n > 1 ? n - 2 : 0;
  std::vector<std::unique_ptr<RingKernelParams>> params;
  for (int q = 0; q < n; ++q) {
    CollArgs call;
    call.coll = c.coll;
    call.dtype = c.dtype;
    call.op = c.op;
    call.send = send[order[q]];
    call.recv = recv[order[q]];
    call.count = c.count;
    call.root = root;
    DeviceCollArgs a;
    a.ring = MakeRingArgs(call, order[q], n, q, order.data(), c.nchannels, c.slice_bytes);
    params.push_back(std::make_unique<RingKernelParams>(BuildRingParams(a, nullptr, KernelGuard())));
  }
  for (int q = 0; q < n; ++q) {
    threads.emplace_back([&, q] { errors[q] = RunRankTyped<T, kOp>(*params[q], edges); });
  }
  for (auto& t : threads) t.join();
  for (const std::string& e : errors) ASSERT_EQ(e, "");
  for (auto& e : edges) {
    ASSERT_TRUE(e.chunks.empty()) << "a chunk was sent and never received";
    ASSERT_EQ(e.sent, e.received) << "a slot was sent and never received";
  }

  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < recv_elems; ++i) {
      if (!testref::Writes(c.coll, root, r)) {
        const T want = c.in_place ? in[r][i] : kFill;
        ASSERT_EQ(std::memcmp(&recv[r][i], &want, sizeof(T)), 0) << "non-root Reduce wrote rank " << r << "[" << i << "]";
        continue;
      }
      const T want = testref::Expected<T>(c.coll, c.op, root, in, r, c.count, i);
      ASSERT_TRUE(testref::Same(recv[r][i], want, testref::CompareOp(c.coll, c.op)))
          << "rank " << r << " element " << i << ": got " << testref::AsDouble(recv[r][i]) << ", want "
          << testref::AsDouble(want);
    }
  }
}

template <typename T>
void RunCaseOp(const Case& c) {
  switch (c.op) {
    case RedOp::kSum: return RunCase<T, RedOp::kSum>(c);
    case RedOp::kProd: return RunCase<T, RedOp::kProd>(c);
    case RedOp::kMax: return RunCase<T, RedOp::kMax>(c);
    case RedOp::kMin: return RunCase<T, RedOp::kMin>(c);
    case RedOp::kAvg: return RunCase<T, RedOp::kAvg>(c);
    case RedOp::kPreMulSum: break;  // needs a scalar: tests/fp8_premul_test.cc
  }
}

void RunAny(const Case& c) {
  switch (c.dtype) {
    case DataType::kInt8: return RunCaseOp<int8_t>(c);
    case DataType::kUint8: return RunCaseOp<uint8_t>(c);
    case DataType::kInt32: return RunCaseOp<int32_t>(c);
    case DataType::kUint32: return RunCaseOp<uint32_t>(c);
    case DataType::kInt64: return RunCaseOp<int64_t>(c);
    case DataType::kUint64: return RunCaseOp<uint64_t>(c);
    case DataType::kFloat16: return RunCaseOp<Half>(c);
    case DataType::kFloat32: return RunCaseOp<float>(c);
    case DataType::kFloat64: return RunCaseOp<double>(c);
    case DataType::kBFloat16: return RunCaseOp<BFloat16>(c);
    case DataType::kFloat8E4M3: return RunCaseOp<base::Fp8E4M3>(c);
    case DataType::kFloat8E5M2: return RunCaseOp<base::Fp8E5M2>(c);
  }
}

class RingLoopHost : public testing::TestWithParam<int> {};

TEST_P(RingLoopHost, EveryCollectiveDatatypeOp) {
  const int n = GetParam();
  const Coll colls[] = {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather, Coll::kBroadcast, Coll::kReduce};
  for (Coll coll : colls) {
    const bool reduces = coll == Coll::kAllReduce || coll == Coll::kReduceScatter || coll == Coll::kReduce;
    for (int d = 0; d < base::kNumDataTypes; ++d) {
      for (int o = 0; o < (reduces ? base::kNumRedOps : 1); ++o) {
        const auto dtype = static_cast<DataType>(d);
        const auto op = static_cast<RedOp>(o);
        int k = 0;
        for (int64_t count : {0, 1, 7, 33, 1000}) {
          const int channels = 1 + (k++ % 2);
          RunAny(Case{coll, dtype, op, n, channels, count, 200, 0, false});
          if (HasFatalFailure()) return;
        }
        RunAny(Case{coll, dtype, op, n, 2, 999, 256, 1, false});
        if (HasFatalFailure()) return;
        if (coll != Coll::kReduceScatter) RunAny(Case{coll, dtype, op, n, 2, 1001, 4096, 3, true});
        if (HasFatalFailure()) return;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, RingLoopHost, testing::Values(1, 2, 3, 5),
                         [](const testing::TestParamInfo<int>& i) { return std::to_string(i.param) + "ranks"; });

// Buffers 1, 2 or 3 elements past a 16-byte boundary on every rank: with
// the slots shifted to the buffers' offset every step moves 16-byte vectors
// (with 16-byte aligned slots and no shift, every one of them was scalar).
TEST(RingLoopHost, UnalignedBuffersTakeTheVectorPath) {
  for (int offset : {0, 1, 2, 3}) {
    for (Coll coll : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather, Coll::kBroadcast,
                      Coll::kReduce}) {
      g_vector_steps = 0;
      g_scalar_steps = 0;
      RunAny(Case{coll, DataType::kFloat32, RedOp::kSum, 3, 2, 5000, 1024, offset, false});
      if (HasFatalFailure()) return;
      EXPECT_GT(g_vector_steps.load(), 0)
          << "offset " << offset << " coll " << static_cast<int>(coll);
      EXPECT_EQ(g_scalar_steps.load(), 0)
          << "offset " << offset << " coll " << static_cast<int>(coll);
    }
  }
  // In place too: an AllGather's rank r reads its input r * 7 floats into
  // its output, so every block starts at its own offset modulo 16, and the
  // shift follows each block around the ring.
  g_vector_steps = 0;
  g_scalar_steps = 0;
  RunAny(Case{Coll::kAllGather, DataType::kFloat32, RedOp::kSum, 3, 1, 7, 1024, 1, true});
  EXPECT_GT(g_vector_steps.load(), 0);
  EXPECT_EQ(g_scalar_steps.load(), 0);
}

// A ring of `n` ranks over network FIFOs, `channels` lanes each: rank r's
// edge out of channel c is edges[c * n + r], connected to rank r + 1.
class NetRing {
 public:
  // `gpudirect`: every rank offers GPUDirect, so each edge keeps its slots
  // apart (process memory standing in for the device's).
  NetRing(int n, int channels, uint64_t slot_bytes, bool gpudirect = false)
      : n_(n), edges_(static_cast<size_t>(n) * channels) {
    auto fabric = std::make_shared<transport::LocalFabric>(n);
    std::vector<int> members(n);
    for (int r = 0; r < n; ++r) members[r] = r;
    std::vector<transport::PeerInfo> peers;
    for (int r = 0; r < n; ++r) {
      transport::PeerInfo p = transport::LocalPeerInfo(r, -1);
      p.pid = 200000 + r;               // a process of its own
      p.host_hash ^= 0x2000 * (r + 1);  // on a host of its own
      peers.push_back(p);
    }
    for (int r = 0; r < n; ++r) {
      transport::ConnectorSpec spec;
      spec.rank = r;
      spec.nranks = n;
      spec.tag = 0x6e657472696e67;
      spec.peers = peers;
      spec.timeout_ms = 20000;
      if (gpudirect) spec.gpudirect.assign(n, 1);
      spec.gpudirect_host_stand_in = gpudirect;
      exchanges_.push_back(std::make_unique<transport::FabricExchange>(transport::LocalFabric::View(fabric, r), 0,
                                                                       members, 20000));
      connectors_.push_back(
          std::make_unique<transport::Connector>(exchanges_.back().get(), spec, base::GetConfig()));
    }
    std::vector<std::thread> threads;
    errors_.resize(n);
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r, channels, slot_bytes] {
        std::vector<transport::PairKey> sends, recvs;
        for (int c = 0; c < channels; ++c) {
          sends.push_back({(r + 1) % n, c});
          recvs.push_back({(r + n - 1) % n, c});
        }
        auto links = connectors_[r]->Connect(sends, recvs, transport::FifoGeometry{slot_bytes, 0, 0}, false, nullptr);
        if (!links.ok()) {
          errors_[r] = links.status().ToString();
          return;
        }
        for (int c = 0; c < channels; ++c) {
          Edge& out = edges_[c * n + r];
          Edge& in = edges_[c * n + (r + n - 1) % n];
          out.net = in.net = true;
          out.send = (*links)[c];
          in.recv = (*links)[channels + c];
          if (out.send.medium != transport::Medium::kNet) errors_[r] = "not a network edge";
          if ((out.send.slots != nullptr) != gpudirect) errors_[r] = "slots apart: not as offered";
        }
      });
    }
    for (auto& t : threads) t.join();
  }
  ~NetRing() {
    std::vector<std::thread> threads;
    for (int r = 0; r < n_; ++r) threads.emplace_back([&, r] { connectors_[r]->Shutdown(true, 5000); });
    for (auto& t : threads) t.join();
  }
  std::string error() const {
    for (const std::string& e : errors_) {
      if (!e.empty()) return e;
    }
    return "";
  }
  std::vector<Edge>& edges() { return edges_; }

 private:
  int n_;
  std::vector<Edge> edges_;
  std::vector<std::unique_ptr<transport::Exchange>> exchanges_;
  std::vector<std::unique_ptr<transport::Connector>> connectors_;
  std::vector<std::string> errors_;
};

// Every collective, datatype and operator through the proxy between three
// hosts, two channels, slots of 1 KiB (most calls take many steps, the
// FIFOs fill), buffers off 16-byte alignment (shifts 4, 8, 12).
void RunOverNetwork(bool gpudirect) {
  constexpr int kRanks = 3, kChannels = 2;
  constexpr int64_t kSlice = 1024;
  NetRing ring(kRanks, kChannels, kSlice + kSlotShiftPad, gpudirect);
  ASSERT_EQ(ring.error(), "");
  g_net_edges = &ring.edges();
  const Coll colls[] = {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather, Coll::kBroadcast, Coll::kReduce};
  for (Coll coll : colls) {
    const bool reduces = coll == Coll::kAllReduce || coll == Coll::kReduceScatter || coll == Coll::kReduce;
    for (int d = 0; d < base::kNumDataTypes && !::testing::Test::HasFatalFailure(); ++d) {
      for (int o = 0; o < (reduces ? base::kNumRedOps : 1) && !::testing::Test::HasFatalFailure(); ++o) {
        const auto dtype = static_cast<DataType>(d);
        const auto op = static_cast<RedOp>(o);
        RunAny(Case{coll, dtype, op, kRanks, kChannels, 1, kSlice, 0, false});
        RunAny(Case{coll, dtype, op, kRanks, kChannels, 3001, kSlice, 1 + d % 3, false});
      }
    }
  }
  g_net_edges = nullptr;
}

TEST(RingLoopOverNetwork, EveryCollectiveDatatypeOp) { RunOverNetwork(false); }

// The same with every edge's slots apart from its header (GPUDirect's
// layout and wire: each slot as its metadata and then its data).
TEST(RingLoopOverNetwork, SlotsApartEveryCollectiveDatatypeOp) { RunOverNetwork(true); }

// ReduceCopy alone: every alignment combination of sources and destinations,
// against the element function, including in place.
TEST(ReduceCopyHost, AnyAlignmentAnySize) {
  using T = Half;
  const auto f = ReduceFunc<T, RedOp::kSum>::Make(1);
  for (int64_t n : {0, 1, 7, 8, 9, 63, 64, 65, 1000}) {
    for (int oa = 0; oa < 8; ++oa) {
      for (int ob : {0, 3}) {
        for (int od : {oa, 5}) {
          std::vector<uint4> ma(n / 8 + 3), mb(n / 8 + 3), md(n / 8 + 3);
          T* a = reinterpret_cast<T*>(ma.data()) + oa;
          T* b = reinterpret_cast<T*>(mb.data()) + ob;
          T* d = reinterpret_cast<T*>(md.data()) + od;
          for (int64_t i = 0; i < n; ++i) {
            a[i] = T::FromFloat(static_cast<float>(i % 11));
            b[i] = T::FromFloat(static_cast<float>(i % 5));
          }
          for (int tid = 0; tid < kThreads; ++tid) {
            ReduceCopy<T, RedOp::kSum, Mode::kReduce>(f, tid, kThreads, a, b, d, nullptr, n);
          }
          for (int64_t i = 0; i < n; ++i) {
            ASSERT_EQ(d[i].ToFloat(), static_cast<float>(i % 11 + i % 5)) << n << " " << oa << " " << ob << " " << od;
          }
          for (int tid = 0; tid < kThreads; ++tid) {  // in place: d = d + b
            ReduceCopy<T, RedOp::kSum, Mode::kReduce>(f, tid, kThreads, d, b, d, nullptr, n);
          }
          for (int64_t i = 0; i < n; ++i) ASSERT_EQ(d[i].ToFloat(), static_cast<float>(i % 11 + 2 * (i % 5)));
        }
      }
    }
  }
}

}  // namespace
}  // namespace ringo::kernels::gpu::internal
