// CUDA graph capture of GPU communicators' calls (collectives/internal/
// gpu_order.h): every collective and point-to-point call captured on each
// rank's stream (each rank capturing on a thread of its own) and replayed
// many times with new inputs written between replays, each replay's result
// checked (1000 verified replays of one all-reduce); two graphs of one
// communicator replayed in turn between eager calls; 100 collectives in one
// graph; two collectives captured on two streams of one capture; every rank
// captured from one thread in one group; the global capture mode; tracked
// replays ordering eager calls on other streams; a host communicator
// refusing a capturing stream. Ranks share CUDA device 0
// (ringoCommInitAll with a repeated device list). Skips where no GPU is
// visible (fails instead under RINGO_REQUIRE_GPU=1).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <list>
#include <string>
#include <thread>
#include <vector>

#include "base/config.h"
#include "base/cuda.h"
#include "base/gpu_test.h"
#include "ringo/ringo.h"

#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#define RINGO_TEST_HAVE_CUDART 1
#else
#define RINGO_TEST_HAVE_CUDART 0
#endif

namespace ringo::tests {
namespace {

bool GpuVisible() { return base::ProbeCuda().device_count > 0; }

#define SKIP_WITHOUT_GPU() \
  RINGO_SKIP_WITHOUT_GPU(GpuVisible(), "no CUDA device visible (" + base::ProbeCuda().reason + ")")

#if RINGO_TEST_HAVE_CUDART

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call << ": " << cudaGetErrorString(cudaGetLastError())

// n ranks on device 0, each with a non-blocking stream.
class Ranks {
 public:
  explicit Ranks(int n) : comms_(n, nullptr), streams_(n, nullptr), graphs_(n, nullptr) {
    std::vector<int> devlist(n, 0);
    ok_ = ringoCommInitAll(comms_.data(), n, devlist.data()) == ringoSuccess;
    for (auto& s : streams_) cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  }
  ~Ranks() {
    SyncAll();
    for (auto& g : graphs_) DropGraph(&g);
    for (auto& g : more_graphs_) DropGraph(&g);
    for (ringoComm_t c : comms_) {
      if (c != nullptr) ringoCommDestroy(c);
    }
    for (void* p : buffers_) cudaFree(p);
    for (auto& s : streams_) cudaStreamDestroy(s);
  }
  bool ok() const { return ok_; }
  // Destroys every communicator now, whatever runs (the destructor
  // synchronizes the streams first).
  void DestroyNow() {
    for (ringoComm_t& c : comms_) {
      if (c != nullptr) ringoCommDestroy(c);
      c = nullptr;
    }
  }
  int n() const { return static_cast<int>(comms_.size()); }
  ringoComm_t comm(int r) const { return comms_[r]; }
  cudaStream_t stream(int r) const { return streams_[r]; }
  // Zeroed device memory, allocated before any collective runs (a cudaFree
  // between them would wait for ring kernels).
  void* Alloc(size_t bytes) {
    void* p = nullptr;
    cudaMalloc(&p, bytes);
    cudaMemset(p, 0, bytes);
    buffers_.push_back(p);
    return p;
  }
  void SyncAll() {
    for (auto& s : streams_) cudaStreamSynchronize(s);
  }
  std::string Errors() {
    std::string out;
    for (int r = 0; r < n(); ++r) {
      ringoResult_t e = ringoSuccess;
      ringoCommGetAsyncError(comms_[r], &e);
      if (e != ringoSuccess) out += "rank " + std::to_string(r) + ": " + ringoGetLastError(comms_[r]) + "; ";
    }
    return out;
  }
  // Captures `issue(r)` into one graph per rank (out[r]): each rank on a
  // thread of its own (begin, issue, end, instantiate), as one process or
  // thread per rank would; or, with `grouped`, every rank from this thread
  // in one ringoGroupStart/End. Returns "" or what failed.
  std::string Capture(const std::function<ringoResult_t(int)>& issue, std::vector<cudaGraphExec_t>* out,
                      cudaStreamCaptureMode mode = cudaStreamCaptureModeThreadLocal, bool grouped = false) {
    out->assign(n(), nullptr);
    std::vector<std::string> failed(n());
    auto end = [&](int r) {
      cudaGraph_t g = nullptr;
      cudaError_t e = cudaStreamEndCapture(streams_[r], &g);
      if (e != cudaSuccess) {
        if (failed[r].empty()) failed[r] = std::string("cudaStreamEndCapture: ") + cudaGetErrorString(e);
        return;
      }
      e = cudaGraphInstantiate(&(*out)[r], g, 0);
      if (e != cudaSuccess && failed[r].empty()) failed[r] = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(e);
      cudaGraphDestroy(g);
    };
    auto begin = [&](int r) {
      const cudaError_t e = cudaStreamBeginCapture(streams_[r], mode);
      if (e != cudaSuccess) failed[r] = std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(e);
      return e == cudaSuccess;
    };
    auto call = [&](int r) {
      if (issue(r) != ringoSuccess && failed[r].empty()) failed[r] = ringoGetLastError(comms_[r]);
    };
    if (grouped) {
      for (int r = 0; r < n(); ++r) begin(r);
      ringoGroupStart();
      for (int r = 0; r < n(); ++r) call(r);
      if (ringoGroupEnd() != ringoSuccess && failed[0].empty()) failed[0] = ringoGetLastError(nullptr);
      for (int r = 0; r < n(); ++r) end(r);
    } else {
      std::vector<std::thread> threads;
      for (int r = 0; r < n(); ++r) {
        threads.emplace_back([&, r] {
          cudaSetDevice(0);
          if (!begin(r)) return;
          call(r);
          end(r);
        });
      }
      for (auto& t : threads) t.join();
    }
    std::string all;
    for (int r = 0; r < n(); ++r) {
      if (!failed[r].empty()) all += "rank " + std::to_string(r) + ": " + failed[r] + "; ";
    }
    return all;
  }
  std::string CaptureInto(const std::function<ringoResult_t(int)>& issue) { return Capture(issue, &graphs_); }
  // Launches every rank's graph of `graphs` on its stream.
  std::string Replay(const std::vector<cudaGraphExec_t>& graphs) {
    for (int r = 0; r < n(); ++r) {
      const cudaError_t e = cudaGraphLaunch(graphs[r], streams_[r]);
      if (e != cudaSuccess) return std::string("cudaGraphLaunch: ") + cudaGetErrorString(e);
    }
    return "";
  }
  std::string Replay() { return Replay(graphs_); }
  std::vector<cudaGraphExec_t>* NewGraphSet() {
    more_sets_.emplace_back();
    return &more_sets_.back();
  }
  void Keep(const std::vector<cudaGraphExec_t>& g) { more_graphs_.insert(more_graphs_.end(), g.begin(), g.end()); }
  // Runs `issue(r)` for every rank eagerly, in one group.
  std::string Eager(const std::function<ringoResult_t(int)>& issue) {
    ringoGroupStart();
    std::string failed;
    for (int r = 0; r < n(); ++r) {
      if (issue(r) != ringoSuccess && failed.empty()) failed = ringoGetLastError(comms_[r]);
    }
    if (ringoGroupEnd() != ringoSuccess && failed.empty()) failed = ringoGetLastError(nullptr);
    return failed;
  }

