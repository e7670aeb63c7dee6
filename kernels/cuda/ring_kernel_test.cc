// The CUDA ring kernels without any transport: N ranks on one GPU in this
// process, one stream each, FIFOs in device memory, every collective x
// datatype x op x protocol on small, odd and misaligned cases, compared with a
// host reference folded with the same ReduceFunc, and the failure paths
// (timeout, abort, mismatched collectives). The reduction and copy kernels,
// kernel loading and launch errors: reduce_kernel_test.cc (the same test).
// Without a visible GPU the GPU tests skip (fail under RINGO_REQUIRE_GPU=1);
// the argument checks still run. Inputs are written with cudaMemset and
// cudaMemcpy on the legacy stream, which the ranks' non-blocking streams do
// not wait for: every case synchronises the device before it launches.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/cuda.h"
#include "base/device/dtype.h"
#include "base/gpu_test.h"
#include "kernels/cuda/internal/test_reference.h"
#include "kernels/cuda/launch.h"
#include "kernels/reduce_op.h"
#include "kernels/schedule.h"

#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#define RINGO_TEST_HAVE_CUDART 1
#else
#define RINGO_TEST_HAVE_CUDART 0
#endif

namespace ringo::kernels::gpu {
namespace {

using base::BFloat16;
using base::DataType;
using base::Half;
using base::RedOp;

constexpr char kSkipMessage[] = "no CUDA device visible: GPU kernel tests skipped";

std::string NoGpuReason() {
  return std::string(kSkipMessage) + " (" + base::ProbeCuda().reason + ")";
}

#define SKIP_WITHOUT_GPU() RINGO_SKIP_WITHOUT_GPU(base::ProbeCuda().device_count > 0, NoGpuReason())

// ---- Host-only checks: run everywhere. ----

TEST(RingKernelArgs, RejectsBadArgumentsBeforeTouchingCuda) {
  DeviceCollArgs a;
  a.ring.nranks = 2;
  a.ring.nchannels = 1;
  a.ring.order[1] = 1;
  a.ring.call.count = 16;
  a.ring.slice_bytes = 256;
  DeviceChannel ch;  // null FIFOs
  const DeviceChannel* table = &ch;  // never read: the checks refuse first
  const KernelGuard guard;
  if (!KernelsBuilt()) {
    EXPECT_FALSE(LaunchRingKernel(a, &ch, table, 1, nullptr, guard).ok());
    return;
  }
  float buf[16];
  a.ring.call.send = buf;
  a.ring.call.recv = buf;
  EXPECT_EQ(LaunchRingKernel(a, &ch, table, 1, nullptr, guard).code(), base::Code::kInvalidArgument);
  EXPECT_EQ(LaunchRingKernel(a, &ch, table, 0, nullptr, guard).code(), base::Code::kInvalidArgument);
  EXPECT_EQ(LaunchRingKernel(a, &ch, table, kMaxChannels + 1, nullptr, guard).code(),
            base::Code::kInvalidArgument);
  EXPECT_EQ(LaunchRingKernel(a, &ch, nullptr, 1, nullptr, guard).code(), base::Code::kInvalidArgument);
  a.ring.call.root = 5;
  EXPECT_EQ(LaunchRingKernel(a, &ch, table, 1, nullptr, guard).code(), base::Code::kInvalidArgument);
  a.ring.call.root = 1;  // not at root_pos 0
  EXPECT_EQ(LaunchRingKernel(a, &ch, table, 1, nullptr, guard).code(), base::Code::kInvalidArgument);
  a.ring.call.root = 0;
  a.ring.call.send = reinterpret_cast<const char*>(buf) + 1;  // not float-aligned
  EXPECT_EQ(LaunchRingKernel(a, &ch, table, 1, nullptr, guard).code(), base::Code::kInvalidArgument);
  EXPECT_EQ(LaunchReduceKernel(DataType::kFloat32, static_cast<RedOp>(9), buf, buf, buf, 1, nullptr).code(),
            base::Code::kInvalidArgument);
}

TEST(RingKernelArgs, SliceLimits) {
  DeviceFifo f;
  f.slot_bytes = 4096;
  f.ll_slot_bytes = 4096;
  EXPECT_EQ(MaxSliceBytes(f, Proto::kSimple), 4096 - kSlotShiftPad);  // room for the shift
  f.slot_bytes = 16;
  EXPECT_EQ(MaxSliceBytes(f, Proto::kSimple), 0);
  EXPECT_EQ(MaxSliceBytes(f, Proto::kLL), 2048);
  EXPECT_EQ(LLSlotBytesFor(2048), 4096);
  EXPECT_EQ(LLSlotBytesFor(1), 16);
}

TEST(RingKernelArgs, ErrorRecordStatusNamesPeerAndStep) {
  ErrorRecord r{};
  EXPECT_TRUE(ErrorRecordStatus(r).ok());
  r.code = static_cast<int32_t>(KernelError::kTimeout);
  r.rank = 3;
  r.peer = 2;
  r.channel = 1;
  r.receiving = 1;
  r.step = 17;
  r.waited_ns = 5000000000ull;
  const base::Status st = ErrorRecordStatus(r);
  EXPECT_EQ(st.code(), base::Code::kTimeout);
  EXPECT_NE(st.message().find("rank 3 receiving from rank 2"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("step 17"), std::string::npos) << st.message();
  r.code = static_cast<int32_t>(KernelError::kSizeMismatch);
  EXPECT_EQ(ErrorRecordStatus(r).code(), base::Code::kInvalidUsage);
  r.code = static_cast<int32_t>(KernelError::kAborted);
  EXPECT_EQ(ErrorRecordStatus(r).code(), base::Code::kRemoteError);
}

#if !RINGO_TEST_HAVE_CUDART

TEST(RingKernelGpu, Skipped) {
  RINGO_SKIP_WITHOUT_GPU(false, NoGpuReason() << " (built without the CUDA toolkit)");
}

#else

// ---- GPU plumbing. ----

void Cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}
#define CUDA(call) Cuda((call), #call)

// FIFO memory of one connector: transport/fifo/layout.h's, zeroed (the
// kernels read no header field but the counters, metadata and abort words).

// N ranks on one GPU: FIFOs for every ring edge and channel, a stream, an
// error record per ring position, one abort flag, and each position's
// channel table in device memory. Ring position q holds rank order[q], a
// permutation unlike the identity.
class GpuRing {
 public:
  GpuRing(int nranks, int nchannels, int64_t slot_bytes, int64_t ll_slot_bytes)
      : n_(nranks), nch_(nchannels), slot_bytes_(slot_bytes), ll_slot_bytes_(ll_slot_bytes) {
    CUDA(cudaSetDevice(0));
    // Every kernel loaded before the ranks launch (as a communicator's init does).
    const base::StatusOr<RingResidency> loaded = LoadRingKernels(0);
    if (!loaded.ok()) throw std::runtime_error(loaded.status().ToString());
    for (int q = 0; q < n_; ++q) order_.push_back(n_ - 1 - q);
    const size_t bytes = Geometry().Bytes();
    if (n_ > 1) {
      for (int e = 0; e < n_ * nch_; ++e) {
        void* m = nullptr;
        CUDA(cudaMalloc(&m, bytes));
        CUDA(cudaMemset(m, 0, bytes));
        edges_.push_back(static_cast<char*>(m));
      }
    }
    streams_.resize(n_);
    for (auto& s : streams_) CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA(cudaHostAlloc(reinterpret_cast<void**>(&errors_), sizeof(ErrorRecord) * n_, cudaHostAllocMapped));
    CUDA(cudaHostAlloc(reinterpret_cast<void**>(&abort_), sizeof(int), cudaHostAllocMapped));
    std::memset(errors_, 0, sizeof(ErrorRecord) * n_);
    *abort_ = 0;
    CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&errors_dev_), errors_, 0));
    CUDA(cudaMalloc(reinterpret_cast<void**>(&claims_), sizeof(int) * n_));
    CUDA(cudaMemset(claims_, 0, sizeof(int) * n_));
    CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&abort_dev_), abort_, 0));
    for (int q = 0; q < n_ && n_ > 1; ++q) {
      const std::vector<DeviceChannel> ch = Channels(q);
      void* t = nullptr;
      CUDA(cudaMalloc(&t, sizeof(DeviceChannel) * ch.size()));
      CUDA(cudaMemcpy(t, ch.data(), sizeof(DeviceChannel) * ch.size(), cudaMemcpyHostToDevice));
      tables_.push_back(static_cast<DeviceChannel*>(t));
    }
    CUDA(cudaDeviceSynchronize());
  }
  ~GpuRing() {
    cudaDeviceSynchronize();
    for (DeviceChannel* t : tables_) cudaFree(t);
    for (char* m : edges_) cudaFree(m);
    for (auto s : streams_) cudaStreamDestroy(s);
    cudaFreeHost(errors_);
    cudaFreeHost(abort_);
    cudaFree(claims_);
  }
  GpuRing(const GpuRing&) = delete;
  GpuRing& operator=(const GpuRing&) = delete;

  int nranks() const { return n_; }
  int nchannels() const { return nch_; }
  int rank_at(int pos) const { return order_[pos]; }
  const std::vector<int>& order() const { return order_; }
  cudaStream_t stream(int pos) const { return streams_[pos]; }
  ErrorRecord& error(int pos) { return errors_[pos]; }
  // Ring position `pos`'s abort flag, error record and deadline.
  KernelGuard Guard(int pos, int rank, uint64_t timeout_ns) const {
    KernelGuard g;
    g.abort = abort_dev_;
    g.error = errors_dev_ + pos;
    g.claim = claims_ + pos;
    g.timeout_ns = timeout_ns;
    g.rank = rank;
    return g;
  }
  void SetAbort(int v) { *reinterpret_cast<volatile int*>(abort_) = v; }

  // Position `pos`'s channel table in device memory (null for one rank).
  const DeviceChannel* table(int pos) const { return n_ > 1 ? tables_[pos] : nullptr; }

  // The channels position `pos` runs: edge pos-1 -> pos in, edge pos -> pos+1 out.
  std::vector<DeviceChannel> Channels(int pos) const {
    std::vector<DeviceChannel> out(nch_);
    if (n_ == 1) return out;
    const int prev = (pos + n_ - 1) % n_;
    const int next = (pos + 1) % n_;
    for (int c = 0; c < nch_; ++c) {
      out[c].recv = Fifo(prev, c, true, order_[prev]);
      out[c].send = Fifo(pos, c, false, order_[next]);
    }
    return out;
  }

 private:
  transport::FifoGeometry Geometry() const {
    return transport::FifoGeometry{static_cast<uint64_t>(slot_bytes_), 0, static_cast<uint64_t>(ll_slot_bytes_)};
  }
  DeviceFifo Fifo(int edge, int c, bool receiving, int peer) const {
    return DeviceFifoAt(edges_[edge * nch_ + c], Geometry(), receiving, peer);
  }

  int n_;
  int nch_;
  int64_t slot_bytes_;
  int64_t ll_slot_bytes_;
  std::vector<int> order_;
  std::vector<char*> edges_;
  std::vector<DeviceChannel*> tables_;
  std::vector<cudaStream_t> streams_;
  ErrorRecord* errors_ = nullptr;
  ErrorRecord* errors_dev_ = nullptr;
  int* claims_ = nullptr;  // device memory, one per position
  int* abort_ = nullptr;
  int* abort_dev_ = nullptr;
};

