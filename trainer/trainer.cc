#include "trainer/trainer.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "trainer/comm.h"
#include "trainer/compute.h"
#include "trainer/data.h"
#include "trainer/grad_sync.h"
#include "trainer/mlp.h"
#include "trainer/ring_model.h"

namespace ringo::train {
namespace {

using base::Status;
using base::StatusOr;
using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

constexpr int kEvalRows = 500;

// This process's rank among the ranks of its host, as the launchers say it
// (torchrun, Open MPI, Slurm, MPICH); `rank` where none does (-np's ranks
// are all on one host).
int LocalRank(int rank) {
  for (const char* name : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return std::atoi(v);
  }
  return rank;
}

// Everything one rank owns while it trains. Members are destroyed in
// reverse order: the gradient thread before the communicators.
class Rank {
 public:
  Rank(const Options& o, int rank, int nranks) : o_(o), rank_(rank), nranks_(nranks) {
    for (int r = 0; r < nranks; ++r) original_.push_back(r);
    original_count_ = original_.size();
  }
  ~Rank();
  // Trains; on failure aborts both communicators first, so that peers
  // blocked on this rank wake with an error instead of waiting out the timeout.
  Status Run(const ringoUniqueId& id, RunInfo* info) {
    Status status = Train(id, info);
    if (!status.ok()) AbortAll();
    return status;
  }

 private:
  Status Train(const ringoUniqueId& id, RunInfo* info);
  Status Setup(const ringoUniqueId& id, RunInfo* info);
  Status TrainStep(int64_t step, const std::vector<int>& perm, int64_t step_in_epoch,
                   StepRecord* rec);
  // The logging and evaluation after step `s` (collective on the main
  // communicator when due).
  Status AfterStep(int64_t s, int64_t total, int epoch, const StepRecord& rec, RunInfo* info);
  // --elastic: after `why` failed step `step`, the survivors agree on the
  // lost ranks, shrink, share out the batch again and take the state of the
  // survivor that completed the fewest steps; *resume is that step. `why`
  // itself when no rank was lost.
  Status Recover(const Status& why, int64_t step, RunInfo* info, int64_t* resume);
  // (Re)makes the gradient thread on the gradient communicator.
  Status StartSync(RunInfo* info);
  void MakeBnReducer();
  // The plan for `n` ranks at the same global batch: the starting micro-batch
  // with more (or fewer) micro-batches accumulated where n divides it so;
  // else --accum micro-batches in equal shares where n divides that; else
  // unequal shares.
  ShardPlan PlanFor(int n) const;
  // --elastic-dir after a recovery: rank 0 waits up to --rejoin-wait-ms for a
  // replacement's request; if one came, every rank grows the communicators
  // by it (ringoCommGrow, the id handed over in the folder) and sends it the
  // state to go on from step `step`.
  Status MaybeGrow(int64_t step, RunInfo* info);
  // --join: this process asks in the folder, waits for the id, joins the
  // grown communicators as the last rank; *step is where the job goes on.
  Status Join(int64_t* step);
  // The parameters, momentum and batch-norm statistics from rank 0.
  Status BroadcastState(int root);
  // After a shrink or grow: `main` becomes the main communicator (the old one
  // aborted, or destroyed with `destroy_old`), a gradient communicator split
  // from it, this rank `rank` of `size` with the ranks' ids `ids` and `plan`.
  Status Regroup(ringoComm_t main, bool destroy_old, int rank, int size, std::vector<int> ids,
                 const ShardPlan& plan);
  // The shares of the current plan, as the report prints them.
  std::string Layout() const;
  StatusOr<double> Evaluate();
  Status Gather(RunInfo* info);
  // The backend: the CPU's, or (--device) this rank's GPU.
  Status MakeBackend();
  // Rank 0's `count` floats (backend memory) to every rank: over the main
  // communicator on the CPU, over the gradient one on the compute stream on a GPU.
  Status BroadcastFloats(float* data, size_t count, int root, const std::string& what);
  void AbortAll() {
    stats_comm_.Abort();
    grad_comm_.Abort();
    main_comm_.Abort();
  }

