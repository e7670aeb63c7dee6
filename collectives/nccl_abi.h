// The NCCL 2.x C ABI as libnccl.so.2 (the shim) exports it: the types,
// enum values and struct layouts a program compiled against NCCL's
// nccl.h passes across the boundary, written from NCCL's documented API
// (version 2.28). Only the shim includes this; Ringo's own API is
// include/ringo/ringo.h.
#ifndef RINGO_COLLECTIVES_NCCL_ABI_H_
#define RINGO_COLLECTIVES_NCCL_ABI_H_

#include <climits>
#include <cstddef>

extern "C" {

// The NCCL release the shim states and honours (ncclGetVersion): 2.28.9,
// coded as NCCL codes versions from 2.9 on (major * 10000 + minor * 100 +
// patch). Frameworks gate features on it; everything NCCL 2.28 declares is
// exported, and what Ringo cannot do returns ncclInvalidUsage with a message.
#define RINGO_NCCL_SHIM_MAJOR 2
#define RINGO_NCCL_SHIM_MINOR 28
#define RINGO_NCCL_SHIM_PATCH 9
#define RINGO_NCCL_SHIM_VERSION \
  (RINGO_NCCL_SHIM_MAJOR * 10000 + RINGO_NCCL_SHIM_MINOR * 100 + RINGO_NCCL_SHIM_PATCH)

typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow_vidmem* ncclWindow_t;
typedef void* cudaStream_t;  // a pointer, as CUDA's is

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

typedef enum {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

// Built-in operators; values from ncclNumOps up are made by
// ncclRedOpCreatePreMulSum (an int-sized enum, as NCCL keeps it).
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff
} ncclRedOp_t;

typedef enum { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_CONFIG_MAGIC 0xcafebeefu

// ncclConfig_t of NCCL 2.28: size, magic and version first, then the
// fields a user sets (NCCL_CONFIG_UNDEF_INT / NULL: unset). The shim reads
// only as much as `size` says the caller's struct holds.
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} ncclConfig_t;

typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

// NCCL 2.28's device API (nccl_device.h): the types its host calls pass.
// The shim makes no device communicator, so the structs it only receives
// by pointer stay opaque; ncclTeam_t is returned by value and has NCCL's
// layout (ranks rank + k * stride of the communicator, nRanks of them).
typedef struct ncclDevComm ncclDevComm_t;
typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;
typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
typedef struct ncclLsaBarrierHandle ncclLsaBarrierHandle_t;
typedef struct ncclGinBarrierHandle ncclGinBarrierHandle_t;
typedef struct ncclLLA2AHandle ncclLLA2AHandle_t;
typedef struct ncclTeam {
  int nRanks, rank, stride;
} ncclTeam_t;

}  // extern "C"

#endif  // RINGO_COLLECTIVES_NCCL_ABI_H_
