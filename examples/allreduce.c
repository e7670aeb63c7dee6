/* Every rank adds its rank to a vector: one process per rank, on host
 * memory, meeting at the address in RINGO_COMM_ID.
 *
 *   RINGO_COMM_ID=127.0.0.1:29500 ./allreduce 0 2 &
 *   RINGO_COMM_ID=127.0.0.1:29500 ./allreduce 1 2
 */
#include <stdio.h>
#include <stdlib.h>

#include "ringo/ringo.h"

#define CHECK(call)                                                                  \
  do {                                                                               \
    ringoResult_t r_ = (call);                                                       \
    if (r_ != ringoSuccess) {                                                        \
      fprintf(stderr, "%s: %s\n", #call, ringoGetLastError(NULL));                   \
      return 1;                                                                      \
    }                                                                                \
  } while (0)

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: RINGO_COMM_ID=host:port %s RANK NRANKS\n", argv[0]);
    return 2;
  }
  const int rank = atoi(argv[1]), nranks = atoi(argv[2]);
  enum { kCount = 1024 };
  static float data[kCount];
  for (int i = 0; i < kCount; ++i) data[i] = (float)rank;

  ringoUniqueId id; /* with RINGO_COMM_ID set, every rank gets the same id */
  ringoComm_t comm;
  CHECK(ringoGetUniqueId(&id));
  CHECK(ringoCommInitRank(&comm, nranks, id, rank));
  CHECK(ringoAllReduce(data, data, kCount, ringoFloat, ringoSum, comm, NULL)); /* in place */
  CHECK(ringoCommDestroy(comm));

  const float want = (float)(nranks * (nranks - 1) / 2);
  for (int i = 0; i < kCount; ++i) {
    if (data[i] != want) {
      fprintf(stderr, "rank %d: element %d is %g, expected %g\n", rank, i, data[i], want);
      return 1;
    }
  }
  printf("rank %d of %d: every element is %g\n", rank, nranks, want);
  return 0;
}
