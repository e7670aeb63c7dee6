/* A program written against NCCL's C API, as an NCCL user writes one, run
 * through libnccl.so.2 (Ringo's shim) on host memory: 2 ranks as processes
 * (ncclGetUniqueId, ncclCommInitRank) run every collective, send/recv in a
 * group, all-to-all, gather, scatter, a split, premul-sum and fp8; then a
 * ncclCommInitAll pair driven from one thread in groups; the version, the
 * config initializer, an unsupported call's ncclInvalidUsage with its
 * message. Only the declarations it needs, written here from NCCL's
 * documentation. Exits nonzero on failure. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- NCCL's API, as far as this program uses it ---- */
typedef struct ncclComm* ncclComm_t;
typedef struct {
  char internal[128];
} ncclUniqueId;
typedef enum {
  ncclSuccess = 0,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5
} ncclResult_t;
typedef enum {
  ncclInt8 = 0,
  ncclInt32 = 2,
  ncclInt64 = 4,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclFloat8e4m3 = 10
} ncclDataType_t;
typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;
typedef enum { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;
typedef void* cudaStream_t;
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
#define UNDEF_INT (-2147483647 - 1)
#define MY_CONFIG_INITIALIZER                                                                                  \
  {                                                                                                            \
    sizeof(ncclConfig_t), 0xcafebeef, 22809, UNDEF_INT, UNDEF_INT, UNDEF_INT, UNDEF_INT, NULL, UNDEF_INT,     \
        UNDEF_INT, NULL, UNDEF_INT, UNDEF_INT, UNDEF_INT, UNDEF_INT, UNDEF_INT, UNDEF_INT                      \
  }

ncclResult_t ncclGetVersion(int* version);
ncclResult_t ncclGetUniqueId(ncclUniqueId* id);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config);
ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist);
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t ncclCommShrink(ncclComm_t comm, int* exclude, int nexclude, ncclComm_t* newcomm, ncclConfig_t* config,
                            int flags);
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, void** win, int flags);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error);
const char* ncclGetErrorString(ncclResult_t result);
const char* ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                          ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
/* ---- end of NCCL's API ---- */

static int failures = 0;

#define CHECK(cond)                                                                                       \
  do {                                                                                                    \
    if (!(cond)) {                                                                                        \
      fprintf(stderr, "rank %d: %s:%d: check failed: %s (last error: %s)\n", g_rank, __FILE__, __LINE__, #cond, \
              ncclGetLastError(NULL));                                                                    \
      ++failures;                                                                                         \
    }                                                                                                     \
  } while (0)
#define NCCL_OK(call) CHECK((call) == ncclSuccess)

static int g_rank = -1;

