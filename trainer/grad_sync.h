// Data-parallel gradient synchronisation as the frameworks do it: the flat
// gradient (laid out in backward order) cut into buckets of about
// --bucket-mb, each bucket averaged over the ranks (ringoAvg) as soon as the
// backward pass has completed it, on a communicator of its own, so that the
// all-reduces overlap the rest of the backward pass. Two ways:
//
// - Host memory: a communication thread runs the all-reduces (host
//   collectives block the caller).
// - Streams (a GPU Compute): each bucket's all-reduce is queued on a
//   communication stream behind an event of the compute stream, with no
//   thread and no host wait; Finish makes the compute stream wait for the
//   last one, and the times come from events once the step is over.
//   Against the CPU backend (streams nullptr) the same bookkeeping runs with
//   each all-reduce complete on return.
//
// Thread safety: BeginStep, ParamReady, Finish and Settle are called by one
// thread (the training loop); the communication thread is internal.
#ifndef RINGO_TRAINER_GRAD_SYNC_H_
#define RINGO_TRAINER_GRAD_SYNC_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "ringo/ringo.h"
#include "trainer/compute.h"
#include "trainer/mlp.h"

namespace ringo::train {

enum class GradDtype { kFp32, kBf16, kFp16 };
const char* GradDtypeName(GradDtype dtype);
size_t GradDtypeBytes(GradDtype dtype);
ringoDataType_t GradDtypeRingo(GradDtype dtype);
// --wire's names, by ringoWire_t value ("?" for another value), and back
// ("fp8" is e4m3 too); false for an unknown name.
const char* WireName(int wire);
bool ParseWireName(const std::string& name, int* wire);

struct Bucket {
  size_t offset = 0;  // floats into the flat gradient
  size_t count = 0;
  int first_param = 0, last_param = 0;  // indices into Mlp::params(), inclusive
  std::string layers;                   // "fc8.weight..fc2.bias"
};

// PyTorch DDP's rule over the parameters in backward order: a bucket takes
// parameters until it holds at least `cap_bytes` (of fp32 gradient), then
// the next one starts; the first bucket closes at `first_cap_bytes` already
// (DDP's 1 MiB), so the first all-reduce starts early in the backward pass.
std::vector<Bucket> MakeBuckets(const std::vector<ParamInfo>& params, size_t cap_bytes,
                                size_t first_cap_bytes = size_t{1} << 20);

// One step's record of one bucket, times from BeginStep.
struct BucketTiming {
  double ready_ms = 0;      // the backward pass completed the bucket
  double start_ms = 0;      // its all-reduce began (compression included)
  double wait_ms = 0;       // without overlap, bucket 0: a barrier first (waiting for the
                            // slowest rank), so that allreduce_ms is the all-reduce alone
  double allreduce_ms = 0;  // the ringoAllReduce call alone
  double convert_ms = 0;    // compression and expansion (bf16/fp16)
};

// GradSync's stream way: the backend and the communication stream
// (compute->NewStream()).
struct GradStreams {
  Compute* compute = nullptr;
  Compute::Stream comm = nullptr;
};

class GradSync {
 public:
  // `grads`: the flat fp32 gradient (ringoMemAlloc memory, so that large
  // all-reduces go straight between the ranks' buffers). `comm` is used by
  // the communication thread only, from the constructor on.
  // `error_feedback`: before each bucket's all-reduce, add what the wire
  // lost of it the step before (ringoCommWireRound), and keep what it loses
  // now.
  // `streams`: with a Compute, the stream way (fp32 gradients, no error
  // feedback); `comm` is then used on `streams.comm` only.
  using Streams = GradStreams;
  GradSync(ringoComm_t comm, float* grads, std::vector<Bucket> buckets, GradDtype dtype,
           bool overlap, bool error_feedback = false, Streams streams = Streams());
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // Allocates the compressed buffer (bf16/fp16) and starts the thread.
  base::Status Start();
  const std::vector<Bucket>& buckets() const { return buckets_; }

  // A step's last micro-batch begins its backward pass.
  void BeginStep();
  // The backward pass completed parameter `param`'s gradient; with overlap a
  // bucket whose parameters are all complete goes to the thread at once.
  void ParamReady(int param);
  // Hands over what is left (every bucket without overlap). Host: waits
  // until every bucket is averaged. Streams: the compute stream waits for
  // the last all-reduce (the optimizer step queued next reads the average).
  // The first error of any all-reduce (naming the peer that failed).
  base::Status Finish();
  // Once the step's compute stream is synchronised: *exposed_ms, the time
  // the step waited for communication after its backward pass, and
  // timings(). Streams: a failure a queued all-reduce met.
  base::Status Settle(double* exposed_ms);
  const std::vector<BucketTiming>& timings() const { return timings_; }

 private:
  using Clock = std::chrono::steady_clock;
  double Since(Clock::time_point t) const;
  void Enqueue(int bucket);
  void Loop();
  base::Status Run(int bucket);
  void Launch(int bucket);  // streams


  Streams streams_;
  std::vector<Compute::Event> events_;  // streams: begin, backward done, comm done, then 3 per bucket
  double exposed_ms_ = 0;               // host
  base::Status launch_error_;           // streams
  ringoComm_t comm_;
  float* grads_;
  std::vector<Bucket> buckets_;
  GradDtype dtype_;
  bool overlap_;
  void* packed_ = nullptr;  // ringoMemAlloc, 16-bit gradients
  bool error_feedback_ = false;
  std::vector<float> residual_;  // error feedback: per gradient element
  std::vector<float> sent_;      // what the wire makes of a bucket
  float barrier_ = 0;
  std::vector<int> bucket_of_param_;
  std::vector<int> pending_;  // parameters still to complete, per bucket
  int next_to_enqueue_ = 0;
  Clock::time_point step_start_;
  std::vector<BucketTiming> timings_;  // written by the thread before it counts a bucket done

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int> queue_;  // GUARDED_BY(mu_)
  int done_ = 0;           // GUARDED_BY(mu_)
  bool stop_ = false;      // GUARDED_BY(mu_)
  base::Status error_;     // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace ringo::train

#endif  // RINGO_TRAINER_GRAD_SYNC_H_
