/* Handles that are not live communicators, passed to every entry point that
 * takes one: NULL, an address never allocated, a pointer into memory that
 * holds no communicator, a block that was malloc'd and freed, a destroyed
 * communicator, an aborted one, and a live handle plus one byte
 * (misaligned). Each call must return ringoInvalidArgument with a message
 * naming the communicator, never crash or block, and leave a live
 * communicator working. Compiled as C99; run with the flight recorder on
 * (every call stamps its record before the handle is checked). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringo/ringo.h"

static int failures = 0;
static int checked = 0;

#define CHECK(cond)                                                                              \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond,   \
              ringoGetLastError(NULL));                                                          \
      ++failures;                                                                                \
    }                                                                                            \
  } while (0)

/* One refused call: its result and the thread's last error. */
static void Refused(const char* handle, const char* call, ringoResult_t r) {
  const char* msg = ringoGetLastError(NULL);
  ++checked;
  if (r != ringoInvalidArgument) {
    fprintf(stderr, "%s on %s returned %d (%s), not ringoInvalidArgument\n", call, handle, (int)r, msg);
    ++failures;
    return;
  }
  if (strstr(msg, call) == NULL || strstr(msg, "comm") == NULL) {
    fprintf(stderr, "%s on %s: the message does not name the call and the communicator: \"%s\"\n", call, handle,
            msg);
    ++failures;
  }
}

#define REFUSED(handle, call, args) Refused(handle, #call, call args)

/* Every entry point that takes a communicator, with arguments that are
 * otherwise valid, so that only the handle can be refused. */
static void EveryCall(const char* name, ringoComm_t bad) {
  float buf[8] = {0};
  int ranks[4] = {0};
  int count = -1;
  int value = -1;
  int source = -1;
  ringoResult_t async_error = ringoSuccess;
  ringoComm_t child = (ringoComm_t)0x1;
  ringoUniqueId id;
  ringoRedOp_t op = ringoSum;
  float scalar = 2.0f;
  const char* last;

  memset(&id, 0, sizeof(id));
  REFUSED(name, ringoCommFinalize, (bad));
  REFUSED(name, ringoCommGetAsyncError, (bad, &async_error));
  REFUSED(name, ringoCommDumpTrace, (bad, "."));
  REFUSED(name, ringoCommSetTraceLabel, (bad, "label"));
  REFUSED(name, ringoCommCount, (bad, &value));
  REFUSED(name, ringoCommUserRank, (bad, &value));
  REFUSED(name, ringoCommCuDevice, (bad, &value));
  REFUSED(name, ringoAllReduce, (buf, buf, 8, ringoFloat, ringoSum, bad, NULL));
  REFUSED(name, ringoReduceScatter, (buf, buf, 1, ringoFloat, ringoSum, bad, NULL));
  REFUSED(name, ringoAllGather, (buf, buf, 1, ringoFloat, bad, NULL));
  REFUSED(name, ringoBroadcast, (buf, buf, 8, ringoFloat, 0, bad, NULL));
  REFUSED(name, ringoReduce, (buf, buf, 8, ringoFloat, ringoSum, 0, bad, NULL));
  REFUSED(name, ringoSend, (buf, 8, ringoFloat, 0, bad, NULL));
  REFUSED(name, ringoRecv, (buf, 8, ringoFloat, 0, bad, NULL));
  REFUSED(name, ringoSendTagged, (buf, 8, ringoFloat, 0, 1, bad, NULL));
  REFUSED(name, ringoRecvTagged, (buf, 8, ringoFloat, 0, 1, &source, bad, NULL));
  REFUSED(name, ringoAllToAll, (buf, buf, 1, ringoFloat, bad, NULL));
  REFUSED(name, ringoGather, (buf, buf, 1, ringoFloat, 0, bad, NULL));
  REFUSED(name, ringoScatter, (buf, buf, 1, ringoFloat, 0, bad, NULL));
  REFUSED(name, ringoCommSplit, (bad, 0, 0, &child, NULL));
  REFUSED(name, ringoCommAgreeFailed, (bad, ranks, &count));
  REFUSED(name, ringoCommShrink, (bad, NULL, 0, &child, NULL, RINGO_SHRINK_DEFAULT));
  REFUSED(name, ringoCommRevoke, (bad, RINGO_REVOKE_DEFAULT));
  REFUSED(name, ringoCommGetUniqueId, (bad, &id));
  if (bad != NULL) { /* NULL is how a new rank joins: ringoCommGrow then reads the id */
    REFUSED(name, ringoCommGrow, (bad, 2, &id, -1, &child, NULL));
  }
  REFUSED(name, ringoRedOpCreatePreMulSum, (&op, &scalar, ringoFloat, ringoScalarHostImmediate, bad));
  REFUSED(name, ringoRedOpDestroy, ((ringoRedOp_t)ringoNumOps, bad));

  /* Queued in a group: refused when issued, and the group ends cleanly. */
  CHECK(ringoGroupStart() == ringoSuccess);
  REFUSED(name, ringoAllReduce, (buf, buf, 8, ringoFloat, ringoSum, bad, NULL));
  REFUSED(name, ringoSend, (buf, 8, ringoFloat, 0, bad, NULL));
  REFUSED(name, ringoRecv, (buf, 8, ringoFloat, 0, bad, NULL));
  REFUSED(name, ringoCommSplit, (bad, 0, 0, &child, NULL));
  CHECK(ringoGroupEnd() == ringoSuccess);

  /* The error string of a handle that is not live is the thread's. */
  last = ringoGetLastError(bad);
  CHECK(last != NULL && strcmp(last, ringoGetLastError(NULL)) == 0);

  /* Last: these two would release a live communicator. */
  REFUSED(name, ringoCommDestroy, (bad));
  REFUSED(name, ringoCommAbort, (bad));
}