static int RunRank(int rank, int n, ncclUniqueId id) {
  ncclComm_t comm = NULL, child = NULL;
  ncclConfig_t config = MY_CONFIG_INITIALIZER;
  float x[8], y[16];
  double d[2];
  int64_t big[4];
  int32_t a2a_in[4], a2a_out[4], token, got = -1;
  unsigned char fp8_in[4], fp8_out[4];
  ncclRedOp_t premul;
  double scalar;
  int count = 0, crank = -1, i;
  void* window = NULL;
  ncclResult_t async_error;
  g_rank = rank;
  config.blocking = 1;
  NCCL_OK(ncclCommInitRankConfig(&comm, n, id, rank, &config));
  if (comm == NULL) return 1;
  NCCL_OK(ncclCommCount(comm, &count));
  CHECK(count == n);

  for (i = 0; i < 8; ++i) x[i] = (float)(rank + 1) * (float)(i + 1);
  NCCL_OK(ncclAllReduce(x, y, 8, ncclFloat32, ncclSum, comm, NULL));
  CHECK(y[7] == 3.0f * 8.0f);
  NCCL_OK(ncclAllReduce(x, y, 8, ncclFloat32, ncclAvg, comm, NULL));
  CHECK(y[1] == 3.0f);
  d[0] = rank == 1 ? 42.0 : 0.0;
  NCCL_OK(ncclBroadcast(d, d + 1, 1, ncclFloat64, 1, comm, NULL));
  CHECK(d[1] == 42.0);
  d[0] = rank == 0 ? 7.0 : 0.0;
  NCCL_OK(ncclBcast(d, 1, ncclFloat64, 0, comm, NULL));
  CHECK(d[0] == 7.0);
  big[0] = rank + 10;
  NCCL_OK(ncclReduce(big, big + 1, 1, ncclInt64, ncclMax, 0, comm, NULL));
  if (rank == 0) CHECK(big[1] == 11);
  NCCL_OK(ncclAllGather(x, y, 8, ncclFloat32, comm, NULL));
  CHECK(y[8] == 2.0f && y[0] == 1.0f);
  NCCL_OK(ncclReduceScatter(x, y, 4, ncclFloat32, ncclSum, comm, NULL));
  CHECK(y[0] == 3.0f * (float)(4 * rank + 1));

  /* all-to-all, gather, scatter */
  for (i = 0; i < 4; ++i) a2a_in[i] = 100 * rank + i;
  NCCL_OK(ncclAlltoAll(a2a_in, a2a_out, 2, ncclInt32, comm, NULL));
  CHECK(a2a_out[0] == 2 * rank && a2a_out[2] == 100 + 2 * rank);
  NCCL_OK(ncclGather(a2a_in, a2a_out, 2, ncclInt32, 1, comm, NULL));
  if (rank == 1) CHECK(a2a_out[0] == 0 && a2a_out[3] == 101);
  NCCL_OK(ncclScatter(a2a_in, a2a_out, 2, ncclInt32, 0, comm, NULL));
  CHECK(a2a_out[0] == 2 * rank && a2a_out[1] == 2 * rank + 1);

  /* send and receive with the same peer in one group */
  token = 1000 + rank;
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclSend(&token, 1, ncclInt32, 1 - rank, comm, NULL));
  NCCL_OK(ncclRecv(&got, 1, ncclInt32, 1 - rank, comm, NULL));
  NCCL_OK(ncclGroupEnd());
  CHECK(got == 1000 + (1 - rank));

  /* premul-sum: each rank's input times its own scalar */
  scalar = rank == 0 ? 0.5 : 2.0;
  NCCL_OK(ncclRedOpCreatePreMulSum(&premul, &scalar, ncclFloat64, ncclScalarHostImmediate, comm));
  CHECK((int)premul >= 5);
  d[0] = 4.0;
  NCCL_OK(ncclAllReduce(d, d + 1, 1, ncclFloat64, premul, comm, NULL));
  CHECK(d[1] == 10.0);
  NCCL_OK(ncclRedOpDestroy(premul, comm));

  /* fp8 e4m3: 1.5 (0x3c) + 2.0 (0x40) = 3.5 (0x46); 448 + 448 saturates at 448 (0x7e) */
  fp8_in[0] = rank == 0 ? 0x3c : 0x40;
  fp8_in[1] = 0x7e;
  NCCL_OK(ncclAllReduce(fp8_in, fp8_out, 2, ncclFloat8e4m3, ncclSum, comm, NULL));
  CHECK(fp8_out[0] == 0x46 && fp8_out[1] == 0x7e);

  /* a split by rank: each child has one rank */
  NCCL_OK(ncclCommSplit(comm, rank, 0, &child, NULL));
  if (child != NULL) {
    NCCL_OK(ncclCommCount(child, &count));
    NCCL_OK(ncclCommUserRank(child, &crank));
    CHECK(count == 1 && crank == 0);
    NCCL_OK(ncclCommDestroy(child));
  }

  /* what Ringo cannot do says so */
  CHECK(ncclCommWindowRegister(comm, x, sizeof(x), &window, 0) == ncclInvalidUsage);
  CHECK(strstr(ncclGetLastError(NULL), "Ringo") != NULL);
  CHECK(ncclAllReduce(x, y, 8, (ncclDataType_t)77, ncclSum, comm, NULL) == ncclInvalidArgument);
  CHECK(strlen(ncclGetLastError(comm)) > 0);
  NCCL_OK(ncclCommGetAsyncError(comm, &async_error));
  CHECK(async_error == ncclSuccess);
  NCCL_OK(ncclCommDestroy(comm));
  return failures == 0 ? 0 : 1;
}

/* Two communicators of one process driven from one thread in groups. */
static int RunInitAll(void) {
  ncclComm_t comms[2];
  float in[2][3], out[2][3];
  int r;
  g_rank = -1;
  NCCL_OK(ncclCommInitAll(comms, 2, NULL));
  for (r = 0; r < 2; ++r) in[r][0] = in[r][1] = in[r][2] = (float)(r + 1);
  NCCL_OK(ncclGroupStart());
  for (r = 0; r < 2; ++r) NCCL_OK(ncclAllReduce(in[r], out[r], 3, ncclFloat32, ncclSum, comms[r], NULL));
  NCCL_OK(ncclGroupEnd());
  CHECK(out[0][2] == 3.0f && out[1][0] == 3.0f);
  NCCL_OK(ncclGroupStart());
  for (r = 0; r < 2; ++r) {
    NCCL_OK(ncclSend(in[r], 3, ncclFloat32, 1 - r, comms[r], NULL));
    NCCL_OK(ncclRecv(out[r], 3, ncclFloat32, 1 - r, comms[r], NULL));
  }
  NCCL_OK(ncclGroupEnd());
  CHECK(out[0][0] == 2.0f && out[1][0] == 1.0f);
  for (r = 0; r < 2; ++r) NCCL_OK(ncclCommDestroy(comms[r]));
  return failures == 0 ? 0 : 1;
}

int main(void) {
  ncclUniqueId id;
  int version = 0, status = 0, rc = 0;
  pid_t child;
  g_rank = -1;
  NCCL_OK(ncclGetVersion(&version));
  printf("ncclGetVersion: %d\n", version);
  CHECK(version == 22809);
  CHECK(strlen(ncclGetErrorString(ncclInvalidUsage)) > 0);
  NCCL_OK(ncclGetUniqueId(&id));
  child = fork();
  if (child == 0) _exit(RunRank(1, 2, id));
  rc = RunRank(0, 2, id);
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "rank 1 failed (status %d)\n", status);
    rc = 1;
  }
  if (RunInitAll() != 0) rc = 1;
  printf("%s\n", rc == 0 ? "PASS" : "FAIL");
  return rc;
}
