// One rank of a communicator whose ranks run on several hosts (network
// namespaces in tests/netns/): launched once per rank with RANK, WORLD_SIZE
// and RINGO_COMM_ID (rank 0's address) in the environment, as a launcher
// would. Modes:
//   sweep      every collective x datatype x op x count (0, 1, odd, chunk-1,
//              chunk, chunk+1, several chunks) x in and out of place x
//              roots, each checked against the reference; then the
//              point-to-point rounds of tests/p2p_case.h (pairs across hosts
//              over the network, within a host over shared memory), an
//              all-to-all, and a split by host with an all-reduce on each
//              child; exit 0 when all pass
//   reduced    the sweep cut for an emulated guest (every collective, 4
//              datatypes, 3 ops, 5 counts)
//   collectives, p2p
//              the sweep's two halves alone
//   survive    AllReduces until one fails; exit 0 when it fails within the
//              timeout with an error naming rank VICTIM (argv[2]), and
//              prints it
//   victim     AllReduces forever (the script kills it or its link)
//   garbage    a few AllReduces, then writes garbage into its own data
//              connections and stops: its peers must fail naming it
//   hang_sleep RANK SECONDS
//              12 AllReduces, rank RANK sleeping SECONDS before its 6th:
//              all succeed (the script checks the diagnosis the others print)
//   hang_stopped VICTIM
//              AllReduces until one fails (the script stops VICTIM); exit 0
//              when the error carries the diagnosis naming it silent
// Exit status 2 for a failure to set up, 1 for a failed check.
#include <arpa/inet.h>
#include <dirent.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ringo/ringo.h"
#include "tests/collective_case.h"
#include "tests/p2p_case.h"
#include "tests/reference.h"

namespace {

using namespace ringo::tests;  // NOLINT: a test program

int EnvInt(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) {
    std::fprintf(stderr, "multihost: %s is not set\n", name);
    std::exit(2);
  }
  return std::atoi(v);
}

ringoComm_t Init(int rank, int nranks) {
  ringoUniqueId id;
  if (ringoGetUniqueId(&id) != ringoSuccess) {  // RINGO_COMM_ID: every rank names rank 0's address
    std::fprintf(stderr, "rank %d: ringoGetUniqueId: %s\n", rank, ringoGetLastError(nullptr));
    std::exit(2);
  }
  ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
  config.device_kind = RINGO_DEVICE_HOST;
  ringoComm_t comm = nullptr;
  if (ringoCommInitRankConfig(&comm, nranks, id, rank, &config) != ringoSuccess) {
    std::fprintf(stderr, "rank %d: init: %s\n", rank, ringoGetLastError(nullptr));
    std::exit(2);
  }
  return comm;
}

int Sweep(int rank, int nranks, ringoComm_t comm) {
  const ringoDataType_t types[] = {ringoInt8,   ringoUint8,  ringoInt32,   ringoUint32,  ringoInt64,
                                   ringoUint64, ringoFloat16, ringoFloat32, ringoFloat64, ringoBfloat16};
  const ringoRedOp_t ops[] = {ringoSum, ringoProd, ringoMax, ringoMin, ringoAvg};
  int cases = 0, failures = 0;
  uint32_t seed = 1;
  for (Collective coll : kAllCollectives) {
    for (ringoDataType_t dt : types) {
      for (ringoRedOp_t op : ops) {
        if (!HasOp(coll) && op != ringoSum) continue;
        for (size_t count : SweepCounts(dt, nranks)) {
          for (bool in_place : {false, true}) {
            for (int root : {0, nranks - 1}) {
              if (!HasRoot(coll) && root != 0) continue;
              if (HasRoot(coll) && root == 0 && nranks == 1) continue;
              Case c;
              c.collective = coll;
              c.dtype = dt;
              c.op = op;
              c.nranks = nranks;
              c.count = count;
              c.in_place = in_place;
              c.root = root;
              c.seed = seed++;
              const Expected e = BuildExpected(c);
              bool call_failed = false;
              const std::string problem = RunCaseOnRank(c, e, rank, comm, &call_failed);
              ++cases;
              if (problem.empty()) continue;
              ++failures;
              std::fprintf(stderr, "rank %d: %s\n", rank, problem.c_str());
              if (call_failed) return 1;
            }
          }
        }
      }
    }
  }
  std::printf("rank %d: %d cases, %d failed\n", rank, cases, failures);
  return failures == 0 ? 0 : 1;
}