/* A live 1-rank host communicator still works (the refusals changed nothing). */
static void StillWorks(ringoComm_t comm) {
  float send[4] = {1, 2, 3, 4};
  float recv[4] = {0};
  int n = 0;
  CHECK(ringoCommCount(comm, &n) == ringoSuccess && n == 1);
  CHECK(ringoAllReduce(send, recv, 4, ringoFloat, ringoSum, comm, NULL) == ringoSuccess);
  CHECK(recv[0] == 1 && recv[3] == 4);
}

int main(void) {
  ringoComm_t live = NULL;
  ringoComm_t destroyed = NULL;
  ringoComm_t aborted = NULL;
  unsigned char junk[512];
  void* block = malloc(4096);
  volatile uintptr_t freed = (uintptr_t)block; /* the address a freed block had (volatile: not tracked) */

  if (ringoCommInitAll(&live, 1, NULL) != ringoSuccess || ringoCommInitAll(&destroyed, 1, NULL) != ringoSuccess ||
      ringoCommInitAll(&aborted, 1, NULL) != ringoSuccess) {
    fprintf(stderr, "ringoCommInitAll failed: %s\n", ringoGetLastError(NULL));
    return 1;
  }
  CHECK(ringoCommDestroy(destroyed) == ringoSuccess);
  CHECK(ringoCommAbort(aborted) == ringoSuccess);
  memset(junk, 0xa5, sizeof(junk));
  memset(block, 0x5a, 4096);
  free(block);

  EveryCall("NULL", NULL);
  EveryCall("0x1000 (never allocated)", (ringoComm_t)(uintptr_t)0x1000);
  EveryCall("0xfffffffffffff000 (never allocated)", (ringoComm_t)(uintptr_t)(~(uintptr_t)0 - 0xfff));
  EveryCall("stack bytes", (ringoComm_t)(void*)junk);
  EveryCall("a freed malloc block", (ringoComm_t)freed);
  EveryCall("a destroyed communicator", destroyed);
  EveryCall("an aborted communicator", aborted);
  EveryCall("a live handle + 1 (misaligned)", (ringoComm_t)((char*)live + 1));
  EveryCall("a live handle - 8", (ringoComm_t)((char*)live - 8));
  StillWorks(live);
  CHECK(ringoCommDestroy(live) == ringoSuccess);

  if (failures != 0) {
    fprintf(stderr, "%d of %d checks failed\n", failures, checked);
    return 1;
  }
  printf("PASSED: %d refused calls\n", checked);
  return 0;
}
