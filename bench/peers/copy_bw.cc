// copy_bw: the memory limit bench/compare holds Ringo's host all-reduce
// against. Times a plain memcpy between two buffers of each size, with one
// thread and with one thread per core (each its own buffers, all at once),
// and reports bytes read plus bytes written per second: copying S bytes
// counts 2S. Buffers are touched before timing; each figure is the median of
// many samples (10th and 90th percentiles beside it), every copy is checked.
//
//   copy_bw [-b 8] [-e 256M] [-f 2] [-n SAMPLES] [--csv FILE]
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tools/perf/options.h"
#include "tools/perf/report.h"
#include "tools/perf/stats.h"

namespace ringo::perf {
namespace {

constexpr char kProgram[] = "copy_bw";
// A sample copies at least this many bytes per thread (small sizes repeat
// the copy), so that the clock and the barrier stay small beside it.
constexpr size_t kMinSampleBytes = size_t{4} << 20;

// A spinning barrier: its threads never outnumber the cores, and waking a
// sleeping thread would cost more than the small copies being timed.
class SpinBarrier {
 public:
  explicit SpinBarrier(int n) : n_(n) {}
  void Wait() {
    const uint64_t gen = gen_.load(std::memory_order_acquire);
    if (waiting_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
      waiting_.store(0, std::memory_order_relaxed);
      gen_.fetch_add(1, std::memory_order_acq_rel);
      return;
    }
    while (gen_.load(std::memory_order_acquire) == gen) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
  }

 private:
  const int n_;
  std::atomic<int> waiting_{0};
  std::atomic<uint64_t> gen_{0};
};

struct Figures {
  double median_s = 0;  // per copy by one thread
  double p10_s = 0;
  double p90_s = 0;
  bool ok = true;  // every destination byte matched its source
};

char* AllocTouched(size_t bytes, char fill) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, std::max<size_t>(bytes, 64)) != 0) {
    std::fprintf(stderr, "%s: cannot allocate %zu bytes\n", kProgram, bytes);
    std::exit(1);
  }
  std::memset(p, fill, bytes);
  return static_cast<char*>(p);
}