// The sweep cut to what an emulated guest runs in seconds: every
// collective, 4 datatypes, 3 ops, counts 0, 1, odd and one slot + 1 (the
// slot of RINGO_SLOT_BYTES, which the caller sets), and 2 MiB of float32
// sums; out of place and (one count) in place.
int ReducedSweep(int rank, int nranks, ringoComm_t comm) {
  const char* slot_env = std::getenv("RINGO_SLOT_BYTES");
  const size_t slot = slot_env != nullptr && std::atoi(slot_env) > 0 ? static_cast<size_t>(std::atoi(slot_env)) : 64;
  const bool verbose = std::getenv("MULTIHOST_VERBOSE") != nullptr;  // each case as it starts
  const ringoDataType_t types[] = {ringoInt32, ringoFloat16, ringoFloat32, ringoFloat64};
  const ringoRedOp_t ops[] = {ringoSum, ringoMax, ringoAvg};
  int cases = 0, failures = 0;
  uint32_t seed = 1;
  for (Collective coll : kAllCollectives) {
    for (ringoDataType_t dt : types) {
      const size_t es = DataTypeSize(dt);
      const size_t big = (size_t{2} << 20) / es / static_cast<size_t>(nranks) * static_cast<size_t>(nranks) + 1;
      for (ringoRedOp_t op : ops) {
        if (!HasOp(coll) && op != ringoSum) continue;
        for (size_t count : {size_t{0}, size_t{1}, size_t{7}, slot / es + 1, big}) {
          // 2 MiB once per collective (the guest is emulated: time goes to the references).
          if (count == big && (dt != ringoFloat32 || op != ringoSum)) continue;
          Case c;
          c.collective = coll;
          c.dtype = dt;
          c.op = op;
          c.nranks = nranks;
          c.count = count;
          c.in_place = count == 7;
          c.root = nranks - 1;
          c.seed = seed++;
          const Expected e = BuildExpected(c);
          bool call_failed = false;
          if (verbose) std::fprintf(stderr, "rank %d: %s\n", rank, c.Describe().c_str());
          const std::string problem = RunCaseOnRank(c, e, rank, comm, &call_failed);
          ++cases;
          if (problem.empty()) continue;
          ++failures;
          std::fprintf(stderr, "rank %d: %s\n", rank, problem.c_str());
          if (call_failed) return 1;
        }
      }
    }
  }
  std::printf("rank %d: %d cases, %d failed\n", rank, cases, failures);
  return failures == 0 ? 0 : 1;
}

// Point-to-point, all-to-all and a split across the hosts.
int PointToPoint(int rank, int nranks, ringoComm_t comm) {
  const std::vector<size_t> counts = {0, 1, 7, 100, 4099};
  for (const Round& round : MakeRounds(nranks, 77u + nranks, counts, 64, true)) {
    const std::string problem = RunRound(round, rank, comm);
    if (!problem.empty()) {
      std::fprintf(stderr, "rank %d: %s\n", rank, problem.c_str());
      return 1;
    }
  }
  std::vector<int32_t> in(3 * nranks), out(3 * nranks);
  for (int p = 0; p < nranks; ++p) in[3 * p] = in[3 * p + 1] = in[3 * p + 2] = 1000 * rank + p;
  if (ringoAllToAll(in.data(), out.data(), 3, ringoInt32, comm, nullptr) != ringoSuccess) {
    std::fprintf(stderr, "rank %d: all-to-all: %s\n", rank, ringoGetLastError(comm));
    return 1;
  }
  for (int p = 0; p < nranks; ++p) {
    if (out[3 * p + 2] != 1000 * p + rank) {
      std::fprintf(stderr, "rank %d: all-to-all block %d is %d\n", rank, p, out[3 * p + 2]);
      return 1;
    }
  }
  // A split by host name: each child's ranks share a host.
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  uint32_t hash = 0;  // unsigned: the arithmetic wraps
  for (const char* c = host; *c != 0; ++c) hash = hash * 31 + static_cast<unsigned char>(*c);
  const int color = static_cast<int>(hash & 0x7fffffff);
  ringoComm_t child = nullptr;
  if (ringoCommSplit(comm, color, rank, &child, nullptr) != ringoSuccess) {
    std::fprintf(stderr, "rank %d: split: %s\n", rank, ringoGetLastError(comm));
    return 1;
  }
  if (child == nullptr) {
    std::fprintf(stderr, "rank %d: split of color %d returned no child\n", rank, color);
    return 1;
  }
  int size = 0;
  ringoCommCount(child, &size);
  float one = 1.0f, sum = 0.0f;
  const ringoResult_t rc = ringoAllReduce(&one, &sum, 1, ringoFloat32, ringoSum, child, nullptr);
  const std::string why = rc == ringoSuccess ? "" : ringoGetLastError(child);
  ringoCommDestroy(child);
  if (rc != ringoSuccess || sum != static_cast<float>(size)) {
    std::fprintf(stderr, "rank %d: child all-reduce over %d ranks: %s, sum %g: %s\n", rank, size,
                 ringoGetErrorString(rc), sum, why.c_str());
    return 1;
  }
  std::printf("rank %d: point-to-point rounds, all-to-all and a split of %d passed\n", rank, size);
  return 0;
}