// ---- Cases. ----

using testref::AsDouble;
using testref::Hash;
using testref::Same;
using testref::Value;

struct Case {
  Coll coll;
  DataType dtype;
  RedOp op;
  int64_t count;
  int root;
  Proto proto;
  int64_t slice_bytes;
  int send_off;  // elements past a 256-byte boundary
  int recv_off;
  bool in_place;
  std::string Name() const {
    return "coll " + std::to_string(static_cast<int>(coll)) + " " + base::DataTypeName(dtype) + " " +
           base::RedOpName(op) + " count " + std::to_string(count) + " root " + std::to_string(root) + " proto " +
           std::to_string(static_cast<int>(proto)) + " slice " + std::to_string(slice_bytes) + " offsets " +
           std::to_string(send_off) + "/" + std::to_string(recv_off) + (in_place ? " in place" : "");
  }
};

constexpr size_t kPad = 256;
constexpr uint8_t kCanary = 0xA5;

// Per-rank device buffers, reused by every case of a test.
class Buffers {
 public:
  Buffers(int nranks, size_t bytes) : bytes_(bytes + 2 * kPad + 64) {
    for (int r = 0; r < nranks; ++r) {
      void* s = nullptr;
      void* d = nullptr;
      CUDA(cudaMalloc(&s, bytes_));
      CUDA(cudaMalloc(&d, bytes_));
      send_.push_back(static_cast<char*>(s));
      recv_.push_back(static_cast<char*>(d));
    }
  }
  ~Buffers() {
    for (char* p : send_) cudaFree(p);
    for (char* p : recv_) cudaFree(p);
  }
  size_t bytes() const { return bytes_; }
  char* send(int r) const { return send_[r]; }
  char* recv(int r) const { return recv_[r]; }

