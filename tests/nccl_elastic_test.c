/* A program written to NCCL's documented elastic calls, linked to
 * libnccl.so.2 as to NCCL: four ranks all-reduce in a loop; rank 2 is
 * killed with SIGKILL mid-loop; the survivors' all-reduce fails, they
 * shrink with NCCL_SHRINK_ABORT and go on; then rank 0 makes a grow id
 * (ncclCommGetUniqueId), a new process joins with ncclCommGrow, and the four
 * all-reduce again. Exits nonzero on any failure. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- NCCL's API, as a program built for NCCL declares it ---- */
typedef struct ncclComm* ncclComm_t;
typedef struct {
  char internal[128];
} ncclUniqueId;
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7
} ncclResult_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;
typedef enum { ncclFloat32 = 7 } ncclDataType_t;
typedef void* cudaStream_t;
#define NCCL_SHRINK_ABORT 0x01

ncclResult_t ncclGetUniqueId(ncclUniqueId* id);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            void* config, int shrinkFlags);
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                          void* config);
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
const char* ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
/* ---- end of NCCL's API ---- */

#define N 64

static int g_rank = -1;

#define FAIL(...)                                   \
  do {                                              \
    fprintf(stderr, "rank %d: ", g_rank);           \
    fprintf(stderr, __VA_ARGS__);                   \
    fprintf(stderr, " (%s)\n", ncclGetLastError(NULL)); \
    return 1;                                       \
  } while (0)

/* All-reduce of N copies of `value`; 0 when every element is `want`. */
static int AllReduceIs(ncclComm_t comm, float value, float want) {
  float buf[N];
  int i;
  for (i = 0; i < N; ++i) buf[i] = value;
  if (ncclAllReduce(buf, buf, N, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess) return -1;
  for (i = 0; i < N; ++i) {
    if (buf[i] != want) return 1;
  }
  return 0;
}

/* The id file the grow id goes through. */
static char g_id_file[256];

static int Joiner(void) {
  ncclUniqueId gid;
  ncclComm_t grown = NULL;
  FILE* f = NULL;
  int tries = 0, count = 0, rank = -1;
  g_rank = 3;
  while ((f = fopen(g_id_file, "rb")) == NULL && tries++ < 3000) usleep(10000);
  if (f == NULL) FAIL("no grow id");
  if (fread(&gid, sizeof(gid), 1, f) != 1) FAIL("short grow id");
  fclose(f);
  if (ncclCommGrow(NULL, 4, &gid, 3, &grown, NULL) != ncclSuccess) FAIL("ncclCommGrow (new rank)");
  ncclCommCount(grown, &count);
  ncclCommUserRank(grown, &rank);
  if (count != 4 || rank != 3) FAIL("grown: rank %d of %d", rank, count);
  /* old ranks 0, 1, 3 are 0, 1, 2 now (values 1, 2, 8); this rank brings
     back the 4 the killed rank added */
  if (AllReduceIs(grown, 4.0f, 15.0f) != 0) FAIL("the grown all-reduce");
  ncclCommDestroy(grown);
  return 0;
}

static int RunRank(int rank, ncclUniqueId id) {
  ncclComm_t comm = NULL, shrunk = NULL, grown = NULL;
  int i, failed_at = -1, excluded = 2, count = 0, me = -1;
  const float mine = (float)(1 << rank); /* 1, 2, 4, 8: sums name their ranks */
  g_rank = rank;
  if (ncclCommInitRank(&comm, 4, id, rank) != ncclSuccess) FAIL("ncclCommInitRank");
  for (i = 0; i < 20; ++i) {
    int r;
    if (rank == 2 && i == 5) raise(SIGKILL);
    r = AllReduceIs(comm, mine, 15.0f);
    if (r > 0) FAIL("wrong sum in round %d", i);
    if (r < 0) {
      failed_at = i;
      break;
    }
  }
  if (failed_at != 5) FAIL("the all-reduce failed at round %d, not 5", failed_at);
  if (strstr(ncclGetLastError(comm), "rank 2") == NULL) FAIL("the error does not name rank 2: %s", ncclGetLastError(comm));
  if (ncclCommShrink(comm, &excluded, 1, &shrunk, NULL, NCCL_SHRINK_ABORT) != ncclSuccess) FAIL("ncclCommShrink");
  ncclCommCount(shrunk, &count);
  ncclCommUserRank(shrunk, &me);
  if (count != 3 || me != (rank < 2 ? rank : 2)) FAIL("shrunk: rank %d of %d", me, count);
  for (i = 0; i < 5; ++i) {
    if (AllReduceIs(shrunk, mine, 11.0f) != 0) FAIL("the shrunk all-reduce %d", i);
  }
  ncclCommAbort(comm);
  /* Grow back to four: rank 0 makes the id and hands it over in a file. */
  if (me == 0) {
    ncclUniqueId gid;
    char tmp[300];
    FILE* f;
    if (ncclCommGetUniqueId(shrunk, &gid) != ncclSuccess) FAIL("ncclCommGetUniqueId");
    snprintf(tmp, sizeof(tmp), "%s.tmp", g_id_file);
    f = fopen(tmp, "wb");
    if (f == NULL || fwrite(&gid, sizeof(gid), 1, f) != 1 || fclose(f) != 0) FAIL("writing the id");
    rename(tmp, g_id_file);
    if (ncclCommGrow(shrunk, 4, &gid, -1, &grown, NULL) != ncclSuccess) FAIL("ncclCommGrow (rank 0)");
  } else {
    if (ncclCommGrow(shrunk, 4, NULL, -1, &grown, NULL) != ncclSuccess) FAIL("ncclCommGrow");
  }
  if (AllReduceIs(grown, mine, 15.0f) != 0) FAIL("the grown all-reduce");
  ncclCommDestroy(grown);
  ncclCommDestroy(shrunk);
  return 0;
}

int main(void) {
  ncclUniqueId id;
  pid_t pids[4];
  int r, status, rc = 0;
  snprintf(g_id_file, sizeof(g_id_file), "/tmp/ringo-nccl-elastic-%d.id", (int)getpid());
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    fprintf(stderr, "ncclGetUniqueId failed\n");
    return 1;
  }
  for (r = 0; r < 4; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) _exit(RunRank(r, id));
  }
  /* The process that will join once the survivors have shrunk. */
  {
    pid_t joiner = fork();
    if (joiner == 0) _exit(Joiner());
    if (waitpid(joiner, &status, 0) != joiner || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "the joining rank failed (status %d)\n", status);
      rc = 1;
    }
  }
  for (r = 0; r < 4; ++r) {
    if (waitpid(pids[r], &status, 0) != pids[r]) rc = 1;
    if (r == 2) {
      if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
        fprintf(stderr, "rank 2 was not killed (status %d)\n", status);
        rc = 1;
      }
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "rank %d failed (status %d)\n", r, status);
      rc = 1;
    }
  }
  unlink(g_id_file);
  printf("%s\n", rc == 0 ? "PASS" : "FAIL");
  return rc;
}
