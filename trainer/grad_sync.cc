#include "trainer/grad_sync.h"

#include <algorithm>

#include <utility>

#include "trainer/comm.h"
#include "trainer/half.h"

namespace ringo::train {

namespace {
constexpr std::pair<const char*, int> kWireNames[] = {{"none", ringoWireNone},    {"bf16", ringoWireBf16},
                                                      {"fp16", ringoWireFp16},    {"e4m3", ringoWireFp8e4m3},
                                                      {"e5m2", ringoWireFp8e5m2}, {"fp8", ringoWireFp8e4m3}};
}  // namespace

const char* WireName(int wire) {
  for (const auto& [name, value] : kWireNames) {
    if (value == wire) return name;
  }
  return "?";
}

bool ParseWireName(const std::string& name, int* wire) {
  for (const auto& [n, value] : kWireNames) {
    if (name == n) {
      *wire = value;
      return true;
    }
  }
  return false;
}

const char* GradDtypeName(GradDtype dtype) {
  switch (dtype) {
    case GradDtype::kBf16:
      return "bf16";
    case GradDtype::kFp16:
      return "fp16";
    default:
      return "fp32";
  }
}

size_t GradDtypeBytes(GradDtype dtype) { return dtype == GradDtype::kFp32 ? 4 : 2; }

ringoDataType_t GradDtypeRingo(GradDtype dtype) {
  switch (dtype) {
    case GradDtype::kBf16:
      return ringoBfloat16;
    case GradDtype::kFp16:
      return ringoFloat16;
    default:
      return ringoFloat32;
  }
}

std::vector<Bucket> MakeBuckets(const std::vector<ParamInfo>& params, size_t cap_bytes, size_t first_cap_bytes) {
  std::vector<Bucket> buckets;
  for (int i = 0; i < static_cast<int>(params.size()); ++i) {
    const size_t cap = buckets.size() == 1 ? std::min(first_cap_bytes, cap_bytes) : cap_bytes;
    if (buckets.empty() || buckets.back().count * sizeof(float) >= cap) {
      Bucket b;
      b.offset = params[i].offset;
      b.first_param = i;
      b.layers = params[i].name;
      buckets.push_back(b);
    }
    Bucket& b = buckets.back();
    b.count += params[i].count;
    b.last_param = i;
  }
  for (Bucket& b : buckets) {
    if (b.last_param != b.first_param) b.layers += ".." + params[b.last_param].name;
  }
  return buckets;
}

namespace {
// Events of the stream way: the step's three, then three per bucket.
enum : size_t { kBegin, kBackwardDone, kCommDone, kPerStep };
size_t ReadyEvent(int b) { return kPerStep + 3 * static_cast<size_t>(b); }
size_t StartEvent(int b) { return ReadyEvent(b) + 1; }
size_t EndEvent(int b) { return ReadyEvent(b) + 2; }
}  // namespace

GradSync::GradSync(ringoComm_t comm, float* grads, std::vector<Bucket> buckets, GradDtype dtype,
                   bool overlap, bool error_feedback, Streams streams)
    : streams_(streams), comm_(comm), grads_(grads), buckets_(std::move(buckets)), dtype_(dtype), overlap_(overlap),
      error_feedback_(error_feedback && dtype == GradDtype::kFp32) {
  if (error_feedback_ && !buckets_.empty()) {
    residual_.assign(buckets_.back().offset + buckets_.back().count, 0.0f);
    sent_.resize(residual_.size());
  }
  for (int b = 0; b < static_cast<int>(buckets_.size()); ++b) {
    bucket_of_param_.resize(buckets_[b].last_param + 1, b);
  }
  pending_.resize(buckets_.size());
  timings_.resize(buckets_.size());
}

GradSync::~GradSync() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (packed_ != nullptr) (void)ringoMemFree(packed_);
  if (streams_.compute != nullptr) {
    streams_.compute->Synchronize(streams_.comm);
    for (Compute::Event e : events_) streams_.compute->FreeEvent(e);
  }
}

