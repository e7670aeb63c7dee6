/* The public header compiled and used as C99: the config initializer, the
 * version, a 2-rank host clique from ringoCommInitAll, an AllReduce driven
 * from one thread in a group, destroy. Exits nonzero on failure. */
#include <stdio.h>
#include <string.h>

#include "ringo/ringo.h"

static int failures = 0;

#define CHECK(cond)                                                                            \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              ringoGetLastError(NULL));                                                        \
      ++failures;                                                                              \
    }                                                                                          \
  } while (0)

int main(void) {
  ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
  ringoComm_t comms[2] = {NULL, NULL};
  float send[2][5];
  float recv[2][5];
  int version = 0;
  int device = 0;
  int r;
  int i;

  CHECK(config.size == sizeof(ringoConfig_t));
  CHECK(config.version == RINGO_VERSION_CODE);
  CHECK(config.blocking == 1);

  CHECK(ringoGetVersion(&version) == ringoSuccess);
  CHECK(version == RINGO_VERSION_CODE);
  CHECK(strlen(ringoGetErrorString(ringoInvalidArgument)) > 0);

  if (ringoCommInitAll(comms, 2, NULL) != ringoSuccess) {
    fprintf(stderr, "ringoCommInitAll failed: %s\n", ringoGetLastError(NULL));
    return 1;
  }
  CHECK(ringoCommCuDevice(comms[0], &device) == ringoSuccess);
  if (device != -1) {
    /* A GPU was chosen: host buffers would be wrong here. */
    printf("SKIPPED: ringoCommInitAll chose a GPU; this test needs host communicators\n");
    ringoCommDestroy(comms[0]);
    ringoCommDestroy(comms[1]);
    return failures == 0 ? 0 : 1;
  }

  for (r = 0; r < 2; ++r) {
    for (i = 0; i < 5; ++i) {
      send[r][i] = (float)(r * 10 + i);
      recv[r][i] = -1.0f;
    }
  }
  CHECK(ringoGroupStart() == ringoSuccess);
  for (r = 0; r < 2; ++r) {
    CHECK(ringoAllReduce(send[r], recv[r], 5, ringoFloat, ringoSum, comms[r], NULL) ==
          ringoSuccess);
  }
  CHECK(ringoGroupEnd() == ringoSuccess);
  for (r = 0; r < 2; ++r) {
    for (i = 0; i < 5; ++i) CHECK(recv[r][i] == (float)(10 + 2 * i));
  }

  for (r = 0; r < 2; ++r) CHECK(ringoCommDestroy(comms[r]) == ringoSuccess);
  if (failures != 0) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("PASSED\n");
  return 0;
}