 private:
  static void DropGraph(cudaGraphExec_t* g) {
    if (*g != nullptr) cudaGraphExecDestroy(*g);
    *g = nullptr;
  }
  std::vector<ringoComm_t> comms_;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaGraphExec_t> graphs_;
  std::vector<cudaGraphExec_t> more_graphs_;
  std::list<std::vector<cudaGraphExec_t>> more_sets_;  // stable addresses (NewGraphSet)
  std::vector<void*> buffers_;
  bool ok_ = false;
};

// Case::out_count of a rooted output: count elements on rank 0, none elsewhere.
constexpr size_t kRootOnly = SIZE_MAX;

// Rank r's input of round k: element i = r + 10 * k + i % 7 (exact in float).
float In(int r, int k, size_t i) { return static_cast<float>(r + 10 * (k % 1000) + static_cast<int>(i % 7)); }

void Upload(void* dst, const std::vector<float>& v, cudaStream_t s) {
  cudaMemcpyAsync(dst, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice, s);
}
std::vector<float> Download(const void* src, size_t n, cudaStream_t s) {
  std::vector<float> v(n);
  cudaMemcpyAsync(v.data(), src, n * sizeof(float), cudaMemcpyDeviceToHost, s);
  cudaStreamSynchronize(s);
  return v;
}

// One all-reduce per rank captured once, replayed 1000 times; before each
// replay every rank writes new inputs (an eager copy on its stream), after it
// every rank's result is read back and checked.
TEST(GpuGraph, AllReduceReplayedAThousandTimesVerified) {
  SKIP_WITHOUT_GPU();
  for (int nranks : {2, 4}) {
    SCOPED_TRACE("ranks " + std::to_string(nranks));
    Ranks ranks(nranks);
    ASSERT_TRUE(ranks.ok());
    const size_t count = 1000;  // small: the LL protocol
    std::vector<float*> in(nranks), out(nranks);
    for (int r = 0; r < nranks; ++r) {
      in[r] = static_cast<float*>(ranks.Alloc(count * sizeof(float)));
      out[r] = static_cast<float*>(ranks.Alloc(count * sizeof(float)));
    }
    ASSERT_EQ(ranks.CaptureInto([&](int r) {
                return ringoAllReduce(in[r], out[r], count, ringoFloat32, ringoSum, ranks.comm(r), ranks.stream(r));
              }),
              "");
    const int replays = nranks == 2 ? 1000 : 200;
    int wrong = 0;
    for (int k = 0; k < replays && wrong == 0; ++k) {
      for (int r = 0; r < nranks; ++r) {
        std::vector<float> v(count);
        for (size_t i = 0; i < count; ++i) v[i] = In(r, k, i);
        Upload(in[r], v, ranks.stream(r));
      }
      ASSERT_EQ(ranks.Replay(), "");
      for (int r = 0; r < nranks; ++r) {
        const std::vector<float> got = Download(out[r], count, ranks.stream(r));
        for (size_t i = 0; i < count; ++i) {
          float want = 0;
          for (int q = 0; q < nranks; ++q) want += In(q, k, i);
          if (got[i] != want) {
            ADD_FAILURE() << "replay " << k << " rank " << r << " element " << i << ": " << got[i] << " != " << want;
            ++wrong;
            break;
          }
        }
      }
    }
    EXPECT_EQ(ranks.Errors(), "");
  }
}

// Every other collective and point-to-point, each captured once per rank and
// replayed 20 times with new inputs, every replay checked; sizes on both
// protocols.
TEST(GpuGraph, EveryCallReplaysWithNewInputs) {
  SKIP_WITHOUT_GPU();
  const int n = 2;
  for (size_t count : {size_t{96}, size_t{1} << 20}) {
    SCOPED_TRACE("count " + std::to_string(count));
    Ranks ranks(n);
    ASSERT_TRUE(ranks.ok());
    std::vector<float*> in(n), out(n);
    for (int r = 0; r < n; ++r) {
      in[r] = static_cast<float*>(ranks.Alloc(n * count * sizeof(float)));
      out[r] = static_cast<float*>(ranks.Alloc(n * count * sizeof(float)));
    }
    struct Case {
      const char* name;
      std::function<ringoResult_t(int)> issue;
      // element i of rank r's output after round k (out_count elements)
      std::function<float(int, int, size_t)> want;
      size_t in_count, out_count;
    };
    const size_t c = count;
    std::vector<Case> cases = {
        {"broadcast",
         [&](int r) { return ringoBroadcast(in[r], out[r], c, ringoFloat32, 1, ranks.comm(r), ranks.stream(r)); },
         [](int, int k, size_t i) { return In(1, k, i); }, c, c},
        {"reduce",
         [&](int r) { return ringoReduce(in[r], out[r], c, ringoFloat32, ringoMax, 0, ranks.comm(r), ranks.stream(r)); },
         [](int r, int k, size_t i) { return r == 0 ? In(1, k, i) : 0.0f; }, c, kRootOnly},
        {"all_gather",
         [&](int r) { return ringoAllGather(in[r], out[r], c, ringoFloat32, ranks.comm(r), ranks.stream(r)); },
         [c](int, int k, size_t i) { return In(static_cast<int>(i / c), k, i % c); }, c, n * c},
        {"reduce_scatter",
         [&](int r) {
           return ringoReduceScatter(in[r], out[r], c, ringoFloat32, ringoSum, ranks.comm(r), ranks.stream(r));
         },
         [c](int r, int k, size_t i) { return In(0, k, r * c + i) + In(1, k, r * c + i); }, n * c, c},
        {"all_to_all",
         [&](int r) { return ringoAllToAll(in[r], out[r], c, ringoFloat32, ranks.comm(r), ranks.stream(r)); },
         [c](int r, int k, size_t i) { return In(static_cast<int>(i / c), k, r * c + i % c); }, n * c, n * c},
        {"send_recv",
         [&](int r) {  // one group: the send and the receive in one kernel
           ringoGroupStart();
           ringoResult_t a = ringoSend(in[r], c, ringoFloat32, 1 - r, ranks.comm(r), ranks.stream(r));
           ringoResult_t b = ringoRecv(out[r], c, ringoFloat32, 1 - r, ranks.comm(r), ranks.stream(r));
           ringoResult_t g = ringoGroupEnd();
           return a != ringoSuccess ? a : b != ringoSuccess ? b : g;
         },
         [](int r, int k, size_t i) { return In(1 - r, k, i); }, c, c},
    };
    for (Case& cs : cases) {
      SCOPED_TRACE(cs.name);
      ASSERT_EQ(ranks.CaptureInto(cs.issue), "");
      for (int k = 0; k < 20; ++k) {
        for (int r = 0; r < n; ++r) {
          std::vector<float> v(cs.in_count);
          for (size_t i = 0; i < v.size(); ++i) v[i] = In(r, k, i);
          Upload(in[r], v, ranks.stream(r));
          cudaMemsetAsync(out[r], 0, n * c * sizeof(float), ranks.stream(r));
        }
        ASSERT_EQ(ranks.Replay(), "");
        for (int r = 0; r < n; ++r) {
          const size_t m = cs.out_count == kRootOnly ? (r == 0 ? c : 0) : cs.out_count;
          const std::vector<float> got = Download(out[r], m, ranks.stream(r));
          for (size_t i = 0; i < m; ++i) {
            ASSERT_EQ(got[i], cs.want(r, k, i)) << "round " << k << " rank " << r << " element " << i;
          }
        }
      }
      ranks.SyncAll();
    }
    EXPECT_EQ(ranks.Errors(), "");
  }
}

// Two graphs of one communicator (an all-reduce and an all-gather) replayed
// in turn, with an eager all-reduce between them, 100 rounds, each checked.
TEST(GpuGraph, TwoGraphsAndEagerCallsInterleaved) {
  SKIP_WITHOUT_GPU();
  const int n = 2;
  const size_t c = 4096;
  Ranks ranks(n);
  ASSERT_TRUE(ranks.ok());
  std::vector<float*> in(n), sum(n), gathered(n), eager(n);
  for (int r = 0; r < n; ++r) {
    in[r] = static_cast<float*>(ranks.Alloc(c * sizeof(float)));
    sum[r] = static_cast<float*>(ranks.Alloc(c * sizeof(float)));
    gathered[r] = static_cast<float*>(ranks.Alloc(n * c * sizeof(float)));
    eager[r] = static_cast<float*>(ranks.Alloc(c * sizeof(float)));
  }
  std::vector<cudaGraphExec_t>* a = ranks.NewGraphSet();
  std::vector<cudaGraphExec_t>* b = ranks.NewGraphSet();
  ASSERT_EQ(ranks.Capture([&](int r) {
              return ringoAllReduce(in[r], sum[r], c, ringoFloat32, ringoSum, ranks.comm(r), ranks.stream(r));
            }, a),
            "");
  ranks.Keep(*a);
  ASSERT_EQ(ranks.Capture([&](int r) {
              return ringoAllGather(in[r], gathered[r], c, ringoFloat32, ranks.comm(r), ranks.stream(r));
            }, b),
            "");
  ranks.Keep(*b);
  for (int k = 0; k < 100; ++k) {
    for (int r = 0; r < n; ++r) {
      std::vector<float> v(c);
      for (size_t i = 0; i < c; ++i) v[i] = In(r, k, i);
      Upload(in[r], v, ranks.stream(r));
    }
    ASSERT_EQ(ranks.Replay(*a), "");
    ASSERT_EQ(ranks.Eager([&](int r) {
                return ringoAllReduce(in[r], eager[r], c, ringoFloat32, ringoMax, ranks.comm(r), ranks.stream(r));
              }),
              "");
    ASSERT_EQ(ranks.Replay(*b), "");
    for (int r = 0; r < n; ++r) {
      const std::vector<float> s = Download(sum[r], c, ranks.stream(r));
      const std::vector<float> e = Download(eager[r], c, ranks.stream(r));
      const std::vector<float> g = Download(gathered[r], n * c, ranks.stream(r));
      for (size_t i = 0; i < c; ++i) {
        ASSERT_EQ(s[i], In(0, k, i) + In(1, k, i)) << "round " << k << " rank " << r << " sum " << i;
        ASSERT_EQ(e[i], In(1, k, i)) << "round " << k << " rank " << r << " eager max " << i;
        ASSERT_EQ(g[i], In(0, k, i)) << "round " << k << " rank " << r << " gather " << i;
        ASSERT_EQ(g[c + i], In(1, k, i)) << "round " << k << " rank " << r << " gather " << c + i;
      }
    }
  }
  EXPECT_EQ(ranks.Errors(), "");
}

// 100 all-reduces in one graph (each adding the inputs into its own output),
// replayed 10 times: every output checked after each replay.
TEST(GpuGraph, AHundredCollectivesInOneGraph) {
  SKIP_WITHOUT_GPU();
  const int n = 2;
  const int calls = 100;
  const size_t c = 64;
  Ranks ranks(n);
  ASSERT_TRUE(ranks.ok());
  std::vector<float*> in(n), out(n);
  for (int r = 0; r < n; ++r) {
    in[r] = static_cast<float*>(ranks.Alloc(c * sizeof(float)));
    out[r] = static_cast<float*>(ranks.Alloc(calls * c * sizeof(float)));
  }
  ASSERT_EQ(ranks.CaptureInto([&](int r) {
              for (int j = 0; j < calls; ++j) {
                // a group of one rank's calls: each its own collective
                const float* src = j == 0 ? in[r] : out[r] + (j - 1) * c;  // a chain: out_j = 2^j * sum
                ringoResult_t e =
                    ringoAllReduce(src, out[r] + j * c, c, ringoFloat32, ringoSum, ranks.comm(r), ranks.stream(r));
                if (e != ringoSuccess) return e;
              }
              return ringoSuccess;
            }),
            "");
  for (int k = 0; k < 10; ++k) {
    for (int r = 0; r < n; ++r) {
      std::vector<float> v(c, static_cast<float>(r + k % 3));
      Upload(in[r], v, ranks.stream(r));
    }
    ASSERT_EQ(ranks.Replay(), "");
    for (int r = 0; r < n; ++r) {
      const std::vector<float> got = Download(out[r], calls * c, ranks.stream(r));
      float want = static_cast<float>(0 + k % 3) + static_cast<float>(1 + k % 3);
      for (int j = 0; j < calls; ++j) {
        if (j > 0) want *= 2;  // the sum of two equal inputs
        ASSERT_EQ(got[j * c], want) << "replay " << k << " rank " << r << " call " << j;
        ASSERT_EQ(got[j * c + c - 1], want) << "replay " << k << " rank " << r << " call " << j;
      }
    }
  }
  EXPECT_EQ(ranks.Errors(), "");
}

// Two collectives of one communicator captured on two streams of one
// capture (forked and joined by events): the replay runs them one after
// the other (the library chains them), both results right.
TEST(GpuGraph, TwoStreamsOfOneCapture) {
  SKIP_WITHOUT_GPU();
  const int n = 2;
  const size_t c = 1 << 16;
  Ranks ranks(n);
  ASSERT_TRUE(ranks.ok());
  std::vector<float*> in(n), s1(n), s2(n);
  std::vector<cudaStream_t> side(n);
  std::vector<cudaEvent_t> fork(n), join(n);
  for (int r = 0; r < n; ++r) {
    in[r] = static_cast<float*>(ranks.Alloc(c * sizeof(float)));
    s1[r] = static_cast<float*>(ranks.Alloc(c * sizeof(float)));
    s2[r] = static_cast<float*>(ranks.Alloc(c * sizeof(float)));
    CUDA_OK(cudaStreamCreateWithFlags(&side[r], cudaStreamNonBlocking));
    CUDA_OK(cudaEventCreateWithFlags(&fork[r], cudaEventDisableTiming));
    CUDA_OK(cudaEventCreateWithFlags(&join[r], cudaEventDisableTiming));
  }
  ASSERT_EQ(ranks.CaptureInto([&](int r) {
              cudaEventRecord(fork[r], ranks.stream(r));
              cudaStreamWaitEvent(side[r], fork[r], 0);  // the side stream joins the capture
              ringoResult_t a =
                  ringoAllReduce(in[r], s1[r], c, ringoFloat32, ringoSum, ranks.comm(r), ranks.stream(r));
              ringoResult_t b = ringoAllReduce(in[r], s2[r], c, ringoFloat32, ringoMin, ranks.comm(r), side[r]);
              cudaEventRecord(join[r], side[r]);
              cudaStreamWaitEvent(ranks.stream(r), join[r], 0);
              return a != ringoSuccess ? a : b;
            }),
            "");
  for (int k = 0; k < 20; ++k) {
    for (int r = 0; r < n; ++r) {
      std::vector<float> v(c);
      for (size_t i = 0; i < c; ++i) v[i] = In(r, k, i);
      Upload(in[r], v, ranks.stream(r));
    }
    ASSERT_EQ(ranks.Replay(), "");
    for (int r = 0; r < n; ++r) {
      const std::vector<float> a = Download(s1[r], c, ranks.stream(r));
      const std::vector<float> b = Download(s2[r], c, ranks.stream(r));
      for (size_t i = 0; i < c; i += 97) {
        ASSERT_EQ(a[i], In(0, k, i) + In(1, k, i)) << "round " << k << " rank " << r << " sum " << i;
        ASSERT_EQ(b[i], In(0, k, i)) << "round " << k << " rank " << r << " min " << i;
      }
    }
  }
  ranks.SyncAll();
  for (int r = 0; r < n; ++r) {
    cudaStreamDestroy(side[r]);
    cudaEventDestroy(fork[r]);
    cudaEventDestroy(join[r]);
  }
  EXPECT_EQ(ranks.Errors(), "");
}

// Every rank captured from one thread in one group (the group runs each
// communicator on a thread of its own, which enqueues into the capture).
TEST(GpuGraph, OneThreadCapturesEveryRankInAGroup) {
  SKIP_WITHOUT_GPU();
  const int n = 2;
  const size_t c = 512;
  Ranks ranks(n);
  ASSERT_TRUE(ranks.ok());
  std::vector<float*> in(n), out(n);
  for (int r = 0; r < n; ++r) {
    in[r] = static_cast<float*>(ranks.Alloc(c * sizeof(float)));
    out[r] = static_cast<float*>(ranks.Alloc(c * sizeof(float)));
  }
  std::vector<cudaGraphExec_t>* g = ranks.NewGraphSet();
  ASSERT_EQ(ranks.Capture([&](int r) {
              return ringoAllReduce(in[r], out[r], c, ringoFloat32, ringoSum, ranks.comm(r), ranks.stream(r));
            },
                          g, cudaStreamCaptureModeThreadLocal, /*grouped=*/true),
            "");
  ranks.Keep(*g);
  for (int k = 0; k < 10; ++k) {
    for (int r = 0; r < n; ++r) Upload(in[r], std::vector<float>(c, static_cast<float>(r + k)), ranks.stream(r));
    ASSERT_EQ(ranks.Replay(*g), "");
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(Download(out[r], c, ranks.stream(r))[c - 1], static_cast<float>(1 + 2 * k));
    }
  }
  EXPECT_EQ(ranks.Errors(), "");
}

// PyTorch's default capture mode (global) on one rank pair.
TEST(GpuGraph, GlobalCaptureMode) {
  SKIP_WITHOUT_GPU();
  const int n = 2;
  const size_t c = 256;
  Ranks ranks(n);
  ASSERT_TRUE(ranks.ok());
  std::vector<float*> in(n), out(n);
  for (int r = 0; r < n; ++r) {
    in[r] = static_cast<float*>(ranks.Alloc(c * sizeof(float)));
    out[r] = static_cast<float*>(ranks.Alloc(c * sizeof(float)));
  }
  std::vector<cudaGraphExec_t>* g = ranks.NewGraphSet();
  ASSERT_EQ(ranks.Capture([&](int r) {
              return ringoAllReduce(in[r], out[r], c, ringoFloat32, ringoSum, ranks.comm(r), ranks.stream(r));
            },
                          g, cudaStreamCaptureModeGlobal),
            "");
  ranks.Keep(*g);
  for (int k = 0; k < 10; ++k) {
    for (int r = 0; r < n; ++r) Upload(in[r], std::vector<float>(c, static_cast<float>(r + k)), ranks.stream(r));
    ASSERT_EQ(ranks.Replay(*g), "");
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(Download(out[r], c, ranks.stream(r))[c - 1], static_cast<float>(1 + 2 * k));
    }
  }
  EXPECT_EQ(ranks.Errors(), "");
}