int Survive(int rank, int victim, ringoComm_t comm, int64_t timeout_ms) {
  std::vector<float> in(64 << 10, 1.0f), out(in.size());
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    const auto call = std::chrono::steady_clock::now();
    const ringoResult_t rc = ringoAllReduce(in.data(), out.data(), in.size(), ringoFloat32, ringoSum, comm, nullptr);
    if (rc == ringoSuccess) {
      if (std::chrono::steady_clock::now() - start > std::chrono::seconds(60)) {
        std::fprintf(stderr, "rank %d: no error in 60 s\n", rank);
        return 1;
      }
      continue;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - call).count();
    const std::string msg = ringoGetLastError(comm);
    std::printf("rank %d: %s after %.2f s: %s\n", rank, ringoGetErrorString(rc), seconds, msg.c_str());
    const std::string v = "rank " + std::to_string(victim);
    const bool names = msg.find("failure started at " + v) != std::string::npos ||
                       msg.find("peer " + v + " ") != std::string::npos ||
                       msg.find("connection to " + v + " ") != std::string::npos ||
                       msg.find("connection from " + v + " ") != std::string::npos;
    int status = 0;
    if (!names) {
      std::fprintf(stderr, "rank %d: the error does not name %s\n", rank, v.c_str());
      status = 1;
    }
    if (seconds > timeout_ms / 1000.0 + 5) {
      std::fprintf(stderr, "rank %d: the failing call took %.2f s\n", rank, seconds);
      status = 1;
    }
    ringoCommAbort(comm);
    return status;
  }
}

// Writes garbage into every TCP connection of this process that goes to
// another test host (the data streams; the bootstrap is closed by now).
int Garbage(int rank, ringoComm_t comm) {
  std::vector<float> in(64 << 10, 1.0f), out(in.size());  // as the survivors call
  for (int i = 0; i < 20; ++i) ringoAllReduce(in.data(), out.data(), in.size(), ringoFloat32, ringoSum, comm, nullptr);
  std::mt19937 rng(static_cast<unsigned>(rank));
  std::vector<char> junk(1 << 16);
  for (char& c : junk) c = static_cast<char>(rng());
  int streams = 0;
  DIR* d = opendir("/proc/self/fd");
  while (dirent* e = d != nullptr ? readdir(d) : nullptr) {
    const int fd = std::atoi(e->d_name);
    sockaddr_storage peer{};
    socklen_t len = sizeof(peer);
    if (fd <= 2 || getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) continue;
    if (send(fd, junk.data(), junk.size(), MSG_NOSIGNAL | MSG_DONTWAIT) > 0) ++streams;
  }
  if (d != nullptr) closedir(d);
  std::printf("rank %d: wrote garbage into %d connections\n", rank, streams);
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::seconds(30));  // the script ends it
  return 0;
}

