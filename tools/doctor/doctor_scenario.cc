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
// Usage: doctor_scenario straggler|missing|mismatch
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
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s straggler|missing|mismatch\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  ringoUniqueId id;
  if (ringoGetUniqueId(&id) != ringoSuccess) return 1;
  return ringo::launch::RunForkedRanks("doctor_scenario", 4, [&](int rank) { return Rank(mode, rank, id); });
}
