// libnccl.so.2: NCCL's C ABI (nccl_abi.h) implemented on Ringo's C API, so a
// program built for NCCL runs on Ringo unchanged (LD_LIBRARY_PATH or
// LD_PRELOAD). Every function is a thin translation: handles, unique ids
// and enum values are Ringo's (equal to NCCL's); configs are translated
// field by field; results map one to one but for ringoTimeout, which NCCL
// 2.28 has no code for (ncclRemoteError, with the timeout's message in
// ncclGetLastError). A communicator works on host or GPU memory as Ringo
// decides at init (RINGO_DEVICE; GPU where every rank has one): host
// pointers go to Ringo's host path, device pointers to its GPU path. What
// Ringo cannot honour returns ncclInvalidUsage and says why in
// ncclGetLastError, never a silent wrong result.
#include <cstddef>
#include <cstring>
#include <string>

#include "base/cuda.h"
#include "collectives/nccl_abi.h"
#include "ringo/ringo.h"

#define NCCL_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

static_assert(sizeof(ncclUniqueId) == sizeof(ringoUniqueId), "unique ids are the same bytes");
static_assert(sizeof(ncclRedOp_t) == sizeof(int) && sizeof(ncclDataType_t) == sizeof(int), "int-sized enums");
static_assert(static_cast<int>(ncclFloat8e5m2) == static_cast<int>(ringoFloat8e5m2), "datatypes match");
static_assert(static_cast<int>(ncclInProgress) == static_cast<int>(ringoInProgress), "results match");
static_assert(sizeof(ncclTeam_t) == 3 * sizeof(int), "ncclTeam_t is NCCL's three ints");

// The message of this thread's last failed call through the shim.
thread_local std::string t_last_error;

ringoComm_t R(ncclComm_t c) { return reinterpret_cast<ringoComm_t>(c); }
ringoStream_t S(cudaStream_t s) { return static_cast<ringoStream_t>(s); }
ringoDataType_t T(ncclDataType_t t) { return static_cast<ringoDataType_t>(t); }
ringoRedOp_t O(ncclRedOp_t o) { return static_cast<ringoRedOp_t>(o); }

ncclResult_t From(ringoResult_t rc) {
  if (rc == ringoSuccess) return ncclSuccess;
  if (rc != ringoInProgress) t_last_error = ringoGetLastError(nullptr);
  if (rc == ringoTimeout) return ncclRemoteError;  // NCCL 2.28 has no timeout code
  if (rc < ringoSuccess || rc >= ringoTimeout) return ncclInternalError;
  return static_cast<ncclResult_t>(rc);
}

ncclResult_t Fail(ncclResult_t rc, const char* fn, const std::string& why) {
  t_last_error = std::string(fn) + ": " + why;
  return rc;
}

ncclResult_t Unsupported(const char* fn, const std::string& why) {
  return Fail(ncclInvalidUsage, fn, "not supported by Ringo's NCCL shim: " + why);
}

// NCCL's config as Ringo's; ncclInvalidArgument (message set) when it was
// not made by NCCL_CONFIG_INITIALIZER.
ncclResult_t ToRingo(const ncclConfig_t* in, const char* fn, ringoConfig_t* out) {
  const ringoConfig_t defaults = RINGO_CONFIG_INITIALIZER;
  *out = defaults;
  if (in == nullptr) return ncclSuccess;
  if (in->magic != NCCL_CONFIG_MAGIC || in->size < offsetof(ncclConfig_t, cgaClusterSize)) {
    return Fail(ncclInvalidArgument, fn, "config was not initialized with NCCL_CONFIG_INITIALIZER");
  }
  if (in->blocking != NCCL_CONFIG_UNDEF_INT) {
    if (in->blocking != 0 && in->blocking != 1) return Fail(ncclInvalidArgument, fn, "config->blocking must be 0 or 1");
    out->blocking = in->blocking;
  }
  return ncclSuccess;
}

}  // namespace

// ---- versions, errors, unique ids, memory ----

NCCL_EXPORT ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return Fail(ncclInvalidArgument, "ncclGetVersion", "version is NULL");
  *version = RINGO_NCCL_SHIM_VERSION;
  return ncclSuccess;
}

NCCL_EXPORT const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

NCCL_EXPORT const char* ncclGetLastError(ncclComm_t comm) {
  (void)comm;  // the shim keeps the last failure per thread
  return t_last_error.c_str();
}

NCCL_EXPORT void ncclResetDebugInit() {}

