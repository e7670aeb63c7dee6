/* bench/init_cost: how long a host communicator's init takes, with and
 * without tagged point-to-point pairs (ringoConfig_t::tagged_p2p, which
 * connects every pair at init). N processes forked on this host; each times
 * ringoCommInitRankConfig; the figure is from the first call to the last
 * return. Runs each setting `reps` times, alternating, and prints one line
 * per run and the medians.
 *
 * Usage: init_cost NRANKS [REPS]   (NRANKS 2..64, REPS default 5) */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ringo/ringo.h"

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* One init of `n` ranks; the milliseconds from the first call to the last
 * return, or -1. */
static double OneInit(int n, int tagged) {
  ringoUniqueId id;
  if (ringoGetUniqueId(&id) != ringoSuccess) return -1;
  int fds[64][2];
  for (int r = 0; r < n; ++r) {
    if (pipe(fds[r]) != 0) return -1;
    if (fork() == 0) {
      ringoConfig_t c = RINGO_CONFIG_INITIALIZER;
      c.device_kind = RINGO_DEVICE_HOST;
      c.tagged_p2p = tagged;
      ringoComm_t comm;
      double t[2];
      t[0] = Now();
      const ringoResult_t rc = ringoCommInitRankConfig(&comm, n, id, r, &c);
      t[1] = Now();
      if (rc != ringoSuccess) {
        fprintf(stderr, "rank %d: %s\n", r, ringoGetLastError(NULL));
        _exit(1);
      }
      if (write(fds[r][1], t, sizeof(t)) != (ssize_t)sizeof(t)) _exit(1);
      ringoCommDestroy(comm);
      _exit(0);
    }
    close(fds[r][1]);
  }
  double first = 1e300, last = 0;
  int ok = 1;
  for (int r = 0; r < n; ++r) {
    double t[2];
    if (read(fds[r][0], t, sizeof(t)) != (ssize_t)sizeof(t)) {
      ok = 0;
    } else {
      if (t[0] < first) first = t[0];
      if (t[1] > last) last = t[1];
    }
    close(fds[r][0]);
  }
  for (int r = 0; r < n; ++r) wait(NULL);
  return ok ? (last - first) * 1e3 : -1;
}

static int Cmp(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 0;
  const int reps = argc > 2 ? atoi(argv[2]) : 5;
  if (n < 2 || n > 64 || reps < 1 || reps > 100) {
    fprintf(stderr, "usage: init_cost NRANKS [REPS]   (NRANKS 2..64, REPS 1..100)\n");
    return 2;
  }
  double ms[2][100];
  for (int k = 0; k < reps; ++k) {
    for (int i = 0; i < 2; ++i) {
      const int tagged = (k + i) % 2; /* alternate which goes first */
      ms[tagged][k] = OneInit(n, tagged);
      if (ms[tagged][k] < 0) return 1;
      printf("run %d: %d ranks, tagged_p2p %d: %.2f ms\n", k, n, tagged, ms[tagged][k]);
    }
  }
  for (int t = 0; t < 2; ++t) qsort(ms[t], (size_t)reps, sizeof(double), Cmp);
  printf("median: tagged_p2p 0 %.2f ms, 1 %.2f ms (%+.1f%%)\n", ms[0][reps / 2], ms[1][reps / 2],
         100.0 * (ms[1][reps / 2] / ms[0][reps / 2] - 1.0));
  return 0;
}
