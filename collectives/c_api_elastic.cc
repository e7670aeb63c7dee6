// Elastic communicators at the C boundary: ringoCommAgreeFailed,
// ringoCommShrink, ringoCommRevoke, ringoCommGetUniqueId, ringoCommGrow
// (argument checks, then Communicator's; the non-blocking config as for
// init).
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/cuda.h"
#include "collectives/communicator.h"
#include "collectives/plan/device_choice.h"
#include "collectives/internal/boundary.h"
#include "ringo/ringo.h"
#include "transport/bootstrap/bootstrap.h"

namespace {

namespace base = ringo::base;
namespace transport = ringo::transport;
using base::Status;
using base::StatusOr;
using ringo::collectives::CommOptions;
using ringo::collectives::Communicator;
using ringo::collectives::internal::Guard;
using ringo::collectives::internal::Register;
using ringo::collectives::internal::ResolveReady;
using ringo::collectives::internal::Unregister;

// Makes the new communicator now or in the background (ringoInProgress), as
// init does, and hands out its handle.
Status Make(ringoComm_t* newcomm, bool blocking,
            std::function<StatusOr<std::unique_ptr<Communicator>>()> make) {
  auto* handle = Register(new ringoComm());
  if (blocking) {
    auto made = make();
    if (!made.ok()) {
      Unregister(handle);
      delete handle;
      return made.status();
    }
    handle->Set(std::move(made).value());
    *newcomm = handle;
    return Status();
  }
  handle->StartInit(std::move(make));
  *newcomm = handle;
  return Status(base::Code::kInProgress, "the new communicator is made in the background");
}

// The elastic calls on a GPU communicator are off until a GPU run has
// verified them (RINGO_GPU_ELASTIC; docs/gpu.md): refused, saying so.
Status ElasticAllowed(const Communicator* c) {
  if (c->kind() != ringo::collectives::DeviceKind::kCuda || base::GetConfig().gpu_elastic) return Status();
  return base::InvalidUsage(
      "elastic calls on a GPU communicator are off until a GPU run has verified them "
      "(RINGO_GPU_ELASTIC=1 turns them on; docs/gpu.md)");
}

}  // namespace