NCCL_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId* unique_id) {
  return From(ringoGetUniqueId(reinterpret_cast<ringoUniqueId*>(unique_id)));
}

NCCL_EXPORT ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr) return Fail(ncclInvalidArgument, "ncclMemAlloc", "ptr is NULL");
  auto p = ringo::base::DeviceMalloc(size);
  if (!p.ok()) return Fail(ncclUnhandledCudaError, "ncclMemAlloc", p.status().message());
  *ptr = *p;
  return ncclSuccess;
}

NCCL_EXPORT ncclResult_t ncclMemFree(void* ptr) {
  ringo::base::Status st = ringo::base::DeviceFree(ptr);
  if (!st.ok()) return Fail(ncclUnhandledCudaError, "ncclMemFree", st.message());
  return ncclSuccess;
}

// ---- communicators ----

NCCL_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                                ncclConfig_t* config) {
  ringoConfig_t cfg;
  const ncclResult_t bad = ToRingo(config, "ncclCommInitRankConfig", &cfg);
  if (bad != ncclSuccess) return bad;
  ringoUniqueId rid;
  std::memcpy(&rid, &id, sizeof(rid));
  return From(ringoCommInitRankConfig(reinterpret_cast<ringoComm_t*>(comm), nranks, rid, rank, &cfg));
}

NCCL_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return ncclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}

// Every id names a root that can bootstrap the whole communicator (each was
// made by ncclGetUniqueId); Ringo needs one, so the first serves.
NCCL_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t* comm, int nranks, int rank, int nid,
                                                  ncclUniqueId* ids, ncclConfig_t* config) {
  if (nid < 1 || ids == nullptr) {
    return Fail(ncclInvalidArgument, "ncclCommInitRankScalable", "needs at least one unique id");
  }
  return ncclCommInitRankConfig(comm, nranks, ids[0], rank, config);
}

NCCL_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  return From(ringoCommInitAll(reinterpret_cast<ringoComm_t*>(comms), ndev, devlist));
}

NCCL_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                       ncclConfig_t* config) {
  ringoConfig_t cfg;
  const ncclResult_t bad = ToRingo(config, "ncclCommSplit", &cfg);
  if (bad != ncclSuccess) return bad;
  return From(ringoCommSplit(R(comm), color, key, reinterpret_cast<ringoComm_t*>(newcomm),
                             config == nullptr ? nullptr : &cfg));
}

NCCL_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) { return From(ringoCommFinalize(R(comm))); }
NCCL_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) { return From(ringoCommDestroy(R(comm))); }
NCCL_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) { return From(ringoCommAbort(R(comm))); }

NCCL_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  ringoResult_t r = ringoSuccess;
  const ncclResult_t rc = From(ringoCommGetAsyncError(R(comm), &r));
  if (rc == ncclSuccess && async_error != nullptr) {
    *async_error = r == ringoTimeout ? ncclRemoteError : static_cast<ncclResult_t>(r);
  }
  return rc;
}

NCCL_EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  return From(ringoCommCount(R(comm), count));
}
NCCL_EXPORT ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  return From(ringoCommCuDevice(R(comm), device));
}
NCCL_EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  return From(ringoCommUserRank(R(comm), rank));
}

// Registration is an optimisation hint in NCCL; Ringo needs none, so a
// registration succeeds and changes nothing.
NCCL_EXPORT ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  int count = 0;
  const ncclResult_t rc = From(ringoCommCount(R(comm), &count));
  if (rc != ncclSuccess) return rc;
  if (handle == nullptr) return Fail(ncclInvalidArgument, "ncclCommRegister", "handle is NULL");
  (void)size;
  *handle = buff != nullptr ? buff : reinterpret_cast<void*>(handle);
  return ncclSuccess;
}

NCCL_EXPORT ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  int count = 0;
  const ncclResult_t rc = From(ringoCommCount(R(comm), &count));
  if (rc != ncclSuccess) return rc;
  return handle == nullptr ? Fail(ncclInvalidArgument, "ncclCommDeregister", "handle is NULL") : ncclSuccess;
}

