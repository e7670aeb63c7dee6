// Flight records for ringo-doctor's test: 4 ranks forked on this host,
// writing their records to RINGO_TRACE_DIR (which the caller sets) in one
// of three ways:
//   straggler  20 all-reduces, rank 2 late to each by 20 ms; every rank
//              writes its record on request at the end
//   missing    rank 3 stops after all-reduce #7 (the others stall in #8 and
//              fail at the stall threshold, writing theirs on the timeout);
//              rank 3 writes its own on request
//   mismatch   at collective #5 rank 1 broadcasts where the others
//              all-reduce: every rank fails, writing its record
//   sleeper [SECONDS [CALL]]
//              120 all-reduces, rank 3 sleeping SECONDS (default 60)
//              before all-reduce #CALL (default 100); every call succeeds
//              unless the timeout is shorter; each rank prints when it
//              starts and ends the slow call, and every rank writes its
//              record on request at the end (the hang diagnosis's demo: set
//              RINGO_STALL_MS to a few seconds)
// Usage: doctor_scenario straggler|missing|mismatch|sleeper [SECONDS [CALL]]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "launch/fork.h"
#include "ringo/ringo.h"

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int Sleeper(int rank, const ringoUniqueId& id, int seconds, int call) {
  ringoComm_t comm = nullptr;
  if (ringoCommInitRank(&comm, 4, id, rank) != ringoSuccess) return 1;
  std::vector<float> buf(1024, 1.0f);
  const double t0 = Now();
  for (int i = 1; i <= 120; ++i) {
    if (rank == 3 && i == call) {
      std::fprintf(stderr, "[t=%6.2f s] rank %d: sleeping %d s before all-reduce #%d\n", Now() - t0, rank, seconds, i);
      std::this_thread::sleep_for(std::chrono::seconds(seconds));
    }
    if (i == call) std::fprintf(stderr, "[t=%6.2f s] rank %d: calls all-reduce #%d\n", Now() - t0, rank, i);
    std::fill(buf.begin(), buf.end(), 1.0f);
    if (ringoAllReduce(buf.data(), buf.data(), buf.size(), ringoFloat, ringoSum, comm, nullptr) != ringoSuccess) {
      std::fprintf(stderr, "[t=%6.2f s] rank %d: all-reduce #%d failed: %s\n", Now() - t0, rank, i,
                   ringoGetLastError(comm));
      return 1;
    }
    if (i == call) std::fprintf(stderr, "[t=%6.2f s] rank %d: all-reduce #%d returned\n", Now() - t0, rank, i);
  }
  const int rc = ringoCommDumpTrace(comm, nullptr) == ringoSuccess ? 0 : 1;
  ringoCommDestroy(comm);
  return rc;
}

int Rank(const std::string& mode, int rank, const ringoUniqueId& id) {
  ringoComm_t comm = nullptr;
  if (ringoCommInitRank(&comm, 4, id, rank) != ringoSuccess) {
    std::fprintf(stderr, "rank %d: init: %s\n", rank, ringoGetLastError(nullptr));
    return 1;
  }
  std::vector<float> buf(1024, 1.0f);
  for (int i = 1; i <= 20; ++i) {
    if (mode == "straggler" && rank == 2) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (mode == "missing" && rank == 3 && i == 8) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the others stall and give up
      return ringoCommDumpTrace(comm, nullptr) == ringoSuccess ? 0 : 1;
    }
    ringoResult_t r;
    if (mode == "mismatch" && i == 5 && rank == 1) {
      r = ringoBroadcast(buf.data(), buf.data(), buf.size(), ringoFloat, 0, comm, nullptr);
    } else {
      r = ringoAllReduce(buf.data(), buf.data(), buf.size(), ringoFloat, ringoSum, comm, nullptr);
      std::fill(buf.begin(), buf.end(), 1.0f);
    }
    if (r != ringoSuccess) return 0;  // its record is written (fault or timeout)
  }
  if (mode == "straggler") return ringoCommDumpTrace(comm, nullptr) == ringoSuccess ? 0 : 1;
  std::fprintf(stderr, "rank %d: no failure in mode %s\n", rank, mode.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc >= 2 ? argv[1] : "";
  if (argc < 2 || (mode != "sleeper" && argc != 2) || argc > 4) {
    std::fprintf(stderr, "usage: %s straggler|missing|mismatch|sleeper [SECONDS [CALL]]\n", argv[0]);
    return 2;
  }
  ringoUniqueId id;
  if (ringoGetUniqueId(&id) != ringoSuccess) return 1;
  if (mode == "sleeper") {
    const int seconds = argc > 2 ? std::atoi(argv[2]) : 60;
    const int call = argc > 3 ? std::atoi(argv[3]) : 100;
    return ringo::launch::RunForkedRanks("doctor_scenario", 4,
                                         [&](int rank) { return Sleeper(rank, id, seconds, call); });
  }
  return ringo::launch::RunForkedRanks("doctor_scenario", 4, [&](int rank) { return Rank(mode, rank, id); });
}