// Hang diagnosis across hosts, a rank that sleeps: 12 all-reduces; rank
// `sleeper` sleeps `sleep_s` seconds before its 6th. Every call must
// succeed (the stall threshold only explains; the timeout is longer); the
// script checks that the other ranks printed the diagnosis naming it.
int HangSleep(int rank, int sleeper, int sleep_s, ringoComm_t comm) {
  std::vector<float> buf(1024);
  for (int i = 0; i < 12; ++i) {
    if (rank == sleeper && i == 5) std::this_thread::sleep_for(std::chrono::seconds(sleep_s));
    std::fill(buf.begin(), buf.end(), 1.0f);
    const ringoResult_t r = ringoAllReduce(buf.data(), buf.data(), buf.size(), ringoFloat32, ringoSum, comm, nullptr);
    if (r != ringoSuccess) {
      std::fprintf(stderr, "rank %d: all-reduce %d failed: %s\n", rank, i, ringoGetLastError(comm));
      return 1;
    }
  }
  std::printf("rank %d: 12 all-reduces done\n", rank);
  ringoCommDestroy(comm);
  return 0;
}

// Hang diagnosis across hosts, a rank the script stops (SIGSTOP): all-reduces
// until one fails (RINGO_STALL_ABORT=1 ends the wait at the diagnosis); the
// error must carry the diagnosis naming `victim` as silent, on another host.
int HangStopped(int rank, int victim, ringoComm_t comm) {
  std::vector<float> buf(64 << 10);  // as the victim calls
  for (int i = 0; i < 100000; ++i) {
    const ringoResult_t r = ringoAllReduce(buf.data(), buf.data(), buf.size(), ringoFloat32, ringoSum, comm, nullptr);
    if (r == ringoSuccess) continue;
    const std::string why = ringoGetLastError(comm);
    std::fprintf(stderr, "rank %d: all-reduce %d failed: %s\n", rank, i, why.c_str());
    const std::string v = "rank " + std::to_string(victim) + " did not answer within";
    const bool ok = why.find("Ringo hang diagnosis") != std::string::npos && why.find(v) != std::string::npos &&
                    why.find("on another host") != std::string::npos;
    if (!ok) std::fprintf(stderr, "rank %d: the error does not carry the diagnosis of the stopped rank\n", rank);
    ringoCommAbort(comm);
    return ok ? 0 : 1;
  }
  std::fprintf(stderr, "rank %d: no all-reduce failed\n", rank);
  return 1;
}

// The first all-reduce of the fault modes, then "rank R: ready" on stdout:
// the script strikes (kills, stops, takes a link down) only once every rank
// has said it, so the fault lands mid-stream, never during init.
void Ready(int rank, ringoComm_t comm) {
  std::vector<float> in(64 << 10, 1.0f), out(in.size());  // as the fault modes call
  const ringoResult_t rc = ringoAllReduce(in.data(), out.data(), in.size(), ringoFloat32, ringoSum, comm, nullptr);
  if (rc != ringoSuccess) {
    std::fprintf(stderr, "rank %d: the first all-reduce failed: %s\n", rank, ringoGetLastError(comm));
    std::exit(1);
  }
  std::printf("rank %d: ready\n", rank);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s sweep|collectives|p2p|reduced|survive VICTIM|victim|garbage|hang_sleep RANK SECONDS|hang_stopped VICTIM\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  const int rank = EnvInt("RANK");
  const int nranks = EnvInt("WORLD_SIZE");
  ringoComm_t comm = Init(rank, nranks);
  if (mode == "reduced") {
    const int rc = ReducedSweep(rank, nranks, comm);
    ringoCommDestroy(comm);
    return rc;
  }
  if (mode == "sweep" || mode == "collectives" || mode == "p2p") {
    int rc = mode == "p2p" ? 0 : Sweep(rank, nranks, comm);
    if (rc == 0 && mode != "collectives") rc = PointToPoint(rank, nranks, comm);
    ringoCommDestroy(comm);
    return rc;
  }
  if (mode == "survive" || mode == "victim" || mode == "hang_stopped") Ready(rank, comm);
  if (mode == "survive" && argc > 2) {
    const char* t = std::getenv("RINGO_TIMEOUT_MS");
    return Survive(rank, std::atoi(argv[2]), comm, t != nullptr ? std::atoll(t) : 300000);
  }
  if (mode == "victim") {
    std::vector<float> in(64 << 10, 1.0f), out(in.size());
    while (true) ringoAllReduce(in.data(), out.data(), in.size(), ringoFloat32, ringoSum, comm, nullptr);
  }
  if (mode == "garbage") return Garbage(rank, comm);
  if (mode == "hang_sleep" && argc > 3) return HangSleep(rank, std::atoi(argv[2]), std::atoi(argv[3]), comm);
  if (mode == "hang_stopped" && argc > 2) return HangStopped(rank, std::atoi(argv[2]), comm);
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