  const Options& o_;
  int rank_, nranks_;           // change only in an elastic recovery
  std::vector<int> original_;   // rank -> the rank it had at the start
  size_t original_count_ = 0;   // ranks at the start
  int micro0_ = 0;              // the micro-batch at the start (PlanFor keeps it where it can)
  int rows_ = 0;                // rows the model's and the batch's buffers hold
  int64_t start_step_ = 0;      // a joining replacement starts where the job is
  int joined_ = 0;              // replacements joined so far (for their original rank ids)
  ShardPlan plan_;
  Dataset train_, test_;
  Communicator main_comm_;  // the training loop's: broadcasts, SyncBatchNorm, metrics
  Communicator grad_comm_;  // the gradient thread's (--device: a GPU communicator, on comm_stream_)
  Communicator stats_comm_;  // --device --sync-bn: SyncBatchNorm's, on the compute stream
  std::unique_ptr<Compute> compute_;
  Compute::Stream comm_stream_ = nullptr;  // --device: the gradients' all-reduces
  std::vector<Compute::Event> step_events_;  // the step's phases (host clock on the CPU)
  std::unique_ptr<Mlp> model_;
  float* params_ = nullptr;
  float* grads_ = nullptr;
  bool grads_from_ringo_ = false;
  float* momentum_ = nullptr;
  std::unique_ptr<GradSync> sync_;
  StatsReducer bn_reducer_;
  std::vector<float> x_;
  std::vector<uint8_t> y_;
  float* x_dev_ = nullptr;
  uint8_t* y_dev_ = nullptr;
  float* dlogits_ = nullptr;
  std::vector<StepRecord> steps_;
  std::vector<BucketTiming> bucket_times_;
  double loss_sum_ = 0, correct_sum_ = 0, count_sum_ = 0;  // since the last report
};

Rank::~Rank() {
  sync_.reset();
  if (compute_) {
    if (comm_stream_) compute_->FreeStream(comm_stream_);
    for (Compute::Event e : step_events_) compute_->FreeEvent(e);
    if (x_dev_) compute_->Free(x_dev_);
    if (y_dev_) compute_->FreeBytes(y_dev_);
    if (dlogits_) compute_->Free(dlogits_);
    if (params_) compute_->Free(params_);
    if (momentum_) compute_->Free(momentum_);
    if (grads_ && !grads_from_ringo_) compute_->Free(grads_);
  }
  if (grads_ && grads_from_ringo_) (void)ringoMemFree(grads_);
  model_.reset();
}

Status Rank::Setup(const ringoUniqueId& id, RunInfo* info) {
  const bool joining = !o_.join.empty();
  if (joining) RETURN_IF_ERROR(Join(&start_step_));  // sets the ranks, communicators and plan
  if (!joining) {
    plan_ = ShardPlan{o_.batch, o_.accum, nranks_};
    micro0_ = plan_.micro(0);
  }
  if (!joining && o_.batch % (o_.accum * nranks_) != 0) {
    return base::InvalidArgument(
        "--batch " + std::to_string(o_.batch) +
        " is not a multiple of --accum x ranks = " + std::to_string(o_.accum * nranks_));
  }
  ASSIGN_OR_RETURN(train_, LoadIdx(o_.data_dir, "train"));
  ASSIGN_OR_RETURN(test_, LoadIdx(o_.data_dir, "t10k"));
  if (train_.features != o_.model.inputs || test_.features != o_.model.inputs) {
    return base::InvalidArgument(o_.data_dir + ": images of " + std::to_string(train_.features) +
                                 " pixels, the model takes " + std::to_string(o_.model.inputs));
  }
  if (train_.count < o_.batch) {
    return base::InvalidArgument("--batch is larger than the training set");
  }
  // A GPU backend first: it makes the rank's GPU current, which the GPU
  // communicators below take as theirs.
  RETURN_IF_ERROR(MakeBackend());
  if (nranks_ > 1 && !joining) {
    if (o_.device) {
      // Gradients and SyncBatchNorm's sums go between the GPUs, each on a
      // communicator and stream of its own; metadata (metrics, records,
      // barriers) on a host communicator split from the first.
      RETURN_IF_ERROR(grad_comm_.Init(nranks_, id, rank_, o_.timeout_ms, RINGO_DEVICE_CUDA));
      RETURN_IF_ERROR(main_comm_.SplitFrom(grad_comm_, rank_, ringoWireNone, /*host=*/true, o_.timeout_ms));
      if (o_.sync_bn) RETURN_IF_ERROR(stats_comm_.SplitFrom(grad_comm_, rank_));
      comm_stream_ = compute_->NewStream();
    } else {
      RETURN_IF_ERROR(main_comm_.Init(nranks_, id, rank_, o_.timeout_ms));
      // The gradient thread's communicator: the same ranks, split from the first.
      RETURN_IF_ERROR(grad_comm_.SplitFrom(main_comm_, rank_, o_.wire));
    }
  }
  if (nranks_ > 1) MakeBnReducer();
  const int micro = plan_.micro(rank_);
  // Room for the largest share a shrink could give a rank, up to the whole
  // micro-batch (an elastic job down to one rank).
  rows_ = std::max(o_.elastic ? o_.batch / o_.accum : micro, kEvalRows);
  model_ = std::make_unique<Mlp>(compute_.get(), o_.model, rows_);
  const size_t n = model_->num_params();
  params_ = compute_->Alloc(n);
  momentum_ = compute_->Alloc(n);
  if (nranks_ > 1 && !compute_->on_device()) {
    void* p = nullptr;
    RETURN_IF_ERROR(RingoCall(ringoMemAlloc(&p, n * sizeof(float)), "ringoMemAlloc", nullptr));
    grads_ = static_cast<float*>(p);
    grads_from_ringo_ = true;
  } else {
    grads_ = compute_->Alloc(n);
  }
  model_->Bind(params_, grads_);
  model_->Init(o_.seed);
  x_.resize(static_cast<size_t>(rows_) * o_.model.inputs);
  y_.resize(rows_);
  x_dev_ = compute_->Alloc(x_.size());
  y_dev_ = static_cast<uint8_t*>(compute_->AllocBytes(y_.size()));
  dlogits_ = compute_->Alloc(static_cast<size_t>(rows_) * o_.model.classes);

  info->nranks = nranks_;
  info->global_batch = o_.batch;
  info->micro = micro;
  info->accum = o_.accum;
  info->model = o_.model.Describe();
  info->params = n;
  info->compute = compute_->Name();
  info->grad_dtype = o_.grad_dtype;
  info->wire = o_.wire;
  info->error_feedback = o_.error_feedback;
  info->overlap = o_.overlap;
  info->sync_bn = o_.sync_bn;
  info->buckets = MakeBuckets(model_->params(), static_cast<size_t>(o_.bucket_mb * 1048576.0),
                                static_cast<size_t>(o_.first_bucket_mb * 1048576.0));
  if (nranks_ == 1) return base::OkStatus();
  if (joining) {
    RETURN_IF_ERROR(BroadcastState(0));
    RETURN_IF_ERROR(StartSync(info));
    std::fprintf(stderr, "ringo-train: rank %d holds the job's state and trains\n", rank_);
    return base::OkStatus();
  }

  // As DDP does: every replica starts from rank 0's parameters.
  RETURN_IF_ERROR(BroadcastFloats(params_, n, 0, "the parameters"));
  if (o_.calibrate && !o_.elastic) {  // elastic: the rank count the model would fit can change
    const size_t wire = GradDtypeBytes(o_.grad_dtype);
    std::vector<size_t> bucket_bytes;
    for (const Bucket& b : info->buckets) bucket_bytes.push_back(b.count * wire);
    ASSIGN_OR_RETURN(info->calibration,
                     Calibrate(grad_comm_.get(), main_comm_.get(), GradDtypeRingo(o_.grad_dtype),
                               wire, CalibrationSizes(bucket_bytes, wire),
                               compute_->on_device() ? compute_.get() : nullptr, comm_stream_));
    std::vector<CalibrationPoint> fit_points =
        SelectFitPoints(info->calibration, bucket_bytes, &info->fit_lo, &info->fit_hi);
    info->fit = FitRingModel(fit_points, nranks_);
    if (!info->fit.valid) {  // two noisy large sizes: every size then
      fit_points = info->calibration;
      info->fit_lo = fit_points.front().bytes;
      info->fit_hi = fit_points.back().bytes;
      info->fit = FitRingModel(fit_points, nranks_);
    }
    info->fit_error = MaxFitError(info->fit, fit_points, nranks_);
  }
  return StartSync(info);
}

Status Rank::StartSync(RunInfo* info) {
  GradSync::Streams streams;
  if (compute_->on_device()) streams = GradSync::Streams{compute_.get(), comm_stream_};
  sync_ = std::make_unique<GradSync>(grad_comm_.get(), grads_, info->buckets, o_.grad_dtype,
                                     o_.overlap, o_.error_feedback, streams);
  return sync_->Start();
}

Status Rank::MakeBackend() {
  if (o_.device) {
    const int gpus = CudaDeviceCount();
    // Ranks of a host take its GPUs in turn (several ranks may share one);
    // -np's ranks are all this host's (whatever a launcher's shell says).
    const int local = o_.num_procs > 0 ? rank_ : LocalRank(rank_);
    const int device = gpus > 0 ? local % gpus : 0;
    ASSIGN_OR_RETURN(compute_, MakeCudaCompute(device, o_.gemm));
  } else {
    compute_ = MakeCpuCompute(o_.blas_threads);
  }
  return base::OkStatus();
}

Status Rank::BroadcastFloats(float* data, size_t count, int root, const std::string& what) {
  if (!compute_->on_device()) {
    return RingoCall(ringoBroadcast(data, data, count, ringoFloat32, root, main_comm_.get(), nullptr),
                     "ringoBroadcast of " + what, main_comm_.get());
  }
  RETURN_IF_ERROR(RingoCall(ringoBroadcast(data, data, count, ringoFloat32, root, grad_comm_.get(), compute_->stream()),
                            "ringoBroadcast of " + what, grad_comm_.get()));
  compute_->Synchronize(compute_->stream());
  return compute_->Error();
}

void Rank::MakeBnReducer() {
  if (!o_.sync_bn) return;
  if (compute_->on_device()) {
    ringoComm_t comm = stats_comm_.get();
    Compute::Stream stream = compute_->stream();
    bn_reducer_ = [comm, stream](double* data, size_t count) {
      return RingoCall(ringoAllReduce(data, data, count, ringoFloat64, ringoSum, comm, stream),
                       "ringoAllReduce of the batch-norm statistics", comm);
    };
    return;
  }
  ringoComm_t comm = main_comm_.get();
  bn_reducer_ = [comm](double* data, size_t count) {
    return AllReduceDoubles(comm, data, count, ringoSum);
  };
}

Status Rank::TrainStep(int64_t step, const std::vector<int>& perm, int64_t step_in_epoch,
                       StepRecord* rec) {
  const int micro = plan_.micro(rank_);
  const StatsReducer* reducer = bn_reducer_ ? &bn_reducer_ : nullptr;
  // The ranks average their gradients (ringoAvg): each scales its sum by
  // ranks / global batch, which is 1 / (its rows) when the shares are equal
  // and keeps the global mean when a shrink made them unequal.
  const bool even = o_.batch % (plan_.accum * nranks_) == 0;
  const float scale = even ? 1.0f / static_cast<float>(micro * plan_.accum)
                           : static_cast<float>(nranks_) / static_cast<float>(o_.batch);
  const auto step_start = Clock::now();
  Compute* c = compute_.get();
  Compute::Stream stream = c->stream();
  while (step_events_.size() < 3 * static_cast<size_t>(plan_.accum) + 3) step_events_.push_back(c->NewEvent());
  Compute::Event* ev = step_events_.data();  // ev[0] start; ev[1 + 3m ...] micro-batch m; then the optimizer's two
  c->Record(ev[0], stream);
  for (int m = 0; m < plan_.accum; ++m) {
    auto t0 = Clock::now();
    GatherBatch(train_, perm, plan_.First(step_in_epoch, m, rank_), micro, x_.data(), y_.data());
    c->Upload(x_.data(), x_dev_, static_cast<size_t>(micro) * o_.model.inputs);
    c->CopyIn(y_.data(), y_dev_, static_cast<size_t>(micro));
    rec->data_ms += Ms(t0, Clock::now());
    c->Record(ev[1 + 3 * m], stream);
    RETURN_IF_ERROR(model_->Forward(x_dev_, micro, true, reducer));
    c->SoftmaxCrossEntropy(micro, o_.model.classes, model_->logits(), y_dev_, scale, dlogits_);
    c->Record(ev[2 + 3 * m], stream);
    if (original_[rank_] == o_.kill_rank && step == o_.kill_step && m + 1 == plan_.accum) {
      std::fprintf(stderr, "ringo-train: rank %d: --kill-rank: killing itself at step %lld\n",
                   original_[rank_], static_cast<long long>(step));
      std::fflush(stderr);
      raise(SIGKILL);
    }
    const bool last = m + 1 == plan_.accum;
    if (last && sync_) sync_->BeginStep();
    GradReadyFn ready = [&](int param) {
      if (last && sync_) sync_->ParamReady(param);
    };
    RETURN_IF_ERROR(model_->Backward(x_dev_, dlogits_, micro, m > 0, reducer, ready));
    c->Record(ev[3 + 3 * m], stream);
  }
  if (sync_) RETURN_IF_ERROR(sync_->Finish());
  Compute::Event* opt = ev + 1 + 3 * plan_.accum;
  c->Record(opt[0], stream);
  c->SgdStep(model_->num_params(), params_, grads_, momentum_, static_cast<float>(rec->lr),
             static_cast<float>(o_.momentum), static_cast<float>(o_.weight_decay));
  c->Record(opt[1], stream);
  // The step's one wait for the GPU: its loss and correct count.
  double loss = 0;
  int64_t correct = 0;
  c->TakeMetrics(&loss, &correct);
  RETURN_IF_ERROR(c->Error());
  if (sync_) {
    RETURN_IF_ERROR(sync_->Settle(&rec->exposed_ms));
    bucket_times_.insert(bucket_times_.end(), sync_->timings().begin(), sync_->timings().end());
  }
  for (int m = 0; m < plan_.accum; ++m) {
    rec->fwd_ms += c->ElapsedMs(ev[1 + 3 * m], ev[2 + 3 * m]);
    rec->bwd_ms += c->ElapsedMs(ev[2 + 3 * m], ev[3 + 3 * m]);
  }
  rec->opt_ms = c->ElapsedMs(opt[0], opt[1]);
  rec->step_ms = Ms(step_start, Clock::now());
  const double samples = static_cast<double>(micro) * plan_.accum;
  rec->loss = loss / samples;
  rec->acc = correct / samples;
  loss_sum_ += loss;
  correct_sum_ += correct;
  count_sum_ += samples;
  return base::OkStatus();
}

StatusOr<double> Rank::Evaluate() {
  if (o_.model.batch_norm && !o_.sync_bn && nranks_ > 1) {
    // Replicas' running statistics differ without SyncBatchNorm: use rank 0's.
    RETURN_IF_ERROR(BroadcastFloats(model_->buffer_data(), model_->num_buffers(), 0, "the batch-norm statistics"));
  }
  const int first = static_cast<int>(static_cast<int64_t>(test_.count) * rank_ / nranks_);
  const int last = static_cast<int>(static_cast<int64_t>(test_.count) * (rank_ + 1) / nranks_);
  double counts[2] = {0, static_cast<double>(last - first)};
  for (int i = first; i < last; i += kEvalRows) {
    const int rows = std::min(kEvalRows, last - i);
    GatherRange(test_, i, rows, x_.data(), y_.data());
    compute_->Upload(x_.data(), x_dev_, static_cast<size_t>(rows) * o_.model.inputs);
    compute_->CopyIn(y_.data(), y_dev_, static_cast<size_t>(rows));
    RETURN_IF_ERROR(model_->Forward(x_dev_, rows, false, nullptr));
    compute_->CountCorrect(rows, o_.model.classes, model_->logits(), y_dev_);
  }
  double unused_loss = 0;
  int64_t correct = 0;
  compute_->TakeMetrics(&unused_loss, &correct);
  RETURN_IF_ERROR(compute_->Error());
  counts[0] = static_cast<double>(correct);
  if (nranks_ > 1) RETURN_IF_ERROR(AllReduceDoubles(main_comm_.get(), counts, 2, ringoSum));
  return counts[0] / counts[1];
}

Status Rank::Gather(RunInfo* info) {
  // Ranks may hold different numbers of records (a replacement joined late):
  // the counts first, then the records padded to the largest.
  constexpr int kB = 5;  // doubles per bucket timing
  double counts[2] = {static_cast<double>(steps_.size()), static_cast<double>(bucket_times_.size())};
  std::vector<double> all_counts(2 * static_cast<size_t>(nranks_));
  if (nranks_ > 1) {
    RETURN_IF_ERROR(RingoCall(ringoAllGather(counts, all_counts.data(), 2, ringoFloat64, main_comm_.get(), nullptr),
                              "ringoAllGather of the record counts", main_comm_.get()));
  } else {
    all_counts.assign(counts, counts + 2);
  }
  size_t max_steps = 0, max_nb = 0;
  for (int r = 0; r < nranks_; ++r) {
    max_steps = std::max(max_steps, static_cast<size_t>(all_counts[2 * r]));
    max_nb = std::max(max_nb, static_cast<size_t>(all_counts[2 * r + 1]));
  }
  std::vector<double> mine(max_steps * StepRecord::kFields);
  for (size_t i = 0; i < steps_.size(); ++i) steps_[i].ToDoubles(&mine[i * StepRecord::kFields]);
  std::vector<double> mine_b(max_nb * kB);
  for (size_t i = 0; i < bucket_times_.size(); ++i) {
    const BucketTiming& t = bucket_times_[i];
    const double fields[kB] = {t.ready_ms, t.start_ms, t.wait_ms, t.allreduce_ms, t.convert_ms};
    std::copy(fields, fields + kB, &mine_b[kB * i]);
  }
  std::vector<double> all(mine.size() * nranks_), all_b(mine_b.size() * nranks_);
  if (nranks_ > 1) {
    if (!mine.empty()) {
      RETURN_IF_ERROR(RingoCall(ringoAllGather(mine.data(), all.data(), mine.size(), ringoFloat64,
                                               main_comm_.get(), nullptr),
                                "ringoAllGather of the step records", main_comm_.get()));
    }
    if (!mine_b.empty()) {
      RETURN_IF_ERROR(RingoCall(ringoAllGather(mine_b.data(), all_b.data(), mine_b.size(), ringoFloat64,
                                               main_comm_.get(), nullptr),
                                "ringoAllGather of the bucket records", main_comm_.get()));
    }
  } else {
    all = mine;
    all_b = mine_b;
  }
  info->rank_steps.assign(nranks_, {});
  info->rank_buckets.assign(nranks_, {});
  for (int r = 0; r < nranks_; ++r) {
    const size_t nsteps = static_cast<size_t>(all_counts[2 * r]), nb = static_cast<size_t>(all_counts[2 * r + 1]);
    for (size_t i = 0; i < nsteps; ++i) {
      StepRecord st;
      st.FromDoubles(&all[(r * max_steps + i) * StepRecord::kFields]);
      info->rank_steps[r].push_back(st);
    }
    for (size_t i = 0; i < nb; ++i) {
      const double* d = &all_b[(r * max_nb + i) * kB];
      info->rank_buckets[r].push_back(BucketTiming{d[0], d[1], d[2], d[3], d[4]});
    }
  }
  return base::OkStatus();
}

Status Rank::AfterStep(int64_t s, int64_t total, int epoch, const StepRecord& rec, RunInfo* info) {
  const int64_t per_epoch = train_.count / o_.batch;
  const bool eval = o_.eval_every > 0 ? (s + 1) % o_.eval_every == 0 || s + 1 == total
                                      : (s + 1) % per_epoch == 0 || s + 1 == total;
  const bool log = o_.log_every > 0 && ((s + 1) % o_.log_every == 0 || eval);
  if (!log && !eval) return base::OkStatus();
  double sums[3] = {loss_sum_, correct_sum_, count_sum_};
  if (nranks_ > 1) RETURN_IF_ERROR(AllReduceDoubles(main_comm_.get(), sums, 3, ringoSum));
  loss_sum_ = correct_sum_ = count_sum_ = 0;
  EvalRecord ev{s + 1, epoch, -1, sums[0] / sums[2], sums[1] / sums[2]};
  if (eval) {
    ASSIGN_OR_RETURN(ev.test_acc, Evaluate());
    info->evals.push_back(ev);
    info->final_test_acc = ev.test_acc;
  }
  if (rank_ == 0 && !o_.quiet) {
    std::printf("step %6lld/%lld  epoch %d  loss %.4f  train %.2f%%",
                static_cast<long long>(s + 1), static_cast<long long>(total), epoch + 1,
                ev.train_loss, 100 * ev.train_acc);
    if (eval) std::printf("  test %.2f%%", 100 * ev.test_acc);
    std::printf(
        "  | lr %.4g  step %.1f ms (fwd %.1f bwd %.1f exposed comm %.2f opt %.1f)  %.0f "
        "samples/s\n",
        rec.lr, rec.step_ms, rec.fwd_ms, rec.bwd_ms, rec.exposed_ms, rec.opt_ms,
        o_.batch / rec.step_ms * 1e3);
    std::fflush(stdout);
  }
  return base::OkStatus();
}

Status Rank::Recover(const Status& why, int64_t step, RunInfo* info, int64_t* resume) {
  const auto start = Clock::now();
  std::fprintf(stderr, "ringo-train: rank %d: step %lld failed (%s); --elastic: recovering\n", original_[rank_],
               static_cast<long long>(step), why.message().c_str());
  // The gradient thread may wait in an all-reduce with the lost rank: the
  // revoke ends it on every rank, and the thread goes.
  if (grad_comm_.get() != nullptr) (void)ringoCommRevoke(grad_comm_.get(), RINGO_REVOKE_DEFAULT);
  sync_.reset();
  std::vector<int> failed(nranks_, -1);
  int nfailed = 0;
  RETURN_IF_ERROR(RingoCall(ringoCommAgreeFailed(main_comm_.get(), failed.data(), &nfailed),
                            "ringoCommAgreeFailed", main_comm_.get()));
  failed.resize(nfailed);
  if (nfailed == 0) return why;  // every rank is there: not a failure to go on from
  ringoComm_t child = nullptr;
  RETURN_IF_ERROR(RingoCall(
      ringoCommShrink(main_comm_.get(), failed.data(), nfailed, &child, nullptr, RINGO_SHRINK_ABORT),
      "ringoCommShrink", main_comm_.get()));
  std::string lost;
  std::vector<int> survivors;  // new rank -> original rank (the shrink keeps their order)
  for (int r = 0; r < nranks_; ++r) {
    if (std::find(failed.begin(), failed.end(), r) != failed.end()) {
      lost += (lost.empty() ? "" : ", ") + std::to_string(original_[r]);
    } else {
      survivors.push_back(original_[r]);
    }
  }
  int new_rank = -1, new_size = 0;
  RETURN_IF_ERROR(RingoCall(ringoCommUserRank(child, &new_rank), "ringoCommUserRank", child));
  RETURN_IF_ERROR(RingoCall(ringoCommCount(child, &new_size), "ringoCommCount", child));
  RETURN_IF_ERROR(Regroup(child, /*destroy_old=*/false, new_rank, new_size, survivors, PlanFor(new_size)));
  // Go on from the last step every survivor completed, with the state of a
  // survivor that stopped there (the lowest such rank).
  // Steps are numbered from 0; a replacement's records start where it joined.
  const double next = steps_.empty() ? static_cast<double>(start_step_) : steps_.back().step + 1;
  double done = next;
  RETURN_IF_ERROR(AllReduceDoubles(main_comm_.get(), &done, 1, ringoMin));
  double source = next == done ? rank_ : nranks_;
  RETURN_IF_ERROR(AllReduceDoubles(main_comm_.get(), &source, 1, ringoMin));
  RETURN_IF_ERROR(BroadcastState(static_cast<int>(source)));
  const int64_t back_to = static_cast<int64_t>(done);
  while (!steps_.empty() && steps_.back().step >= static_cast<double>(back_to)) steps_.pop_back();
  bucket_times_.resize(std::min(bucket_times_.size(), steps_.size() * info->buckets.size()));
  while (!info->evals.empty() && info->evals.back().step > back_to) info->evals.pop_back();
  info->final_test_acc = info->evals.empty() ? -1 : info->evals.back().test_acc;
  loss_sum_ = correct_sum_ = count_sum_ = 0;
  RETURN_IF_ERROR(StartSync(info));
  *resume = back_to;
  const double ms = Ms(start, Clock::now());
  char line[256];
  std::snprintf(line, sizeof(line), "step %lld: lost rank %s; %d ranks go on from step %lld, %s each, %.1f ms",
                static_cast<long long>(step), lost.c_str(), nranks_, static_cast<long long>(back_to),
                Layout().c_str(), ms);
  info->recoveries.push_back(line);
  if (rank_ == 0) {
    std::printf("ringo-train: %s\n", line);
    std::fflush(stdout);
  }
  return MaybeGrow(back_to, info);
}

ShardPlan Rank::PlanFor(int n) const {
  if (micro0_ > 0 && o_.batch % (micro0_ * n) == 0) return ShardPlan{o_.batch, o_.batch / (micro0_ * n), n};
  if (o_.batch % (o_.accum * n) == 0) return ShardPlan{o_.batch, o_.accum, n};
  return ShardPlan{o_.batch, o_.accum, n};
}

Status Rank::Regroup(ringoComm_t main, bool destroy_old, int rank, int size, std::vector<int> ids,
                     const ShardPlan& plan) {
  main_comm_.Replace(main, destroy_old);
  grad_comm_.Replace(nullptr, destroy_old);
  RETURN_IF_ERROR(grad_comm_.SplitFrom(main_comm_, rank, o_.wire));
  rank_ = rank;
  nranks_ = size;
  original_ = std::move(ids);
  plan_ = plan;
  if (plan_.max_micro() > rows_) {
    return base::InvalidUsage("--elastic: " + std::to_string(nranks_) + " ranks would take " +
                              std::to_string(plan_.max_micro()) + " rows each, more than the " +
                              std::to_string(rows_) + " the buffers hold");
  }
  MakeBnReducer();
  return base::OkStatus();
}

std::string Rank::Layout() const {
  return std::to_string(plan_.micro(nranks_ - 1)) + ".." + std::to_string(plan_.max_micro()) + " rows x " +
         std::to_string(plan_.accum) + (plan_.accum == 1 ? " micro-batch" : " micro-batches");
}

Status Rank::BroadcastState(int root) {
  const size_t n = model_->num_params();
  RETURN_IF_ERROR(RingoCall(ringoBroadcast(params_, params_, n, ringoFloat32, root, main_comm_.get(), nullptr),
                            "ringoBroadcast of the parameters", main_comm_.get()));
  RETURN_IF_ERROR(RingoCall(ringoBroadcast(momentum_, momentum_, n, ringoFloat32, root, main_comm_.get(), nullptr),
                            "ringoBroadcast of the momentum", main_comm_.get()));
  if (model_->num_buffers() > 0) {
    RETURN_IF_ERROR(RingoCall(ringoBroadcast(model_->buffer_data(), model_->buffer_data(), model_->num_buffers(),
                                             ringoFloat32, root, main_comm_.get(), nullptr),
                              "ringoBroadcast of the batch-norm statistics", main_comm_.get()));
  }
  return base::OkStatus();
}

namespace {

std::string JoinPath(const std::string& dir, const char* name) { return dir + "/" + name; }

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// Writes `bytes` to `path` whole: a temporary file renamed into place.
base::Status WriteWhole(const std::string& path, const void* bytes, size_t size) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr || std::fwrite(bytes, 1, size, f) != size) {
    if (f) std::fclose(f);
    return base::SystemError("cannot write " + tmp);
  }
  std::fclose(f);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return base::SystemError("cannot rename " + tmp);
  return base::OkStatus();
}

}  // namespace

