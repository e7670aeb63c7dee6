// The extern "C" boundary: every public function runs its body in Guard(),
// which catches everything, maps a Status to ringoResult_t and keeps the
// message for ringoGetLastError. Arguments are validated here, before any
// work, so a rejected call leaves the communicator as it was.
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/config.h"
#include "base/cuda.h"
#include "base/device/dtype.h"
#include "base/logging.h"
#include "collectives/communicator.h"
#include "collectives/plan/device_choice.h"
#include "collectives/internal/boundary.h"
#include "kernels/cuda/launch.h"
#include "ringo/ringo.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/shm/shared_region.h"

using ringo::base::Status;
using ringo::base::StatusOr;
using ringo::collectives::Communicator;
using ringo::collectives::internal::Guard;
using ringo::collectives::internal::Register;
using ringo::collectives::internal::Resolve;
using ringo::collectives::internal::ResolveReady;
using ringo::collectives::internal::Retire;
using ringo::collectives::internal::Unregister;

namespace {

namespace base = ringo::base;
namespace transport = ringo::transport;
using ringo::collectives::CommOptions;
using ringo::collectives::DeviceWish;

static_assert(sizeof(ringoUniqueId) == ringo::transport::kUniqueIdBytes, "unique id size");
static_assert(ringoTimeout == static_cast<int>(base::Code::kTimeout), "result codes match");
static_assert(ringoBfloat16 == static_cast<int>(base::DataType::kBFloat16), "datatypes match");
static_assert(ringoAvg == static_cast<int>(base::RedOp::kAvg), "ops match");
static_assert(ringoFloat8e5m2 == static_cast<int>(base::DataType::kFloat8E5M2), "datatypes match");
static_assert(ringoNumTypes == base::kNumDataTypes && ringoNumOps == base::kNumRedOps, "enum sizes match");

// This rank's wish for its memory (collectives/plan/device_choice.h): the
// config's device kind, else RINGO_DEVICE, against what this process sees.
// `in_process`: one rank, or every rank a thread of this process (InitAll),
// where AUTO takes a GPU outright; across processes AUTO's GPU needs every
// rank to agree (Communicator::InitRank).
StatusOr<ringo::collectives::DeviceWish> ResolveDeviceWish(int kind, bool in_process) {
  using ringo::collectives::DeviceRequest;
  if (kind != RINGO_DEVICE_AUTO && kind != RINGO_DEVICE_HOST && kind != RINGO_DEVICE_CUDA) {
    return base::InvalidArgument("config->device_kind " + std::to_string(kind) + " is not a ringoDeviceKind_t");
  }
  const base::Config& config = base::GetConfig();
  RETURN_IF_ERROR(config.parse_status);
  const DeviceRequest api = kind == RINGO_DEVICE_HOST   ? DeviceRequest::kHost
                            : kind == RINGO_DEVICE_CUDA ? DeviceRequest::kCuda
                                                        : DeviceRequest::kAuto;
  const DeviceRequest env = ringo::collectives::ParseDeviceRequest(config.device);
  const DeviceRequest request = api != DeviceRequest::kAuto ? api : env;
  ringo::collectives::CudaFacts facts;
  if (request != DeviceRequest::kHost) {  // host memory asked for: CUDA is not even initialised
    const base::CudaProbe& probe = base::ProbeCuda();
    facts.device_count = probe.device_count;
    facts.no_gpu_reason = probe.reason;
    facts.kernels_built = ringo::kernels::gpu::KernelsBuilt();
  }
  ASSIGN_OR_RETURN(const ringo::collectives::WishChoice choice,
                   ringo::collectives::ChooseWish(api, env, facts, in_process));
  if (!choice.note.empty()) {
    if (facts.device_count > 0) RINGO_LOG(WARN) << choice.note;
    else RINGO_LOG(INFO) << choice.note;
  }
  return choice.wish;
}
}  // namespace