base::Status GradSync::Start() {
  if (streams_.compute != nullptr) {
    if (dtype_ != GradDtype::kFp32 || error_feedback_) {
      return base::InvalidUsage("gradients on streams are all-reduced in fp32, without error feedback");
    }
    events_.resize(ReadyEvent(static_cast<int>(buckets_.size())));
    for (Compute::Event& e : events_) e = streams_.compute->NewEvent();
    return base::OkStatus();
  }
  if (dtype_ != GradDtype::kFp32 && !buckets_.empty()) {
    const Bucket& last = buckets_.back();
    const size_t bytes = (last.offset + last.count) * sizeof(uint16_t);
    RETURN_IF_ERROR(RingoCall(ringoMemAlloc(&packed_, bytes), "ringoMemAlloc", nullptr));
  }
  thread_ = std::thread([this] { Loop(); });
  return base::OkStatus();
}

double GradSync::Since(Clock::time_point t) const {
  return std::chrono::duration<double, std::milli>(t - step_start_).count();
}

void GradSync::BeginStep() {
  step_start_ = Clock::now();
  if (streams_.compute != nullptr) {
    streams_.compute->Record(events_[kBegin], streams_.compute->stream());
    launch_error_ = base::OkStatus();
  }
  for (size_t b = 0; b < buckets_.size(); ++b) {
    pending_[b] = buckets_[b].last_param - buckets_[b].first_param + 1;
    timings_[b] = BucketTiming();
  }
  next_to_enqueue_ = 0;
  std::lock_guard<std::mutex> lock(mu_);
  done_ = 0;
}

void GradSync::ParamReady(int param) {
  const int b = bucket_of_param_[param];
  if (--pending_[b] != 0) return;
  timings_[b].ready_ms = Since(Clock::now());  // streams: replaced by the events' time in Settle
  if (streams_.compute != nullptr) streams_.compute->Record(events_[ReadyEvent(b)], streams_.compute->stream());
  if (overlap_) Enqueue(b);
}

void GradSync::Launch(int bucket) {
  Compute* c = streams_.compute;
  const Bucket& b = buckets_[bucket];
  c->StreamWait(streams_.comm, events_[ReadyEvent(bucket)]);  // recorded by ParamReady
  c->Record(events_[StartEvent(bucket)], streams_.comm);
  float* data = grads_ + b.offset;
  const ringoResult_t result = ringoAllReduce(data, data, b.count, ringoFloat32, ringoAvg, comm_, streams_.comm);
  c->Record(events_[EndEvent(bucket)], streams_.comm);
  if (result != ringoSuccess && launch_error_.ok()) {
    launch_error_ = RingoCall(result, "ringoAllReduce of gradient bucket " + std::to_string(bucket), comm_);
  }
}

void GradSync::Enqueue(int bucket) {
  next_to_enqueue_ = bucket + 1;
  if (streams_.compute != nullptr) {
    Launch(bucket);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(bucket);
  }
  cv_.notify_all();
}

base::Status GradSync::Finish() {
  const auto wait_start = Clock::now();
  if (streams_.compute != nullptr) {
    Compute* c = streams_.compute;
    c->Record(events_[kBackwardDone], c->stream());
    for (int b = next_to_enqueue_; b < static_cast<int>(buckets_.size()); ++b) Enqueue(b);
    c->Record(events_[kCommDone], streams_.comm);
    c->StreamWait(c->stream(), events_[kCommDone]);
    return launch_error_;
  }
  for (int b = next_to_enqueue_; b < static_cast<int>(buckets_.size()); ++b) Enqueue(b);
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_ == static_cast<int>(buckets_.size()) || !error_.ok(); });
  exposed_ms_ = std::chrono::duration<double, std::milli>(Clock::now() - wait_start).count();
  return error_;
}

