#include "integrations/pytorch/cuda_group.h"

#ifdef RINGO_TORCH_CUDA

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>

#include <stdexcept>
#include <utility>

namespace ringo::pytorch {

CudaWork::CudaWork(int rank, c10d::OpType type, const char* title, std::vector<at::Tensor> inputs,
                   std::vector<at::Tensor> outputs, std::shared_ptr<Comm> comm, c10::Device device)
    : WorkBase(rank, type, title, std::move(inputs)),
      outputs_(std::move(outputs)),
      comm_(std::move(comm)),
      device_(device),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()), std::vector<c10::Device>{device})) {}

std::exception_ptr CudaWork::AsyncFailure() const {
  const ringoResult_t err = comm_->AsyncError();
  if (err == ringoSuccess || err == ringoInProgress) return nullptr;
  return std::make_exception_ptr(std::runtime_error(RingoError(comm_->get(), err, "collective")));
}

bool CudaWork::isCompleted() { return AsyncFailure() != nullptr || end_.query(); }

bool CudaWork::isSuccess() const { return AsyncFailure() == nullptr; }

std::exception_ptr CudaWork::exception() const { return AsyncFailure(); }

bool CudaWork::wait(std::chrono::milliseconds /*timeout*/) {
  synchronize();
  return true;
}

void CudaWork::synchronize() {
  if (std::exception_ptr e = AsyncFailure()) std::rethrow_exception(e);
  c10::cuda::CUDAGuard guard(device_);
  end_.block(c10::cuda::getCurrentCUDAStream(device_.index()));
}

CudaGroup::CudaGroup(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                     std::chrono::milliseconds timeout)
    : store_(std::move(store)), rank_(rank), size_(size), timeout_(timeout) {}

CudaGroup::PerDevice& CudaGroup::Get(c10::DeviceIndex index) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = devices_.find(index);
  if (it != devices_.end()) return *it->second;
  c10::cuda::CUDAGuard guard(index);  // the communicator takes the current device
  std::shared_ptr<Comm> comm = Comm::Create(*store_, rank_, size_, timeout_, RINGO_DEVICE_CUDA);
  auto per = std::unique_ptr<PerDevice>(
      new PerDevice{std::move(comm), c10::cuda::getStreamFromPool(false, index), {}});
  return *devices_.emplace(index, std::move(per)).first->second;
}

WorkPtr CudaGroup::Launch(c10d::OpType type, const char* title,
                          const std::vector<at::Tensor>& inputs, std::vector<at::Tensor> outputs,
                          const Body& body, c10::Device device) {
  PerDevice& d = Get(device.index());
  std::lock_guard<std::mutex> lock(d.mu);
  d.comm->CheckUsable(title);
  c10::cuda::CUDAGuard device_guard(device);
  // The Ringo stream starts after what the caller queued on its stream.
  at::cuda::CUDAEvent ready;
  ready.record(c10::cuda::getCurrentCUDAStream(device.index()));
  ready.block(d.stream);
  auto work = c10::make_intrusive<CudaWork>(rank_, type, title, inputs, outputs, d.comm, device);
  {
    c10::cuda::CUDAStreamGuard stream_guard(d.stream);
    d.comm->Label(title);
    body(RunContext{d.comm.get(), d.stream.stream()});
    // (std::as_const: a braced list of pointers deduces one element type.)
    for (const auto* list : {&inputs, &std::as_const(outputs)}) {
      for (const at::Tensor& t : *list) {
        if (t.numel() > 0)
          c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), d.stream);
      }
    }
    work->end_.record(d.stream);
    // Completed with the Ringo stream current: the future's consumers wait
    // for it, not for the host.
    work->future_->markCompleted(c10::IValue(outputs));
  }
  return work;
}

void CudaGroup::Synchronize() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [index, d] : devices_) {
    std::lock_guard<std::mutex> device_lock(d->mu);
    d->stream.synchronize();
  }
}

}  // namespace ringo::pytorch

#endif  // RINGO_TORCH_CUDA