extern "C" {

ringoResult_t ringoGetVersion(int* version) {
  return Guard("ringoGetVersion", nullptr, [&]() -> Status {
    if (version == nullptr) return base::InvalidArgument("version is NULL");
    *version = RINGO_VERSION_CODE;
    return Status();
  });
}

ringoResult_t ringoMemAlloc(void** ptr, size_t size) {
  return Guard("ringoMemAlloc", nullptr, [&]() -> Status {
    if (ptr == nullptr) return base::InvalidArgument("ptr is NULL");
    *ptr = nullptr;
    ASSIGN_OR_RETURN(*ptr, transport::SharedAlloc(size));
    return Status();
  });
}

ringoResult_t ringoMemFree(void* ptr) {
  return Guard("ringoMemFree", nullptr, [&]() -> Status {
    if (ptr == nullptr) return base::InvalidArgument("ptr is NULL");
    return transport::SharedFree(ptr);
  });
}

ringoResult_t ringoGetUniqueId(ringoUniqueId* unique_id) {
  return Guard("ringoGetUniqueId", nullptr, [&]() -> Status {
    if (unique_id == nullptr) return base::InvalidArgument("unique_id is NULL");
    const base::Config& config = base::GetConfig();
    RETURN_IF_ERROR(config.parse_status);
    ASSIGN_OR_RETURN(auto id, transport::CreateUniqueId(config.comm_id, config.socket_ifname, config.timeout_ms));
    id.Encode(unique_id->internal);
    return Status();
  });
}

ringoResult_t ringoGetUniqueIdForAddress(const char* address, ringoUniqueId* unique_id) {
  return Guard("ringoGetUniqueIdForAddress", nullptr, [&]() -> Status {
    if (address == nullptr) return base::InvalidArgument("address is NULL");
    if (unique_id == nullptr) return base::InvalidArgument("unique_id is NULL");
    if (address[0] == '\0') return base::InvalidArgument("address is empty: pass host:port");
    const base::Config& config = base::GetConfig();
    RETURN_IF_ERROR(config.parse_status);
    ASSIGN_OR_RETURN(auto id, transport::CreateUniqueId(address, config.socket_ifname, config.timeout_ms));
    id.Encode(unique_id->internal);
    return Status();
  });
}

ringoResult_t ringoCommInitRankConfig(ringoComm_t* comm, int nranks, ringoUniqueId unique_id, int rank,
                                      const ringoConfig_t* config) {
  return Guard("ringoCommInitRankConfig", nullptr, [&]() -> Status {
    if (comm == nullptr) return base::InvalidArgument("comm is NULL");
    *comm = nullptr;
    if (nranks < 1) return base::InvalidArgument("nranks " + std::to_string(nranks) + " is not positive");
    if (rank < 0 || rank >= nranks) {
      return base::InvalidArgument("rank " + std::to_string(rank) + " is not in [0, " + std::to_string(nranks) + ")");
    }
    ASSIGN_OR_RETURN(const ringoConfig_t cfg, ringo::collectives::internal::ReadConfig(config));
    ASSIGN_OR_RETURN(const DeviceWish wish, ResolveDeviceWish(cfg.device_kind, nranks == 1));
    ASSIGN_OR_RETURN(transport::UniqueId id, transport::UniqueId::Decode(unique_id.internal));
    CommOptions options;
    options.timeout_ms = cfg.timeout_ms;
    options.device_wish = static_cast<int32_t>(wish);
    options.tagged = cfg.tagged_p2p == 1;
    options.wire = cfg.wire;
    std::vector<int> cuda_devices;  // one rank on a GPU: InitAll with one rank
    if (wish != DeviceWish::kHost) {
      // The calling thread's current device, as NCCL; read here, since a
      // non-blocking init continues on another thread.
      ASSIGN_OR_RETURN(options.cuda_device, base::CurrentDevice());
      if (nranks == 1) cuda_devices.push_back(options.cuda_device);
    }
    auto* handle = Register(new ringoComm());
    auto init = [id, nranks, rank, options, cuda_devices]() -> StatusOr<std::unique_ptr<Communicator>> {
      if (cuda_devices.empty()) return Communicator::InitRank(id, nranks, rank, options);
      ASSIGN_OR_RETURN(auto made, Communicator::InitAll(1, options, cuda_devices));
      return std::move(made[0]);
    };
    if (cfg.blocking) {
      auto made = init();
      if (!made.ok()) {
        Unregister(handle);
        delete handle;
        return made.status();
      }
      handle->Set(std::move(made).value());
      *comm = handle;
      return Status();
    }
    handle->StartInit(init);
    *comm = handle;
    return Status(base::Code::kInProgress, "initialization continues in the background");
  });
}

ringoResult_t ringoCommInitRank(ringoComm_t* comm, int nranks, ringoUniqueId unique_id, int rank) {
  return ringoCommInitRankConfig(comm, nranks, unique_id, rank, nullptr);
}

ringoResult_t ringoCommInitAll(ringoComm_t* comms, int ndev, const int* devlist) {
  return Guard("ringoCommInitAll", nullptr, [&]() -> Status {
    if (comms == nullptr) return base::InvalidArgument("comms is NULL");
    if (ndev < 1) return base::InvalidArgument("ndev " + std::to_string(ndev) + " is not positive");
    for (int i = 0; devlist != nullptr && i < ndev; ++i) {
      if (devlist[i] < 0) return base::InvalidArgument("devlist[" + std::to_string(i) + "] is negative");
    }
    ASSIGN_OR_RETURN(const DeviceWish wish, ResolveDeviceWish(RINGO_DEVICE_AUTO, true));
    std::vector<int> cuda_devices;  // empty: host memory
    if (wish == DeviceWish::kCuda) {
      const int visible = base::ProbeCuda().device_count;
      for (int i = 0; i < ndev; ++i) {
        const int d = devlist != nullptr ? devlist[i] : i % visible;
        if (d >= visible) {
          return base::InvalidArgument("devlist[" + std::to_string(i) + "] = " + std::to_string(d) + ", but " +
                                       std::to_string(visible) + " CUDA device(s) are visible");
        }
        cuda_devices.push_back(d);
      }
    }
    ASSIGN_OR_RETURN(auto made, Communicator::InitAll(ndev, CommOptions(), cuda_devices));
    for (int i = 0; i < ndev; ++i) {
      auto* handle = new ringoComm();
      handle->Set(std::move(made[i]));
      comms[i] = Register(handle);
    }
    return Status();
  });
}

ringoResult_t ringoCommFinalize(ringoComm_t comm) {
  return Guard("ringoCommFinalize", comm, [&]() -> Status {
    ASSIGN_OR_RETURN(Communicator * c, ResolveReady(comm));
    return c->Finalize();
  });
}

ringoResult_t ringoCommDestroy(ringoComm_t comm) {
  return Guard("ringoCommDestroy", nullptr, [&]() -> Status {
    RETURN_IF_ERROR(Resolve(comm).status());
    Retire(comm);  // joins a background init first
    return Status();
  });
}

ringoResult_t ringoCommAbort(ringoComm_t comm) {
  return Guard("ringoCommAbort", nullptr, [&]() -> Status {
    ASSIGN_OR_RETURN(Communicator * c, Resolve(comm));
    Unregister(comm);
    if (c != nullptr) c->Abort();
    Retire(comm);
    return Status();
  });
}

ringoResult_t ringoCommDumpTrace(ringoComm_t comm, const char* dir) {
  return Guard("ringoCommDumpTrace", comm, [&]() -> Status {
    ASSIGN_OR_RETURN(Communicator * c, ResolveReady(comm));
    ringo::collectives::Observer* o = c->observer();
    const std::string folder = dir != nullptr ? dir : ringo::base::GetConfig().trace_dir;
    if (folder.empty()) return base::InvalidUsage("no folder: pass one, or set RINGO_TRACE_DIR");
    if (o == nullptr || !o->recorder().on()) {
      return base::InvalidUsage("the flight recorder is off (RINGO_TRACE_BUFFER=0)");
    }
    return o->Dump("request", folder);
  });
}

ringoResult_t ringoCommSetTraceLabel(ringoComm_t comm, const char* label) {
  return Guard("ringoCommSetTraceLabel", comm, [&]() -> Status {
    ASSIGN_OR_RETURN(Communicator * c, ResolveReady(comm));
    c->SetTraceLabel(label);
    return Status();
  });
}

ringoResult_t ringoCommGetAsyncError(ringoComm_t comm, ringoResult_t* async_error) {
  return Guard("ringoCommGetAsyncError", comm, [&]() -> Status {
    if (async_error == nullptr) return base::InvalidArgument("async_error is NULL");
    RETURN_IF_ERROR(Resolve(comm).status());
    *async_error = static_cast<ringoResult_t>(comm->AsyncError().code());
    return Status();
  });
}

ringoResult_t ringoCommCount(const ringoComm_t comm, int* count) {
  return Guard("ringoCommCount", comm, [&]() -> Status {
    if (count == nullptr) return base::InvalidArgument("count is NULL");
    ASSIGN_OR_RETURN(Communicator * c, ResolveReady(comm));
    *count = c->nranks();
    return Status();
  });
}

ringoResult_t ringoCommSetWire(ringoComm_t comm, int wire) {
  return Guard("ringoCommSetWire", comm, [&]() -> Status {
    ASSIGN_OR_RETURN(Communicator * c, ResolveReady(comm));
    return c->SetWire(wire);
  });
}

ringoResult_t ringoCommGetWire(const ringoComm_t comm, int* wire) {
  return Guard("ringoCommGetWire", comm, [&]() -> Status {
    if (wire == nullptr) return base::InvalidArgument("wire is NULL");
    ASSIGN_OR_RETURN(Communicator * c, ResolveReady(comm));
    *wire = c->wire();
    return Status();
  });
}

ringoResult_t ringoCommUserRank(const ringoComm_t comm, int* rank) {
  return Guard("ringoCommUserRank", comm, [&]() -> Status {
    if (rank == nullptr) return base::InvalidArgument("rank is NULL");
    ASSIGN_OR_RETURN(Communicator * c, ResolveReady(comm));
    *rank = c->rank();
    return Status();
  });
}

ringoResult_t ringoCommCuDevice(const ringoComm_t comm, int* device) {
  return Guard("ringoCommCuDevice", comm, [&]() -> Status {
    if (device == nullptr) return base::InvalidArgument("device is NULL");
    ASSIGN_OR_RETURN(Communicator * c, ResolveReady(comm));
    *device = c->device();  // -1: host memory
    return Status();
  });
}

ringoResult_t ringoRedOpCreatePreMulSum(ringoRedOp_t* op, void* scalar, ringoDataType_t datatype,
                                        ringoScalarResidence_t residence, ringoComm_t comm) {
  return Guard("ringoRedOpCreatePreMulSum", comm, [&]() -> Status {
    if (op == nullptr) return base::InvalidArgument("op is NULL");
    if (scalar == nullptr) return base::InvalidArgument("scalar is NULL");
    if (!base::IsValidDataType(datatype)) {
      return base::InvalidArgument("datatype " + std::to_string(datatype) + " is not a ringoDataType_t");
    }
    if (residence != ringoScalarDevice && residence != ringoScalarHostImmediate) {
      return base::InvalidArgument("residence " + std::to_string(residence) + " is not a ringoScalarResidence_t");
    }
    ASSIGN_OR_RETURN(Communicator * c, ResolveReady(comm));
    ringo::collectives::internal::UserOps::Op made;
    made.dtype = static_cast<base::DataType>(datatype);
    const size_t bytes = base::DataTypeSize(made.dtype);
    if (residence == ringoScalarHostImmediate) {
      if (base::PointerDevice(scalar) >= 0) {
        return base::InvalidArgument("scalar is GPU memory, but ringoScalarHostImmediate reads host memory");
      }
      std::memcpy(&made.bits, scalar, bytes);
    } else if (c->kind() == ringo::collectives::DeviceKind::kCuda) {
      RETURN_IF_ERROR(c->CheckBuffer(scalar, "scalar (ringoScalarDevice)"));
      made.ptr = scalar;
    } else {
      made.ptr = scalar;  // read (host or GPU memory) when each collective runs
    }
    *op = static_cast<ringoRedOp_t>(c->user_ops().Create(made));
    return Status();
  });
}

ringoResult_t ringoRedOpDestroy(ringoRedOp_t op, ringoComm_t comm) {
  return Guard("ringoRedOpDestroy", comm, [&]() -> Status {
    ASSIGN_OR_RETURN(Communicator * c, ResolveReady(comm));
    if (base::IsValidRedOp(op)) return base::InvalidArgument("op " + std::to_string(op) + " is built in");
    return c->user_ops().Destroy(op);
  });
}

const char* ringoGetErrorString(ringoResult_t result) {
  switch (result) {
    case ringoSuccess: return "no error";
    case ringoUnhandledCudaError: return "unhandled cuda error";
    case ringoSystemError: return "unhandled system error (a system call failed)";
    case ringoInternalError: return "internal error (a bug in Ringo)";
    case ringoInvalidArgument: return "invalid argument";
    case ringoInvalidUsage: return "invalid usage";
    case ringoRemoteError: return "remote process exited or there was a network error";
    case ringoInProgress: return "operation in progress";
    case ringoTimeout: return "timeout: a peer made no progress within RINGO_TIMEOUT_MS";
    default: return "unknown result code";
  }
}

const char* ringoGetLastError(ringoComm_t comm) {
  if (comm != nullptr && ringo::collectives::internal::IsLive(comm)) return comm->LastError();
  return ringo::collectives::internal::ThreadLastError();
}

}  // extern "C"
