// Data-parallel gradient synchronisation as the frameworks do it: the flat
// gradient (laid out in backward order) cut into buckets of about
// --bucket-mb, each bucket averaged over the ranks (ringoAvg) as soon as the
// backward pass has completed it, by a communication thread that owns its
// own communicator, so that the all-reduces overlap the rest of the
// backward pass (host collectives block the caller).
//
// Thread safety: BeginStep, ParamReady and Finish are called by one thread
// (the training loop); the communication thread is internal.
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

class GradSync {
 public:
  // `grads`: the flat fp32 gradient (ringoMemAlloc memory, so that large
  // all-reduces go straight between the ranks' buffers). `comm` is used by
  // the communication thread only, from the constructor on.
  // `error_feedback`: before each bucket's all-reduce, add what the wire
  // lost of it the step before (ringoCommWireRound), and keep what it loses
  // now.
  GradSync(ringoComm_t comm, float* grads, std::vector<Bucket> buckets, GradDtype dtype,
           bool overlap, bool error_feedback = false);
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
  // Hands over what is left (every bucket without overlap) and waits until
  // every bucket is averaged; *exposed_ms is the time waited. The first
  // error of any all-reduce (naming the peer that failed).
  base::Status Finish(double* exposed_ms);
  const std::vector<BucketTiming>& timings() const { return timings_; }

 private:
  using Clock = std::chrono::steady_clock;
  double Since(Clock::time_point t) const;
  void Enqueue(int bucket);
  void Loop();
  base::Status Run(int bucket);

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
