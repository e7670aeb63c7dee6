/* bench/nic_timeline: one rank of an all-reduce loop that runs for a while
 * and prints, on rank 0, each call's end time and bus bandwidth: how a
 * communicator's rate follows a link that changes speed mid-run
 * (bench/nic_split shapes the link). Host memory, float sum.
 *
 *   RANK=r WORLD_SIZE=n RINGO_COMM_ID=host:port nic_timeline BYTES SECONDS
 *
 * Output (rank 0): "t_s busbw_MBps" per call, t from the end of the first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ringo/ringo.h"

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  const char* rank_s = getenv("RANK");
  const char* size_s = getenv("WORLD_SIZE");
  const char* addr = getenv("RINGO_COMM_ID");
  if (argc != 3 || rank_s == NULL || size_s == NULL || addr == NULL) {
    fprintf(stderr, "usage: RANK=r WORLD_SIZE=n RINGO_COMM_ID=host:port %s BYTES SECONDS\n", argv[0]);
    return 2;
  }
  const int rank = atoi(rank_s), n = atoi(size_s);
  const size_t count = (size_t)strtoull(argv[1], NULL, 10) / sizeof(float);
  const double seconds = atof(argv[2]);
  if (count == 0) {
    fprintf(stderr, "%s: BYTES must be at least %zu\n", argv[0], sizeof(float));
    return 2;
  }
  ringoUniqueId id;
  if (ringoGetUniqueIdForAddress(addr, &id) != ringoSuccess) {
    fprintf(stderr, "rank %d: %s\n", rank, ringoGetLastError(NULL));
    return 1;
  }
  ringoConfig_t c = RINGO_CONFIG_INITIALIZER;
  c.device_kind = RINGO_DEVICE_HOST;
  ringoComm_t comm;
  if (ringoCommInitRankConfig(&comm, n, id, rank, &c) != ringoSuccess) {
    fprintf(stderr, "rank %d: %s\n", rank, ringoGetLastError(NULL));
    return 1;
  }
  float* buf = malloc(count * sizeof(float));
  if (buf == NULL) return 1;
  for (size_t i = 0; i < count; ++i) buf[i] = 1.0f;
  /* Every rank runs the same number of calls: rank 0's clock decides when
   * to stop, and says so in the next call's data (the first element). */
  double start = -1;
  for (int call = 0;; ++call) {
    buf[0] = 0.0f;
    if (rank == 0 && start >= 0 && Now() - start >= seconds) buf[0] = 1.0f;
    const double t0 = Now();
    if (ringoAllReduce(buf, buf, count, ringoFloat, ringoSum, comm, NULL) != ringoSuccess) {
      fprintf(stderr, "rank %d: call %d: %s\n", rank, call, ringoGetLastError(comm));
      return 1;
    }
    const double t1 = Now();
    if (buf[0] != 0.0f) break;
    if (start < 0) {
      start = t1;
      continue;
    }
    if (rank == 0) {
      const double bus = (double)count * sizeof(float) / (t1 - t0) * 2.0 * (n - 1) / n;
      printf("%.3f %.1f\n", t1 - start, bus / 1e6);
      fflush(stdout);
    }
  }
  ringoCommDestroy(comm);
  free(buf);
  return 0;
}