extern "C" {

ringoResult_t ringoCommAgreeFailed(ringoComm_t comm, int* failedRanks, int* failedCount) {
  return Guard("ringoCommAgreeFailed", comm, [&]() -> Status {
    if (failedRanks == nullptr || failedCount == nullptr) {
      return base::InvalidArgument("failedRanks and failedCount must not be NULL");
    }
    *failedCount = 0;
    ASSIGN_OR_RETURN(Communicator * c, ResolveReady(comm));
    RETURN_IF_ERROR(ElasticAllowed(c));
    ASSIGN_OR_RETURN(std::vector<int> failed, c->AgreeFailed());
    for (size_t i = 0; i < failed.size(); ++i) failedRanks[i] = failed[i];
    *failedCount = static_cast<int>(failed.size());
    return Status();
  });
}

ringoResult_t ringoCommShrink(ringoComm_t comm, int* excludeRanksList, int excludeRanksCount, ringoComm_t* newcomm,
                              ringoConfig_t* config, int shrinkFlags) {
  return Guard("ringoCommShrink", comm, [&]() -> Status {
    if (newcomm == nullptr) return base::InvalidArgument("newcomm is NULL");
    *newcomm = nullptr;
    if (excludeRanksCount < 0) return base::InvalidArgument("excludeRanksCount is negative");
    if (excludeRanksCount > 0 && excludeRanksList == nullptr) {
      return base::InvalidArgument("excludeRanksList is NULL with excludeRanksCount > 0");
    }
    ASSIGN_OR_RETURN(Communicator * c, ResolveReady(comm));
    RETURN_IF_ERROR(ElasticAllowed(c));
    CommOptions options;
    bool inherit = true, blocking = true;
    RETURN_IF_ERROR(ringo::collectives::internal::ChildConfig(config, c, &options, &inherit, &blocking));
    std::vector<int> exclude(excludeRanksList, excludeRanksList + excludeRanksCount);
    return Make(newcomm, blocking, [c, exclude, shrinkFlags, options, inherit]() {
      return c->Shrink(exclude, shrinkFlags, inherit ? nullptr : &options);
    });
  });
}

ringoResult_t ringoCommRevoke(ringoComm_t comm, int revokeFlags) {
  return Guard("ringoCommRevoke", comm, [&]() -> Status {
    if (revokeFlags != RINGO_REVOKE_DEFAULT) {
      return base::InvalidArgument("revokeFlags " + std::to_string(revokeFlags) + " is not RINGO_REVOKE_DEFAULT");
    }
    ASSIGN_OR_RETURN(Communicator * c, ResolveReady(comm));
    RETURN_IF_ERROR(ElasticAllowed(c));
    return c->Revoke();
  });
}

ringoResult_t ringoCommGetUniqueId(ringoComm_t comm, ringoUniqueId* uniqueId) {
  return Guard("ringoCommGetUniqueId", comm, [&]() -> Status {
    if (uniqueId == nullptr) return base::InvalidArgument("uniqueId is NULL");
    ASSIGN_OR_RETURN(Communicator * c, ResolveReady(comm));
    RETURN_IF_ERROR(ElasticAllowed(c));
    const base::Config& config = base::GetConfig();
    // A root of its own on a port the system picks (RINGO_COMM_ID names the
    // first communicator's), serving the grown communicator once.
    ASSIGN_OR_RETURN(auto id, transport::CreateUniqueId("", config.socket_ifname, config.timeout_ms));
    id.Encode(uniqueId->internal);
    return Status();
  });
}

ringoResult_t ringoCommGrow(ringoComm_t comm, int nRanks, const ringoUniqueId* uniqueId, int rank,
                            ringoComm_t* newcomm, ringoConfig_t* config) {
  return Guard("ringoCommGrow", comm, [&]() -> Status {
    if (newcomm == nullptr) return base::InvalidArgument("newcomm is NULL");
    *newcomm = nullptr;
    if (nRanks < 1) return base::InvalidArgument("nRanks " + std::to_string(nRanks) + " is not positive");
    Communicator* parent = nullptr;
    if (comm != nullptr) {
      ASSIGN_OR_RETURN(parent, ResolveReady(comm));
      RETURN_IF_ERROR(ElasticAllowed(parent));
    }
    std::unique_ptr<transport::UniqueId> id;
    if (uniqueId != nullptr) {
      ASSIGN_OR_RETURN(transport::UniqueId decoded, transport::UniqueId::Decode(uniqueId->internal));
      id = std::make_unique<transport::UniqueId>(decoded);
    }
    CommOptions options;
    bool inherit = true, blocking = true;
    RETURN_IF_ERROR(ringo::collectives::internal::ChildConfig(config, parent, &options, &inherit, &blocking));
    if (parent == nullptr) {
      // A new rank has no parent to inherit from: host memory, unless its
      // config asks for its current GPU (as the existing ranks' must agree).
      const bool cuda = config != nullptr && config->device_kind == RINGO_DEVICE_CUDA;
      options.device_wish = static_cast<int32_t>(cuda ? ringo::collectives::DeviceWish::kCuda
                                                      : ringo::collectives::DeviceWish::kHost);
      if (cuda) {
        ASSIGN_OR_RETURN(options.cuda_device, base::CurrentDevice());
      }
      inherit = false;
    }
    std::shared_ptr<transport::UniqueId> shared(std::move(id));
    return Make(newcomm, blocking, [parent, nRanks, shared, rank, options, inherit]() {
      return Communicator::Grow(parent, nRanks, shared.get(), rank, inherit ? nullptr : &options);
    });
  });
}

}  // extern "C"