// Shrink, revoke and grow (NCCL 2.27-2.29): the same calls on Ringo, with
// NCCL's flag values (NCCL_SHRINK_DEFAULT 0, NCCL_SHRINK_ABORT 1,
// NCCL_REVOKE_DEFAULT 0).
NCCL_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                        ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  ringoConfig_t cfg;
  const ncclResult_t bad = ToRingo(config, "ncclCommShrink", &cfg);
  if (bad != ncclSuccess) return bad;
  return From(ringoCommShrink(R(comm), excludeRanksList, excludeRanksCount, reinterpret_cast<ringoComm_t*>(newcomm),
                              config == nullptr ? nullptr : &cfg, shrinkFlags));
}

NCCL_EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  return From(ringoCommRevoke(R(comm), revokeFlags));
}

NCCL_EXPORT ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  if (uniqueId == nullptr) return Fail(ncclInvalidArgument, "ncclCommGetUniqueId", "uniqueId is NULL");
  ringoUniqueId rid;
  const ncclResult_t rc = From(ringoCommGetUniqueId(R(comm), &rid));
  if (rc == ncclSuccess) std::memcpy(uniqueId, &rid, sizeof(rid));
  return rc;
}

NCCL_EXPORT ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                                      ncclComm_t* newcomm, ncclConfig_t* config) {
  ringoConfig_t cfg;
  const ncclResult_t bad = ToRingo(config, "ncclCommGrow", &cfg);
  if (bad != ncclSuccess) return bad;
  ringoUniqueId rid;
  if (uniqueId != nullptr) std::memcpy(&rid, uniqueId, sizeof(rid));
  return From(ringoCommGrow(R(comm), nRanks, uniqueId == nullptr ? nullptr : &rid, rank,
                            reinterpret_cast<ringoComm_t*>(newcomm), config == nullptr ? nullptr : &cfg));
}

NCCL_EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t, void*, size_t, ncclWindow_t* win, int) {
  if (win != nullptr) *win = nullptr;
  return Unsupported("ncclCommWindowRegister", "symmetric memory windows");
}

NCCL_EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t, ncclWindow_t) {
  return Unsupported("ncclCommWindowDeregister", "symmetric memory windows");
}

// NCCL ends the group, estimates its time and runs none of it. Ringo can
// neither simulate a group nor drop what it queued, and running the
// operations of a group meant only to be timed would write into the
// caller's buffers: refused, the group left as it is (the caller's
// ncclGroupEnd then runs or its error path abandons it).
NCCL_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t*) {
  return Unsupported("ncclGroupSimulateEnd", "Ringo does not simulate groups");
}

// ---- reduction operators ----

NCCL_EXPORT ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                                  ncclScalarResidence_t residence, ncclComm_t comm) {
  return From(ringoRedOpCreatePreMulSum(reinterpret_cast<ringoRedOp_t*>(op), scalar, T(datatype),
                                        static_cast<ringoScalarResidence_t>(residence), R(comm)));
}

NCCL_EXPORT ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  return From(ringoRedOpDestroy(O(op), R(comm)));
}

// ---- collectives, point-to-point, groups ----

NCCL_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                       ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return From(ringoAllReduce(sendbuff, recvbuff, count, T(datatype), O(op), R(comm), S(stream)));
}

NCCL_EXPORT ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                           cudaStream_t stream) {
  return From(ringoReduceScatter(sendbuff, recvbuff, recvcount, T(datatype), O(op), R(comm), S(stream)));
}

NCCL_EXPORT ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                       ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return From(ringoAllGather(sendbuff, recvbuff, sendcount, T(datatype), R(comm), S(stream)));
}

NCCL_EXPORT ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                       int root, ncclComm_t comm, cudaStream_t stream) {
  return From(ringoBroadcast(sendbuff, recvbuff, count, T(datatype), root, R(comm), S(stream)));
}

NCCL_EXPORT ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                   cudaStream_t stream) {
  return From(ringoBroadcast(buff, buff, count, T(datatype), root, R(comm), S(stream)));
}

NCCL_EXPORT ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                    ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return From(ringoReduce(sendbuff, recvbuff, count, T(datatype), O(op), root, R(comm), S(stream)));
}

NCCL_EXPORT ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                      ncclComm_t comm, cudaStream_t stream) {
  return From(ringoAllToAll(sendbuff, recvbuff, count, T(datatype), R(comm), S(stream)));
}

NCCL_EXPORT ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                    int root, ncclComm_t comm, cudaStream_t stream) {
  return From(ringoGather(sendbuff, recvbuff, count, T(datatype), root, R(comm), S(stream)));
}

NCCL_EXPORT ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                     int root, ncclComm_t comm, cudaStream_t stream) {
  return From(ringoScatter(sendbuff, recvbuff, count, T(datatype), root, R(comm), S(stream)));
}