// With RINGO_GPU_TRACK_REPLAYS=1 (scripts/gpu_check.sh's graph step runs
// this binary a second time so): a replay on each rank's stream, then at
// once, with nothing synchronized, an eager all-reduce on other streams of
// the same communicators, 50 times over; the eager calls run after the
// replays (both results right, no timeout). Then a replay and the
// communicators destroyed at once: destroy waits for the replay's kernels.
TEST(GpuGraph, TrackedReplaysOrderEagerCallsOnOtherStreams) {
  SKIP_WITHOUT_GPU();
  if (!base::GetConfig().gpu_track_replays) {
    GTEST_SKIP() << "replays are not tracked here (RINGO_GPU_TRACK_REPLAYS=0)";
  }
  const int n = 2;
  Ranks ranks(n);
  ASSERT_TRUE(ranks.ok());
  const size_t c = 1 << 20;  // the Simple protocol, long enough to overlap
  std::vector<float*> a(n), b(n);
  std::vector<cudaStream_t> other(n, nullptr);
  for (int r = 0; r < n; ++r) {
    a[r] = static_cast<float*>(ranks.Alloc(c * sizeof(float)));
    b[r] = static_cast<float*>(ranks.Alloc(c * sizeof(float)));
    CUDA_OK(cudaStreamCreateWithFlags(&other[r], cudaStreamNonBlocking));
  }
  ASSERT_EQ(ranks.CaptureInto([&](int r) {
              return ringoAllReduce(a[r], a[r], c, ringoFloat32, ringoSum, ranks.comm(r), ranks.stream(r));
            }),
            "");
  for (int k = 0; k < 50; ++k) {
    for (int r = 0; r < n; ++r) {
      Upload(a[r], std::vector<float>(c, static_cast<float>(r + 1)), ranks.stream(r));
      Upload(b[r], std::vector<float>(c, static_cast<float>(10 * (r + 1) + k)), other[r]);
      cudaStreamSynchronize(other[r]);  // b's input is in place before the call below is issued
    }
    ASSERT_EQ(ranks.Replay(), "");
    ringoGroupStart();
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(ringoAllReduce(b[r], b[r], c, ringoFloat32, ringoSum, ranks.comm(r), other[r]), ringoSuccess);
    }
    ASSERT_EQ(ringoGroupEnd(), ringoSuccess);
    for (int r = 0; r < n; ++r) {
      const std::vector<float> got_b = Download(b[r], c, other[r]);
      const std::vector<float> got_a = Download(a[r], c, ranks.stream(r));
      ASSERT_EQ(got_a[0], 3.0f) << "round " << k << " rank " << r;
      ASSERT_EQ(got_a[c - 1], 3.0f) << "round " << k << " rank " << r;
      ASSERT_EQ(got_b[0], static_cast<float>(30 + 2 * k)) << "round " << k << " rank " << r;
      ASSERT_EQ(got_b[c - 1], static_cast<float>(30 + 2 * k)) << "round " << k << " rank " << r;
    }
  }
  EXPECT_EQ(ranks.Errors(), "");
  ASSERT_EQ(ranks.Replay(), "");
  ranks.DestroyNow();  // no synchronization first
  for (auto s : other) cudaStreamDestroy(s);
}