// `samples` timed samples (after two untimed ones) of `reps` copies of
// `bytes` by each of `threads` threads, started together; thread 0 times
// from the start barrier to the end barrier, so a sample lasts as long as the
// slowest thread.
Figures TimeCopy(size_t bytes, int threads, int samples) {
  const int reps = static_cast<int>(std::max<size_t>(1, kMinSampleBytes / std::max<size_t>(bytes, 1)));
  std::vector<char*> src(threads), dst(threads);
  for (int t = 0; t < threads; ++t) {
    src[t] = AllocTouched(bytes, static_cast<char>(t + 1));
    dst[t] = AllocTouched(bytes, 0);
  }
  SpinBarrier barrier(threads);
  std::vector<double> seconds(samples);
  auto body = [&](int t) {
    for (int s = -2; s < samples; ++s) {
      barrier.Wait();
      const auto start = std::chrono::steady_clock::now();
      for (int r = 0; r < reps; ++r) {
        std::memcpy(dst[t], src[t], bytes);
        asm volatile("" ::: "memory");  // each copy happens, none is merged away
      }
      barrier.Wait();
      if (t == 0 && s >= 0) {
        seconds[s] =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / reps;
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(body, t);
  body(0);
  for (auto& th : pool) th.join();
  Figures f;
  for (int t = 0; t < threads; ++t) {
    f.ok = f.ok && std::memcmp(dst[t], src[t], bytes) == 0;
    std::free(src[t]);
    std::free(dst[t]);
  }
  std::sort(seconds.begin(), seconds.end());
  f.median_s = Quantile(seconds, 0.5);
  f.p10_s = Quantile(seconds, 0.1);
  f.p90_s = Quantile(seconds, 0.9);
  return f;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "?";
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

int Usage(const char* message) {
  if (message) std::fprintf(stderr, "%s: %s\n", kProgram, message);
  std::fprintf(message ? stderr : stdout,
               "Usage: %s [-b MIN] [-e MAX] [-f FACTOR] [-n SAMPLES] [--csv FILE]\n"
               "  sizes MIN..MAX (default 8..256M, K/M/G suffixes), times FACTOR (default 2);\n"
               "  SAMPLES timed samples per size and thread count (default: by size, 5..200).\n"
               "  GB/s are bytes read plus bytes written (2 x size per copy) per second.\n",
               kProgram);
  return message ? 2 : 0;
}

// (bytes read + written) per second for `threads` threads each copying `bytes` in `s` seconds.
double Gbps(size_t bytes, int threads, double s) {
  return s > 0 ? 2.0 * static_cast<double>(bytes) * threads / s / 1e9 : 0.0;
}

int Main(int argc, char** argv) {
  size_t min_bytes = 8, max_bytes = size_t{256} << 20;
  long factor = 2;
  int samples = 0;
  const char* csv_path = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") return Usage(nullptr);
    if (i + 1 >= argc) return Usage(("unknown option or missing value: " + a).c_str());
    const std::string v = argv[++i];
    if (a == "-b" || a == "-e") {
      auto size = ParseSize(v);
      if (!size.ok()) return Usage(size.status().message().c_str());
      (a == "-b" ? min_bytes : max_bytes) = *size;
    } else if (a == "-f") {
      factor = std::strtol(v.c_str(), nullptr, 10);
    } else if (a == "-n") {
      samples = std::atoi(v.c_str());
      if (samples < 1) return Usage("-n takes a count of 1 or more");
    } else if (a == "--csv") {
      csv_path = argv[i];
    } else {
      return Usage(("unknown option " + a).c_str());
    }
  }
  if (factor < 2 || min_bytes == 0 || max_bytes < min_bytes) {
    return Usage("need 0 < -b <= -e and an integer -f >= 2");
  }
  std::FILE* csv = nullptr;
  if (csv_path != nullptr) {
    csv = std::fopen(csv_path, "w");
    if (csv == nullptr) return Usage((std::string("cannot write ") + csv_path).c_str());
    std::fprintf(csv,
                 "bytes,threads,time_us,gbps_read_plus_write,gbps_p10,gbps_p90,correct\n");
  }
  const int cores = std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  std::printf("# copy_bw: memcpy bandwidth, bytes read + written per second (GB/s = 1e9 B/s)\n");
  std::printf("# Machine: %s, %d cores, %s; build %s\n", HostName().c_str(), cores,
              CpuModel().c_str(), BuildMode());
  std::printf("# per size: median of N samples (p10..p90), 1 thread and %d threads at once\n",
              cores);
  std::printf("# %11s %8s %10s %17s %10s %17s\n", "size(B)", "samples", "1 thr GB/s",
              "p10..p90", "all GB/s", "p10..p90");
  bool all_ok = true;
  for (size_t b = min_bytes; b <= max_bytes; b *= static_cast<size_t>(factor)) {
    // About 1 GiB copied per size and thread count, within 5..200 samples.
    const int n = samples > 0 ? samples
                              : static_cast<int>(std::clamp<size_t>(
                                    (size_t{1} << 30) / std::max(b, kMinSampleBytes), 5, 200));
    const Figures one = TimeCopy(b, 1, n);
    const Figures all = TimeCopy(b, cores, n);
    all_ok = all_ok && one.ok && all.ok;
    std::printf("  %11zu %8d %10.2f %8.2f..%-8.2f %10.2f %8.2f..%-8.2f%s\n", b, n,
                Gbps(b, 1, one.median_s), Gbps(b, 1, one.p90_s), Gbps(b, 1, one.p10_s),
                Gbps(b, cores, all.median_s), Gbps(b, cores, all.p90_s),
                Gbps(b, cores, all.p10_s), one.ok && all.ok ? "" : "  WRONG");
    if (csv != nullptr) {
      for (const auto& [threads, f] : {std::pair<int, Figures>{1, one}, {cores, all}}) {
        std::fprintf(csv, "%zu,%d,%.3f,%.3f,%.3f,%.3f,%d\n", b, threads, f.median_s * 1e6,
                     Gbps(b, threads, f.median_s), Gbps(b, threads, f.p90_s),
                     Gbps(b, threads, f.p10_s), f.ok ? 1 : 0);
      }
    }
    std::fflush(stdout);
    if (b > max_bytes / static_cast<size_t>(factor)) break;  // the next size would overflow or pass -e
  }
  if (csv != nullptr) std::fclose(csv);
  return all_ok ? 0 : 1;
}

}  // namespace
}  // namespace ringo::perf

int main(int argc, char** argv) { return ringo::perf::Main(argc, argv); }
