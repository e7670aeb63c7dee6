// bench/elastic_recovery: how long a job that loses a rank takes to go on,
// beside what a restart would cost, in one run, on host memory.
//
// Recovery: N ranks all-reduce 1 KiB in a loop; one rank kills itself
// (SIGKILL); each survivor notes when its failed call returned, agrees on
// the failed ranks (ringoCommAgreeFailed), shrinks (RINGO_SHRINK_ABORT) and
// notes when its first all-reduce on the shrunk communicator returned. The
// recovery time is from the last survivor's failed return to the last
// survivor's first success.
//
// Restart, for comparison: N-1 fresh ranks made the way a restart would
// make them: (a) ringoCommInitRank of a new communicator and a first
// all-reduce, in processes already running; (b) the same in freshly started
// processes (this program run again), from the first spawn to the last
// rank's first success.
//
// Usage: elastic_recovery [-np N] [--reps R]   (prints one table)
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "launch/fork.h"
#include "ringo/ringo.h"

extern char** environ;

namespace {

constexpr int kCount = 256;  // floats: 1 KiB
constexpr int kMaxRanks = 64;

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// What the ranks report, in memory shared across fork (and, for restarted
// processes, in a file they map).
struct Shared {
  int64_t failed[kMaxRanks];
  int64_t recovered[kMaxRanks];
  int64_t agreed[kMaxRanks];
  int64_t shrunk[kMaxRanks];
  int64_t ready[kMaxRanks];  // restart: first all-reduce done
  int ok[kMaxRanks];
};

bool AllReduce(ringoComm_t comm) {
  std::vector<float> buf(kCount, 1.0f);
  return ringoAllReduce(buf.data(), buf.data(), kCount, ringoFloat, ringoSum, comm, nullptr) == ringoSuccess;
}

int RecoveryRank(int rank, int n, const ringoUniqueId& id, int victim, Shared* out) {
  ringoComm_t comm = nullptr;
  if (ringoCommInitRank(&comm, n, id, rank) != ringoSuccess) return 1;
  for (int i = 0; i < 50; ++i) {
    if (rank == victim && i == 20) raise(SIGKILL);
    if (!AllReduce(comm)) break;
  }
  out->failed[rank] = NowNs();
  std::vector<int> failed(n);
  int nfailed = 0;
  if (ringoCommAgreeFailed(comm, failed.data(), &nfailed) != ringoSuccess) {
    std::fprintf(stderr, "rank %d: agree: %s\n", rank, ringoGetLastError(comm));
    return 1;
  }
  out->agreed[rank] = NowNs();
  ringoComm_t shrunk = nullptr;
  if (ringoCommShrink(comm, failed.data(), nfailed, &shrunk, nullptr, RINGO_SHRINK_ABORT) != ringoSuccess) {
    std::fprintf(stderr, "rank %d: shrink: %s\n", rank, ringoGetLastError(comm));
    return 1;
  }
  out->shrunk[rank] = NowNs();
  if (!AllReduce(shrunk)) return 1;
  out->recovered[rank] = NowNs();
  out->ok[rank] = 1;
  ringoCommDestroy(shrunk);
  ringoCommAbort(comm);
  return 0;
}

int InitRank(int rank, int n, const ringoUniqueId& id, Shared* out) {
  ringoComm_t comm = nullptr;
  if (ringoCommInitRank(&comm, n, id, rank) != ringoSuccess) return 1;
  if (!AllReduce(comm)) return 1;
  out->ready[rank] = NowNs();
  out->ok[rank] = 1;
  ringoCommDestroy(comm);
  return 0;
}

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  // A restarted rank: --restart RANK N IDFILE SHAREDFILE
  if (argc == 6 && std::string(argv[1]) == "--restart") {
    const int rank = std::atoi(argv[2]), n = std::atoi(argv[3]);
    ringoUniqueId id;
    FILE* f = std::fopen(argv[4], "rb");
    if (f == nullptr || std::fread(&id, sizeof(id), 1, f) != 1) return 1;
    std::fclose(f);
    FILE* s = std::fopen(argv[5], "r+b");
    if (s == nullptr) return 1;
    void* m = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fileno(s), 0);
    if (m == MAP_FAILED) return 1;
    return InitRank(rank, n, id, static_cast<Shared*>(m));
  }
  int n = 4, reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "-np") n = std::atoi(argv[i + 1]);
    if (std::string(argv[i]) == "--reps") reps = std::atoi(argv[i + 1]);
  }
  if (n < 2 || n > kMaxRanks) {
    std::fprintf(stderr, "elastic_recovery: -np from 2 to %d\n", kMaxRanks);
    return 2;
  }
  auto* shared = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  std::vector<double> recovery, agree, shrink, first, restart_init, restart_process;
  const int victim = n / 2;
  for (int rep = 0; rep < reps; ++rep) {
    // Recovery.
    std::memset(shared, 0, sizeof(Shared));
    ringoUniqueId id;
    if (ringoGetUniqueId(&id) != ringoSuccess) return 1;
    (void)ringo::launch::RunForkedRanks("elastic_recovery", n, [&](int rank) {
      return RecoveryRank(rank, n, id, victim, shared);
    });
    int64_t last_fail = 0, last_agree = 0, last_shrink = 0, last_ok = 0;
    for (int r = 0; r < n; ++r) {
      if (r == victim) continue;
      if (!shared->ok[r]) {
        std::fprintf(stderr, "elastic_recovery: rank %d did not recover\n", r);
        return 1;
      }
      last_fail = std::max(last_fail, shared->failed[r]);
      last_agree = std::max(last_agree, shared->agreed[r]);
      last_shrink = std::max(last_shrink, shared->shrunk[r]);
      last_ok = std::max(last_ok, shared->recovered[r]);
    }
    recovery.push_back(Ms(last_ok - last_fail));
    agree.push_back(Ms(last_agree - last_fail));
    shrink.push_back(Ms(last_shrink - last_agree));
    first.push_back(Ms(last_ok - last_shrink));
    // Restart (a): N-1 ranks in running processes.
    std::memset(shared, 0, sizeof(Shared));
    if (ringoGetUniqueId(&id) != ringoSuccess) return 1;
    const int64_t t0 = NowNs();
    (void)ringo::launch::RunForkedRanks("elastic_recovery", n - 1, [&](int rank) {
      return InitRank(rank, n - 1, id, shared);
    });
    int64_t last = 0;
    for (int r = 0; r < n - 1; ++r) last = std::max(last, shared->ready[r]);
    restart_init.push_back(Ms(last - t0));
    // Restart (b): N-1 freshly started processes.
    char dir[] = "/tmp/ringo-recovery-XXXXXX";
    if (mkdtemp(dir) == nullptr) return 1;
    const std::string id_file = std::string(dir) + "/id", shared_file = std::string(dir) + "/shared";
    if (ringoGetUniqueId(&id) != ringoSuccess) return 1;
    FILE* f = std::fopen(id_file.c_str(), "wb");
    std::fwrite(&id, sizeof(id), 1, f);
    std::fclose(f);
    FILE* s = std::fopen(shared_file.c_str(), "w+b");
    Shared zero{};
    std::fwrite(&zero, sizeof(zero), 1, s);
    std::fflush(s);
    auto* fresh = static_cast<Shared*>(mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fileno(s), 0));
    const int64_t t1 = NowNs();
    std::vector<pid_t> pids;
    for (int r = 0; r < n - 1; ++r) {
      const std::string rank = std::to_string(r), count = std::to_string(n - 1);
      const char* args[] = {"/proc/self/exe", "--restart", rank.c_str(), count.c_str(), id_file.c_str(),
                            shared_file.c_str(), nullptr};
      pid_t pid = 0;
      if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, const_cast<char**>(args), environ) != 0) return 1;
      pids.push_back(pid);
    }
    bool all_ok = true;
    for (pid_t p : pids) {
      int status = 0;
      waitpid(p, &status, 0);
      all_ok = all_ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    last = 0;
    for (int r = 0; r < n - 1; ++r) last = std::max(last, fresh->ready[r]);
    restart_process.push_back(all_ok ? Ms(last - t1) : -1);
    munmap(fresh, sizeof(Shared));
    std::fclose(s);
    std::remove(id_file.c_str());
    std::remove(shared_file.c_str());
    rmdir(dir);
  }
  std::printf("# elastic_recovery -np %d --reps %d: rank %d killed; medians over the reps (ms)\n", n, reps, victim);
  std::printf("# recovery = agree + shrink + first all-reduce, from the last survivor's failed return\n");
  std::printf("%6s | %9s | %7s | %7s | %11s | %15s | %18s\n", "ranks", "recovery", "agree", "shrink",
              "first call", "restart: init", "restart: processes");
  std::printf("%6d | %9.2f | %7.2f | %7.2f | %11.2f | %15.2f | %18.2f\n", n, Median(recovery), Median(agree),
              Median(shrink), Median(first), Median(restart_init), Median(restart_process));
  std::printf("# every rep (recovery ms):");
  for (double r : recovery) std::printf(" %.2f", r);
  std::printf("\n");
  return 0;
}