base::Status GradSync::Settle(double* exposed_ms) {
  if (streams_.compute == nullptr) {
    *exposed_ms = exposed_ms_;
    return base::OkStatus();
  }
  Compute* c = streams_.compute;
  c->Synchronize(streams_.comm);
  RETURN_IF_ERROR(c->Error());
  ringoResult_t async = ringoSuccess;
  if (ringoCommGetAsyncError(comm_, &async) == ringoSuccess && async != ringoSuccess && async != ringoInProgress) {
    return RingoCall(async, "a gradient ringoAllReduce", comm_);
  }
  // Stream time: what the compute stream waited after its backward pass.
  *exposed_ms = std::max(0.0, c->ElapsedMs(events_[kBackwardDone], events_[kCommDone]));
  for (int b = 0; b < static_cast<int>(buckets_.size()); ++b) {
    BucketTiming& t = timings_[b];
    t.ready_ms = c->ElapsedMs(events_[kBegin], events_[ReadyEvent(b)]);
    t.start_ms = c->ElapsedMs(events_[kBegin], events_[StartEvent(b)]);
    t.allreduce_ms = c->ElapsedMs(events_[StartEvent(b)], events_[EndEvent(b)]);
    t.wait_ms = 0;
    t.convert_ms = 0;
  }
  return base::OkStatus();
}

void GradSync::Loop() {
  for (;;) {
    int bucket;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      bucket = queue_.front();
      queue_.pop_front();
      if (!error_.ok()) continue;  // a failed communicator: nothing more to run
    }
    base::Status status = Run(bucket);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!status.ok() && error_.ok()) error_ = status;
      ++done_;
    }
    cv_.notify_all();
  }
}

base::Status GradSync::Run(int bucket) {
  const Bucket& b = buckets_[bucket];
  BucketTiming& t = timings_[bucket];
  if (!overlap_ && bucket == 0) {
    const auto before = Clock::now();
    RETURN_IF_ERROR(
        RingoCall(ringoAllReduce(&barrier_, &barrier_, 1, ringoFloat32, ringoSum, comm_, nullptr),
                  "ringoAllReduce (the barrier before the gradient buckets)", comm_));
    t.wait_ms = std::chrono::duration<double, std::milli>(Clock::now() - before).count();
  }
  const auto start = Clock::now();
  t.start_ms = Since(start);
  float* data = grads_ + b.offset;
  void* wire = data;
  if (error_feedback_) {
    // What the wire lost of this bucket last step goes in again; what it
    // loses now is kept (as the all-reduce below will round it).
    float* residual = residual_.data() + b.offset;
    float* sent = sent_.data() + b.offset;
    for (size_t i = 0; i < b.count; ++i) data[i] += residual[i];
    RETURN_IF_ERROR(RingoCall(ringoCommWireRound(data, sent, b.count, ringoFloat32, ringoAvg, comm_),
                              "ringoCommWireRound of gradient bucket " + std::to_string(bucket), comm_));
    for (size_t i = 0; i < b.count; ++i) residual[i] = data[i] - sent[i];
  }
  if (dtype_ != GradDtype::kFp32) {
    uint16_t* packed = static_cast<uint16_t*>(packed_) + b.offset;
    if (dtype_ == GradDtype::kBf16) {
      ToBf16(data, packed, b.count);
    } else {
      ToFp16(data, packed, b.count);
    }
    wire = packed;
  }
  const auto call = Clock::now();
  const ringoResult_t result =
      ringoAllReduce(wire, wire, b.count, GradDtypeRingo(dtype_), ringoAvg, comm_, nullptr);
  const auto returned = Clock::now();
  t.allreduce_ms = std::chrono::duration<double, std::milli>(returned - call).count();
  RETURN_IF_ERROR(
      RingoCall(result, "ringoAllReduce of gradient bucket " + std::to_string(bucket), comm_));
  if (dtype_ != GradDtype::kFp32) {
    const uint16_t* packed = static_cast<const uint16_t*>(wire);
    if (dtype_ == GradDtype::kBf16) {
      FromBf16(packed, data, b.count);
    } else {
      FromFp16(packed, data, b.count);
    }
  }
  t.convert_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - start).count() - t.allreduce_ms;
  return base::OkStatus();
}

}  // namespace ringo::train