Status Rank::MaybeGrow(int64_t step, RunInfo* info) {
  if (o_.elastic_dir.empty()) return base::OkStatus();
  const auto start = Clock::now();
  double asked = 0;
  if (rank_ == 0) {
    const auto until = Clock::now() + std::chrono::milliseconds(o_.rejoin_wait_ms);
    while (!(asked = Exists(JoinPath(o_.elastic_dir, "join"))) && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  RETURN_IF_ERROR(RingoCall(ringoBroadcast(&asked, &asked, 1, ringoFloat64, 0, main_comm_.get(), nullptr),
                            "ringoBroadcast of the join request", main_comm_.get()));
  if (asked == 0) return base::OkStatus();
  const int n = nranks_ + 1;
  const ShardPlan next = PlanFor(n);
  // The newcomer's id: after every id the job has given (never a lost rank's,
  // so --kill-rank never names it).
  std::vector<int> ids = original_;
  ids.push_back(static_cast<int>(original_count_) + joined_);
  ringoUniqueId id{};
  if (rank_ == 0) {
    RETURN_IF_ERROR(RingoCall(ringoCommGetUniqueId(main_comm_.get(), &id), "ringoCommGetUniqueId", main_comm_.get()));
    // n, step, accumulation, starting micro-batch, starting rank count, joins
    // so far, then every rank's id in the grown communicator.
    std::string grow = std::to_string(n) + " " + std::to_string(step) + " " + std::to_string(next.accum) + " " +
                       std::to_string(micro0_) + " " + std::to_string(original_count_) + " " +
                       std::to_string(joined_ + 1);
    for (int i : ids) grow += " " + std::to_string(i);
    grow += "\n";
    RETURN_IF_ERROR(WriteWhole(JoinPath(o_.elastic_dir, "grow.info"), grow.data(), grow.size()));
    RETURN_IF_ERROR(WriteWhole(JoinPath(o_.elastic_dir, "grow.id"), &id, sizeof(id)));
    unlink(JoinPath(o_.elastic_dir, "join").c_str());
  }
  sync_.reset();  // idle between steps; it uses the gradient communicator
  ringoComm_t grown = nullptr;
  RETURN_IF_ERROR(RingoCall(ringoCommGrow(main_comm_.get(), n, rank_ == 0 ? &id : nullptr, -1, &grown, nullptr),
                            "ringoCommGrow", main_comm_.get()));
  RETURN_IF_ERROR(Regroup(grown, /*destroy_old=*/true, rank_, n, ids, next));
  ++joined_;
  RETURN_IF_ERROR(BroadcastState(0));
  RETURN_IF_ERROR(StartSync(info));
  char line[256];
  std::snprintf(line, sizeof(line), "step %lld: a replacement joined as rank %d; %d ranks go on, %s each, %.1f ms",
                static_cast<long long>(step), n - 1, n, Layout().c_str(), Ms(start, Clock::now()));
  info->recoveries.push_back(line);
  if (rank_ == 0) {
    std::printf("ringo-train: %s\n", line);
    std::fflush(stdout);
  }
  return base::OkStatus();
}

Status Rank::Join(int64_t* step) {
  const std::string dir = o_.join;
  const std::string me = std::to_string(getpid()) + "\n";
  RETURN_IF_ERROR(WriteWhole(JoinPath(dir, "join"), me.data(), me.size()));
  const int64_t wait_ms = o_.timeout_ms > 0 ? o_.timeout_ms : 300000;
  const auto until = Clock::now() + std::chrono::milliseconds(wait_ms);
  const std::string info_path = JoinPath(dir, "grow.info"), id_path = JoinPath(dir, "grow.id");
  while (!(Exists(info_path) && Exists(id_path))) {
    if (Clock::now() >= until) {
      unlink(JoinPath(dir, "join").c_str());  // a stale request must not make a later recovery grow
      return base::Timeout("--join: no grow id in " + dir + " after " + std::to_string(wait_ms) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  long long n = 0, at = 0, accum = 0, micro0 = 0, count0 = 0, joined = 0;
  std::vector<int> ids;
  FILE* f = std::fopen(info_path.c_str(), "r");
  int got = f != nullptr ? std::fscanf(f, "%lld %lld %lld %lld %lld %lld", &n, &at, &accum, &micro0, &count0, &joined) : 0;
  for (long long i = 0; got == 6 && i < n; ++i) {
    int v = 0;
    if (std::fscanf(f, "%d", &v) != 1) {
      got = 0;
      break;
    }
    ids.push_back(v);
  }
  if (f) std::fclose(f);
  ringoUniqueId id{};
  FILE* g = std::fopen(id_path.c_str(), "rb");
  const bool read = g != nullptr && std::fread(&id, sizeof(id), 1, g) == 1;
  if (g) std::fclose(g);
  unlink(info_path.c_str());
  unlink(id_path.c_str());
  if (got != 6 || !read || n < 2 || accum < 1 || micro0 < 1) {
    return base::InvalidArgument("--join: unreadable grow files in " + dir);
  }
  ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
  config.device_kind = RINGO_DEVICE_HOST;
  config.timeout_ms = o_.timeout_ms;
  ringoComm_t comm = nullptr;
  RETURN_IF_ERROR(RingoCall(ringoCommGrow(nullptr, static_cast<int>(n), &id, static_cast<int>(n - 1), &comm, &config),
                            "ringoCommGrow", nullptr));
  main_comm_.Replace(comm);
  rank_ = static_cast<int>(n - 1);
  nranks_ = static_cast<int>(n);
  RETURN_IF_ERROR(grad_comm_.SplitFrom(main_comm_, rank_, o_.wire));
  original_ = ids;
  original_count_ = static_cast<size_t>(count0);
  joined_ = static_cast<int>(joined);
  micro0_ = static_cast<int>(micro0);
  plan_ = ShardPlan{o_.batch, static_cast<int>(accum), nranks_};
  *step = at;
  std::fprintf(stderr, "ringo-train: joined the job as rank %d of %d at step %lld\n", rank_, nranks_, at);
  return base::OkStatus();
}

Status Rank::Train(const ringoUniqueId& id, RunInfo* info) {
  const auto start = Clock::now();
  RETURN_IF_ERROR(Setup(id, info));
  const int64_t per_epoch = train_.count / o_.batch;
  const int64_t total = o_.steps > 0 ? o_.steps : per_epoch * o_.epochs;
  info->steps = total;
  std::vector<int> perm;
  int perm_epoch = -1;
  for (int64_t s = start_step_; s < total; ++s) {
    const int epoch = static_cast<int>(s / per_epoch);
    if (epoch != perm_epoch) {
      perm = EpochPermutation(train_.count, o_.seed, epoch);
      perm_epoch = epoch;
    }
    StepRecord rec;
    rec.step = static_cast<double>(s);
    rec.epoch = epoch;
    rec.lr = LearningRate(o_, o_.batch, s, total, per_epoch);
    Status st = TrainStep(s, perm, s % per_epoch, &rec);
    if (st.ok()) {
      steps_.push_back(rec);
      st = AfterStep(s, total, epoch, rec, info);
    }
    if (st.ok()) continue;
    if (!o_.elastic || nranks_ == 1) return st;
    int64_t resume = 0;
    RETURN_IF_ERROR(Recover(st, s, info, &resume));
    s = resume - 1;  // the loop's ++s: the first step not every survivor completed
  }
  if (o_.elastic && nranks_ > 1 && total > 0) {
    // A recovery during the last step's evaluation resumes at the end: the
    // ranks agree whether each holds that evaluation, and make it again if not.
    double have = !info->evals.empty() && info->evals.back().step == total ? 1 : 0;
    RETURN_IF_ERROR(AllReduceDoubles(main_comm_.get(), &have, 1, ringoMin));
    if (have == 0) {
      while (!info->evals.empty() && info->evals.back().step == total) info->evals.pop_back();
      EvalRecord ev{total, static_cast<int>((total - 1) / per_epoch), -1, 0, 0};
      ASSIGN_OR_RETURN(ev.test_acc, Evaluate());
      info->evals.push_back(ev);
      info->final_test_acc = ev.test_acc;
    }
  }
  RETURN_IF_ERROR(Gather(info));
  info->nranks = nranks_;
  info->final_rank = rank_;
  info->micro = plan_.max_micro();
  info->accum = plan_.accum;
  if (!o_.dump_params.empty() && rank_ == 0) {
    std::vector<float> host(model_->num_params());
    compute_->Download(params_, host.data(), host.size());
    FILE* f = std::fopen(o_.dump_params.c_str(), "wb");
    if (f == nullptr || std::fwrite(host.data(), sizeof(float), host.size(), f) != host.size()) {
      if (f) std::fclose(f);
      return base::SystemError("cannot write " + o_.dump_params);
    }
    std::fclose(f);
  }
  info->wall_s = Ms(start, Clock::now()) / 1e3;
  return base::OkStatus();
}

}  // namespace

void StepRecord::ToDoubles(double* out) const {
  const double v[kFields] = {step,   epoch,   data_ms, fwd_ms, bwd_ms, exposed_ms,
                             opt_ms, step_ms, loss,    acc,    lr};
  std::copy(v, v + kFields, out);
}

void StepRecord::FromDoubles(const double* in) {
  double* const fields[kFields] = {&step,   &epoch,   &data_ms, &fwd_ms, &bwd_ms, &exposed_ms,
                                   &opt_ms, &step_ms, &loss,    &acc,    &lr};
  for (int i = 0; i < kFields; ++i) *fields[i] = in[i];
}

double LearningRate(const Options& o, int global_batch, int64_t step, int64_t total,
                    int64_t steps_per_epoch) {
  const double target =
      o.lr * (o.lr_scale_linear ? static_cast<double>(global_batch) / o.base_batch : 1.0);
  const int64_t warmup =
      o.warmup_steps >= 0 ? o.warmup_steps : (target > o.lr ? steps_per_epoch : 0);
  if (step < warmup) return o.lr + (target - o.lr) * static_cast<double>(step) / warmup;
  if (!o.cosine || total <= warmup) return target;
  const double progress = static_cast<double>(step - warmup) / static_cast<double>(total - warmup);
  return target * 0.5 * (1.0 + std::cos(M_PI * progress));
}

Status TrainRank(const Options& options, int rank, int nranks, const ringoUniqueId& id,
                 RunInfo* info) {
  Rank r(options, rank, nranks);
  return r.Run(id, info);
}

}  // namespace ringo::train