 private:
  size_t bytes_;
  std::vector<char*> send_;
  std::vector<char*> recv_;
};

// Runs one case on every rank and checks outputs and canaries.
template <typename T>
void RunCase(GpuRing& ring, Buffers& buf, const Case& c) {
  SCOPED_TRACE(c.Name());
  const int n = ring.nranks();
  const int64_t send_elems = testref::SendElems(c.coll, n, c.count);
  const int64_t recv_elems = testref::RecvElems(c.coll, n, c.count);
  const size_t es = sizeof(T);

  const std::vector<std::vector<T>> in = testref::Inputs<T>(c.coll, n, c.count, c.op);
  // Output bytes [lo, hi) of each recv buffer; the canary around them up to `span`.
  const size_t lo = kPad + c.recv_off * es, hi = lo + recv_elems * es, span = hi + kPad;
  std::vector<T*> send_dev(n), recv_dev(n);
  for (int r = 0; r < n; ++r) {
    recv_dev[r] = reinterpret_cast<T*>(buf.recv(r) + kPad + c.recv_off * es);
    if (c.in_place) {
      send_dev[r] = c.coll == Coll::kAllGather ? recv_dev[r] + r * c.count : recv_dev[r];
    } else {
      send_dev[r] = reinterpret_cast<T*>(buf.send(r) + kPad + c.send_off * es);
    }
    CUDA(cudaMemset(buf.recv(r), kCanary, span));
    CUDA(cudaMemcpy(send_dev[r], in[r].data(), send_elems * es, cudaMemcpyHostToDevice));
  }
  // The legacy stream's memset and copy (whose DMA may still run after
  // cudaMemcpy returns) must land before the ranks' non-blocking streams read.
  CUDA(cudaDeviceSynchronize());

  for (int q = 0; q < n; ++q) {
    const int rank = ring.rank_at(q);
    CollArgs call;
    call.coll = c.coll;
    call.dtype = c.dtype;
    call.op = c.op;
    call.send = send_dev[rank];
    call.recv = recv_dev[rank];
    call.count = c.count;
    call.root = c.root;
    DeviceCollArgs a;
    a.ring = MakeRingArgs(call, rank, n, q, ring.order().data(), ring.nchannels(), c.slice_bytes);
    a.proto = c.proto;
    const std::vector<DeviceChannel> ch = ring.Channels(q);
    const base::Status st = LaunchRingKernel(a, ch.data(), ring.table(q), ring.nchannels(), ring.stream(q),
                                             ring.Guard(q, rank, 20'000'000'000ull));
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  for (int q = 0; q < n; ++q) CUDA(cudaStreamSynchronize(ring.stream(q)));
  for (int q = 0; q < n; ++q) ASSERT_TRUE(ErrorRecordStatus(ring.error(q)).ok()) << ErrorRecordStatus(ring.error(q)).ToString();

  std::vector<uint8_t> host(span);
  for (int r = 0; r < n; ++r) {
    CUDA(cudaMemcpy(host.data(), buf.recv(r), span, cudaMemcpyDeviceToHost));
    for (size_t b = 0; b < host.size(); ++b) {
      if (b >= lo && b < hi) continue;
      ASSERT_EQ(host[b], kCanary) << "rank " << r << " wrote byte " << b << " outside its output";
    }
    const T* got = reinterpret_cast<const T*>(host.data() + lo);
    const bool defined = testref::Writes(c.coll, c.root, r);
    for (int64_t i = 0; i < recv_elems; ++i) {
      if (!defined) {  // a non-root Reduce leaves its output alone: the canary, or its input in place
        const T* want = c.in_place ? &in[r][i] : nullptr;
        const uint8_t* bytes = reinterpret_cast<const uint8_t*>(got + i);
        for (size_t b = 0; b < es; ++b) {
          const uint8_t w = want != nullptr ? reinterpret_cast<const uint8_t*>(want)[b] : kCanary;
          ASSERT_EQ(bytes[b], w) << "rank " << r << ": non-root Reduce wrote element " << i;
        }
        continue;
      }
      const T want = testref::Expected<T>(c.coll, c.op, c.root, in, r, c.count, i);
      ASSERT_TRUE(Same(got[i], want, testref::CompareOp(c.coll, c.op)))
          << "rank " << r << " element " << i << " of " << recv_elems << ": got " << AsDouble(got[i]) << ", want "
          << AsDouble(want);
    }
  }
}

void RunCaseAnyType(GpuRing& ring, Buffers& buf, const Case& c) {
  switch (c.dtype) {
    case DataType::kInt8: return RunCase<int8_t>(ring, buf, c);
    case DataType::kUint8: return RunCase<uint8_t>(ring, buf, c);
    case DataType::kInt32: return RunCase<int32_t>(ring, buf, c);
    case DataType::kUint32: return RunCase<uint32_t>(ring, buf, c);
    case DataType::kInt64: return RunCase<int64_t>(ring, buf, c);
    case DataType::kUint64: return RunCase<uint64_t>(ring, buf, c);
    case DataType::kFloat16: return RunCase<Half>(ring, buf, c);
    case DataType::kFloat32: return RunCase<float>(ring, buf, c);
    case DataType::kFloat64: return RunCase<double>(ring, buf, c);
    case DataType::kBFloat16: return RunCase<BFloat16>(ring, buf, c);
  }
}

// ---- The sweep. ----

constexpr int64_t kSlotBytes = 4096;
constexpr int64_t kLLSlotBytes = 2048;
constexpr int64_t kMaxCount = 70001;

class RingSweep : public testing::TestWithParam<int> {};

TEST_P(RingSweep, EveryCollectiveDatatypeOpProtocol) {
  SKIP_WITHOUT_GPU();
  const int n = GetParam();
  // One ring for all cases, protocols alternating: the counters must carry
  // over from launch to launch and from Simple to LL.
  GpuRing ring(n, 2, kSlotBytes + kSlotShiftPad, kLLSlotBytes);
  Buffers buf(n, static_cast<size_t>(kMaxCount) * n * 8);
  const Coll colls[] = {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather, Coll::kBroadcast, Coll::kReduce};
  const int64_t counts[] = {0, 1, 7, 33, 1000, 4099};
  for (Proto proto : {Proto::kSimple, Proto::kLL}) {
    // Small slices so small counts reach the multi-loop, multi-chunk paths.
    const int64_t slice = proto == Proto::kSimple ? 256 : 128;
    for (Coll coll : colls) {
      const bool reduces = coll == Coll::kAllReduce || coll == Coll::kReduceScatter || coll == Coll::kReduce;
      for (int d = 0; d < base::kNumDataTypes; ++d) {
        const auto dtype = static_cast<DataType>(d);
        for (int o = 0; o < (reduces ? base::kNumRedOps : 1); ++o) {
          const auto op = static_cast<RedOp>(o);
          const int root = n > 1 ? 1 : 0;
          for (int64_t count : counts) {
            RunCaseAnyType(ring, buf, Case{coll, dtype, op, count, root, proto, slice, 0, 0, false});
            if (HasFatalFailure()) return;
          }
          // Misaligned: shared offset (scalar head, then vectors), differing offsets (scalar).
          for (auto [so, ro] : {std::pair<int, int>{1, 1}, {1, 2}}) {
            RunCaseAnyType(ring, buf, Case{coll, dtype, op, 1000, root, proto, slice, so, ro, false});
            if (HasFatalFailure()) return;
          }
          if (coll != Coll::kReduceScatter) {
            RunCaseAnyType(ring, buf, Case{coll, dtype, op, 1001, root, proto, slice, 0, 3, true});
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
  // Large slices and a count of many loops, for the common types.
  for (Proto proto : {Proto::kSimple, Proto::kLL}) {
    const int64_t slice = proto == Proto::kSimple ? kSlotBytes : kLLSlotBytes / 2;
    for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16, DataType::kInt8}) {
      for (Coll coll : colls) {
        RunCaseAnyType(ring, buf, Case{coll, dtype, RedOp::kSum, kMaxCount, 0, proto, slice, 0, 0, false});
        if (HasFatalFailure()) return;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, RingSweep, testing::Values(1, 2, 3, 4, 8),
                         [](const testing::TestParamInfo<int>& i) { return std::to_string(i.param) + "ranks"; });

// ---- Failure paths: a fresh ring each, since counters end out of step. ----

// Launches position `pos` alone (its peers never run).
void LaunchAlone(GpuRing& ring, Buffers& buf, int pos, int64_t count, uint64_t timeout_ns) {
  const int rank = ring.rank_at(pos);
  CollArgs call;
  call.coll = Coll::kAllReduce;
  call.dtype = DataType::kFloat32;
  call.op = RedOp::kSum;
  call.send = buf.send(rank) + kPad;
  call.recv = buf.recv(rank) + kPad;
  call.count = count;
  DeviceCollArgs a;
  a.ring = MakeRingArgs(call, rank, ring.nranks(), pos, ring.order().data(), ring.nchannels(), 1024);
  const std::vector<DeviceChannel> ch = ring.Channels(pos);
  CUDA(cudaDeviceSynchronize());  // the buffers' setup (legacy stream) before a non-blocking stream
  const base::Status st = LaunchRingKernel(a, ch.data(), ring.table(pos), ring.nchannels(), ring.stream(pos),
                                           ring.Guard(pos, rank, timeout_ns));
  ASSERT_TRUE(st.ok()) << st.ToString();
}

TEST(RingKernelFailure, TimeoutNamesPeerAndStepAndReturns) {
  SKIP_WITHOUT_GPU();
  GpuRing ring(2, 1, kSlotBytes, kLLSlotBytes);
  Buffers buf(2, 1 << 20);
  LaunchAlone(ring, buf, 0, 100000, 200'000'000ull);
  CUDA(cudaStreamSynchronize(ring.stream(0)));
  const ErrorRecord& e = ring.error(0);
  EXPECT_EQ(e.code, static_cast<int32_t>(KernelError::kTimeout));
  EXPECT_EQ(e.rank, ring.rank_at(0));
  EXPECT_EQ(e.peer, ring.rank_at(1));
  EXPECT_EQ(e.receiving, 1);
  EXPECT_EQ(e.step, 1);  // step 0 sends, step 1 waits for the predecessor
  EXPECT_GE(e.waited_ns, 200'000'000ull);
  EXPECT_EQ(ErrorRecordStatus(e).code(), base::Code::kTimeout) << ErrorRecordStatus(e).ToString();
}

TEST(RingKernelFailure, AbortFlagEndsTheWait) {
  SKIP_WITHOUT_GPU();
  GpuRing ring(2, 2, kSlotBytes, kLLSlotBytes);
  Buffers buf(2, 1 << 20);
  ring.SetAbort(1);
  const auto t0 = std::chrono::steady_clock::now();
  LaunchAlone(ring, buf, 1, 100000, 60'000'000'000ull);
  CUDA(cudaStreamSynchronize(ring.stream(1)));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(ring.error(1).code, static_cast<int32_t>(KernelError::kAborted));
  EXPECT_EQ(ErrorRecordStatus(ring.error(1)).code(), base::Code::kRemoteError);
}

TEST(RingKernelFailure, MismatchedCountsAreReported) {
  SKIP_WITHOUT_GPU();
  GpuRing ring(2, 1, kSlotBytes, kLLSlotBytes);
  Buffers buf(2, 1 << 20);
  for (int q = 0; q < 2; ++q) {
    const int rank = ring.rank_at(q);
    CollArgs call;
    call.send = buf.send(rank) + kPad;
    call.recv = buf.recv(rank) + kPad;
    call.count = q == 0 ? 1000 : 2000;
    DeviceCollArgs a;
    a.ring = MakeRingArgs(call, rank, 2, q, ring.order().data(), 1, 256);
    const std::vector<DeviceChannel> ch = ring.Channels(q);
    ASSERT_TRUE(LaunchRingKernel(a, ch.data(), ring.table(q), 1, ring.stream(q), ring.Guard(q, rank, 500'000'000ull))
                    .ok());
  }
  for (int q = 0; q < 2; ++q) CUDA(cudaStreamSynchronize(ring.stream(q)));
  const bool mismatch = ring.error(0).code == static_cast<int32_t>(KernelError::kSizeMismatch) ||
                        ring.error(1).code == static_cast<int32_t>(KernelError::kSizeMismatch);
  EXPECT_TRUE(mismatch) << ErrorRecordStatus(ring.error(0)).ToString() << " / "
                        << ErrorRecordStatus(ring.error(1)).ToString();
}

#endif  // RINGO_TEST_HAVE_CUDART

}  // namespace
}  // namespace ringo::kernels::gpu