NCCL_EXPORT ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                  ncclComm_t comm, cudaStream_t stream) {
  return From(ringoSend(sendbuff, count, T(datatype), peer, R(comm), S(stream)));
}

NCCL_EXPORT ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                  cudaStream_t stream) {
  return From(ringoRecv(recvbuff, count, T(datatype), peer, R(comm), S(stream)));
}

NCCL_EXPORT ncclResult_t ncclGroupStart() { return From(ringoGroupStart()); }
NCCL_EXPORT ncclResult_t ncclGroupEnd() { return From(ringoGroupEnd()); }

// ---- device API (nccl_device.h) ----
//
// NCCL 2.28's device API runs kernels on symmetric memory windows through a
// device communicator. Ringo maps no peer memory into the program (there
// are no windows, see ncclCommWindowRegister), so no device communicator
// can be made: the calls that need one refuse with ncclInvalidUsage, the
// team calls that need the load/store (NVLink) domain return what NCCL
// returns when it cannot set its device runtime up (a zero team, rank -1)
// with the reason in ncclGetLastError, and the calls that are plain
// arithmetic on the communicator are answered. PyTorch 2.11 calls
// ncclDevCommCreate/Destroy for symmetric memory on its NCCL backend.

NCCL_EXPORT ncclResult_t ncclDevCommCreate(ncclComm_t, const ncclDevCommRequirements_t*, ncclDevComm_t*) {
  return Unsupported("ncclDevCommCreate", "device communicators (Ringo has no symmetric memory windows)");
}

NCCL_EXPORT ncclResult_t ncclDevCommDestroy(ncclComm_t, const ncclDevComm_t*) {
  return Unsupported("ncclDevCommDestroy", "device communicators (this library never makes one)");
}

NCCL_EXPORT ncclTeam_t ncclTeamWorld(ncclComm_t comm) {
  int count = 0;
  int rank = 0;
  if (From(ringoCommCount(R(comm), &count)) != ncclSuccess) return ncclTeam_t{};
  if (From(ringoCommUserRank(R(comm), &rank)) != ncclSuccess) return ncclTeam_t{};
  ncclTeam_t team{};
  team.nRanks = count;
  team.rank = rank;
  team.stride = 1;
  return team;
}

NCCL_EXPORT ncclTeam_t ncclTeamLsa(ncclComm_t) {
  (void)Unsupported("ncclTeamLsa", "load/store-accessible teams (Ringo has no symmetric memory windows)");
  return ncclTeam_t{};
}

NCCL_EXPORT ncclTeam_t ncclTeamRail(ncclComm_t) {
  (void)Unsupported("ncclTeamRail", "rail teams, which follow the load/store-accessible team");
  return ncclTeam_t{};
}

// The world rank of `team`'s rank `rank`, counted from this rank as NCCL does.
NCCL_EXPORT int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank) {
  int self = 0;
  if (From(ringoCommUserRank(R(comm), &self)) != ncclSuccess) return -1;
  return self + (rank - team.rank) * team.stride;
}

NCCL_EXPORT int ncclTeamRankToLsa(ncclComm_t, ncclTeam_t, int) {
  (void)Unsupported("ncclTeamRankToLsa", "load/store-accessible teams (Ringo has no symmetric memory windows)");
  return -1;
}

NCCL_EXPORT ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t, int, ncclLsaBarrierHandle_t*,
                                                         ncclDevResourceRequirements_t*) {
  return Unsupported("ncclLsaBarrierCreateRequirement", "device communicators (ncclDevCommCreate)");
}

NCCL_EXPORT ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t, ncclTeam_t, int, ncclGinBarrierHandle_t*,
                                                         ncclDevResourceRequirements_t*) {
  return Unsupported("ncclGinBarrierCreateRequirement", "device communicators (ncclDevCommCreate)");
}

NCCL_EXPORT ncclResult_t ncclLLA2ACreateRequirement(int, int, ncclLLA2AHandle_t*, ncclDevResourceRequirements_t*) {
  return Unsupported("ncclLLA2ACreateRequirement", "device communicators (ncclDevCommCreate)");
}

// Slots an LL all-to-all needs for maxElts elements of up to maxEltSize
// bytes: NCCL's formula (8-byte slots per element).
NCCL_EXPORT int ncclLLA2ACalcSlots(int maxElts, int maxEltSize) { return maxElts * ((maxEltSize + 7) / 8); }