// A host communicator refuses a capturing stream, and says why.
TEST(GpuGraph, HostCommunicatorRefusesCapture) {
  SKIP_WITHOUT_GPU();
  ringoUniqueId id;
  ASSERT_EQ(ringoGetUniqueId(&id), ringoSuccess);
  ringoConfig_t config = RINGO_CONFIG_INITIALIZER;
  config.device_kind = RINGO_DEVICE_HOST;
  ringoComm_t comm = nullptr;
  ASSERT_EQ(ringoCommInitRankConfig(&comm, 1, id, 0, &config), ringoSuccess);
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::vector<float> a(16, 1.0f), b(16, 0.0f);
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  EXPECT_EQ(ringoAllReduce(a.data(), b.data(), 16, ringoFloat32, ringoSum, comm, s), ringoInvalidUsage);
  EXPECT_NE(std::string(ringoGetLastError(comm)).find("CUDA graph"), std::string::npos) << ringoGetLastError(comm);
  EXPECT_EQ(ringoSend(a.data(), 16, ringoFloat32, 0, comm, s), ringoInvalidUsage);
  cudaGraph_t g = nullptr;
  CUDA_OK(cudaStreamEndCapture(s, &g));
  cudaGraphDestroy(g);
  // Outside a capture a stream is refused as before, and the call runs
  // with none.
  EXPECT_EQ(ringoAllReduce(a.data(), b.data(), 16, ringoFloat32, ringoSum, comm, s), ringoInvalidArgument);
  EXPECT_EQ(ringoAllReduce(a.data(), b.data(), 16, ringoFloat32, ringoSum, comm, nullptr), ringoSuccess);
  EXPECT_EQ(b[15], 1.0f);
  cudaStreamDestroy(s);
  ringoCommDestroy(comm);
}

#else

TEST(GpuGraph, NeedsCudaRuntime) { GTEST_SKIP() << "built without the CUDA runtime headers"; }

#endif  // RINGO_TEST_HAVE_CUDART

}  // namespace
}  // namespace ringo::tests
