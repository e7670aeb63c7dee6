#include "base/config.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <mutex>
#include <string>

#include <sys/stat.h>

#include "base/check.h"

extern char** environ;

namespace ringo::base {
namespace {

const std::vector<EnvVarInfo>& Table() {
  static const std::vector<EnvVarInfo>* const kTable = new std::vector<EnvVarInfo>{
      // Ringo's own.
      {"RINGO_DEBUG", "enum", "WARN", "Log level: NONE, WARN, INFO or TRACE."},
      {"RINGO_DEBUG_FILE", "string", "",
       "Write the log to this file instead of stderr; %h is replaced by the host name, %p by "
       "the process id."},
      {"RINGO_TIMEOUT_MS", "int", "300000",
       "Deadline in milliseconds of every wait on a peer (bootstrap and data); a wait that "
       "passes it fails with ringoTimeout naming the peer."},
      {"RINGO_COMM_ID", "string", "",
       "host:port of the rendezvous root; rank 0 listens there and ringoGetUniqueId names it."},
      {"RINGO_SOCKET_IFNAME", "string", "",
       "Network interfaces for bootstrap sockets: a prefix list (eth,ib), ^ to exclude, = for "
       "exact names. Default: the first non-loopback interface that is up, else loopback."},
      {"RINGO_SLOT_BYTES", "int", "0",
       "Bytes per FIFO slot (a multiple of 64, at least 64; on a GPU the largest Simple chunk, "
       "its slot 16 bytes more); 0 lets the planner choose. Small values make small counts take "
       "the multi-chunk paths (used by the tests)."},
      {"RINGO_NCHANNELS", "int", "0",
       "Rings run side by side: threads per rank on the host, CUDA blocks per rank on a GPU; 0 "
       "lets the planner choose (on a GPU from its multiprocessors and the ranks sharing it)."},
      {"RINGO_SPIN_COUNT", "int", "-1",
       "Polls with a pause instruction before a waiting rank starts yielding (then sleeping on "
       "a futex); -1 chooses from the number of local ranks and cores."},
      {"RINGO_YIELD_COUNT", "int", "-1",
       "After spinning, polls that each yield the core (sched_yield) before sleeping on a "
       "futex; -1 chooses from the number of local ranks and cores (yielding helps when ranks "
       "outnumber cores)."},
      {"RINGO_CROWDED_WAIT", "int", "-1",
       "1: one-shot and direct waits give the core only to a rank on the same core that can "
       "move, and poll otherwise (one process switch per core per operation); 0: they yield "
       "whenever they wait; -1: 1 when local ranks outnumber cores."},
      {"RINGO_ALGO", "enum", "",
       "ring: every collective runs the ring; oneshot: collectives whose data fits the "
       "one-shot board (64 KiB per rank) run as one exchange among the ranks of a host; "
       "direct: every collective (of any size) among the ranks of one host runs straight on "
       "every rank's buffers where the buffers it needs are reachable (threads of one process, "
       "or buffers from ringoMemAlloc), the ring otherwise; doubling: every all-reduce up to 256 KiB on "
       "a host communicator whose ranks span hosts runs by recursive doubling (ceil(log2 N) exchanges), "
       "except integer avg; unset: the planner chooses by size (recursive doubling across hosts where "
       "the cost model says it is faster than the ring, never under RINGO_DETERMINISTIC)."},
      {"RINGO_WIRE", "enum", "none",
       "The wire format of floating-point sums between hosts (docs/wire.md): none, bf16, fp16, e4m3 "
       "(or fp8) or e5m2 (8-bit with a power-of-two scale per 32 values). fp32, bf16 and fp16 sum, "
       "avg and premul-sum all-reduce and reduce-scatter on host communicators whose ranks span hosts "
       "(GPU ones under RINGO_GPU_WIRE=1) then cross the "
       "network in it, each contribution rounded once and the result once, whatever the rank count; "
       "contributions within a host travel uncompressed. For communicators made without a config's wire field, "
       "programs that cannot set it (the NCCL shim) included."},
      {"RINGO_WIRE_ENGINE", "enum", "pipelined",
       "How a host communicator runs the wire: pipelined (the host engine: a round's exchange on a "
       "thread of its own beside the next round's encoding) or staged (round by round, the schedule "
       "GPU communicators run, with the same stage functions as their kernels: for testing that "
       "schedule where no GPU is). Every rank must set the same."},
      {"RINGO_NET", "enum", "auto",
       "The network transport between hosts: socket (TCP), ib (InfiniBand verbs), auto (verbs "
       "where both ends have a usable port on one fabric, sockets otherwise)."},
      {"RINGO_IB_DISABLE", "bool", "0", "1: never use InfiniBand verbs (RINGO_NET=auto then takes sockets)."},
      {"RINGO_IB_HCA", "string", "",
       "Verbs devices and ports to use: a list of name[:port] prefixes (mlx5_0:1,mlx5_1), ^ to "
       "exclude, = for exact names. Default: every active port, the one nearest the rank first."},
      {"RINGO_IB_GID_INDEX", "int", "-1",
       "GID table index of RoCE ports; -1: a RoCE v2 IPv4-mapped GID (::ffff:a.b.c.d), else "
       "index 0. InfiniBand ports address by LID and ignore it."},
      {"RINGO_IB_TIMEOUT", "int", "18",
       "Verbs QP ack timeout exponent (4.096 us x 2^value, 1 to 31) before a retry."},
      {"RINGO_IB_RETRY_CNT", "int", "7", "Verbs QP retries (0 to 7) before a send fails."},
      {"RINGO_IB_QPS_PER_CONNECTION", "int", "1",
       "Queue pairs per verbs connection (1 to 16); a message is split across them."},
      {"RINGO_GPU_ELASTIC", "bool", "0",
       "1: the elastic calls (ringoCommAgreeFailed, ringoCommShrink, ringoCommRevoke, "
       "ringoCommGetUniqueId, ringoCommGrow) on GPU communicators. Off until a GPU run has verified "
       "them (docs/gpu.md): refused with ringoInvalidUsage saying so; host communicators have them "
       "always."},
      {"RINGO_GPU_ACROSS_HOSTS", "bool", "0",
       "1: GPU communicators may span hosts (their edges between hosts go through pinned host memory "
       "and the network proxy). Off until a GPU run has verified them (docs/gpu.md): a device kind of "
       "auto then uses host memory on every rank, and RINGO_DEVICE_CUDA across hosts is refused. Rank "
       "0's setting applies."},
      {"RINGO_GPU_WIRE", "bool", "0",
       "1: GPU communicators whose ranks span hosts honour the wire format (RINGO_WIRE, "
       "ringoCommSetWire; docs/wire.md), encoding, summing and decoding with kernels on the "
       "caller's stream. Off until a GPU run has verified it (docs/gpu.md): GPU communicators "
       "otherwise send their data uncompressed and ringoCommSetWire refuses them. Rank 0's "
       "setting applies."},
      {"RINGO_GPU_DEVICE_SCOPE", "bool", "0",
       "1: the counters of a FIFO whose two ends are kernels of one GPU in one process (ranks that are "
       "threads sharing a GPU) are ordered at GPU scope, not system scope, which need not reach past the "
       "GPU's L2; FIFOs with another process, a CPU thread (the network proxy), a NIC or another GPU at "
       "the other end keep system scope. Off until a GPU run has verified it (docs/gpu.md)."},
      {"RINGO_GPU_TRACK_REPLAYS", "bool", "0",
       "1: each launch captured into a CUDA graph also records an event as a replay reaches it, so that"
       " a later eager call on any stream runs after the replay and synchronize, destroy, finalize and "
       "abort wait for it; 0: replays are the caller's to order against other streams and to finish "
       "before destroying the communicator, as with NCCL. Off until a GPU run has verified it "
       "(docs/gpu.md)."},
      {"RINGO_NET_GPUDIRECT", "bool", "0",
       "1: a GPU ring edge between hosts over verbs keeps its slots in device memory, which "
       "the NIC reads and writes itself (GPUDirect RDMA through dma-buf or nvidia_peermem), "
       "where both ends have every piece (said at INFO); 0: such edges stage through pinned "
       "host memory."},
      {"RINGO_NET_BALANCE", "bool", "1",
       "1: where a communicator's ring channels across hosts spread over more than one network "
       "device, each collective of at least 256 KiB per channel is split over the channels in "
       "proportion to their rates, measured from the transfers themselves and agreed by the "
       "ranks every half second of traffic (said at INFO); 0: equal parts. Rank 0's setting "
       "applies to all; RINGO_DETERMINISTIC keeps equal parts."},
      {"RINGO_NET_STREAMS", "int", "2",
       "TCP streams per network connection; messages of 64 KiB and more are split across "
       "them."},
      {"RINGO_SOCKET_FAMILY", "enum", "auto",
       "Address family of the socket transport's connections: ipv4, ipv6, or auto (an "
       "interface's IPv4 address where it has one, else its IPv6 one)."},
      {"RINGO_HOSTID", "string", "",
       "Names this rank's host: ranks with equal values share one host (memory), ranks with "
       "different values are on different hosts. Default: the boot id, host name and network "
       "namespace."},
      {"RINGO_CHECK", "bool", "1",
       "1: every collective carries its signature (sequence number, collective, count, "
       "datatype, op, root) in the exchanges it makes (one-shot posts, direct posts, FIFO "
       "slots), so mismatched calls fail with ringoInvalidUsage naming both calls instead of "
       "hanging or corrupting data; 0: no comparison (rank 0's setting applies to all)."},
      {"RINGO_DETERMINISTIC", "bool", "0",
       "1: the bits of every host result depend only on the inputs and the rank count, not on "
       "the algorithm, channels, slot size or timing: every reduction combines the ranks' "
       "values in rank order, rounding as the ring does (rank 0's setting applies to all)."},
      {"RINGO_PROTO", "enum", "",
       "GPU communicators: simple forces the Simple protocol (data, fence, counter), ll the "
       "LL protocol (flag in every 8-byte store); unset: LL for small messages (up to one LL "
       "slice per rank), Simple otherwise. Host communicators ignore it."},
      {"RINGO_DEVICE", "enum", "auto",
       "Where communicators whose device kind is AUTO put their buffers (ringoCommInitAll, "
       "ringoCommInitRank, a ringoConfig_t left at RINGO_DEVICE_AUTO): host forces host "
       "memory even where a GPU is visible, cuda forces GPU memory (an error without a usable "
       "GPU), auto takes a GPU where one is visible. An explicit RINGO_DEVICE_HOST or "
       "RINGO_DEVICE_CUDA in ringoConfig_t wins over it."},
      {"RINGO_REQUIRE_GPU", "bool", "0",
       "1: where a GPU is expected, its absence is a failure, not a skip: the GPU tests fail "
       "when no CUDA device can be used (no device, a driver too old for this build, no CUDA "
       "in the build), and ringo-perf fails instead of measuring host memory. Set by "
       "scripts/gpu_check.sh, so that a GPU run cannot pass without touching the GPU."},
      {"RINGO_HOST_ISA", "enum", "auto",
       "Instruction set of the host executors' element loops (reductions and copies on host "
       "memory): generic (the compiler's baseline, SSE2 on x86-64), avx2 (AVX2 with F16C "
       "conversions of fp16), auto (the widest this CPU runs). Every set gives bit-identical "
       "results. Read at the first host collective of the process."},
      // Topology (topology/): where the graph comes from, and transport choice per ring edge.
      {"RINGO_TOPO_FILE", "string", "",
       "Use this topology instead of detecting the machine: an hwloc XML file (lstopo --of "
       "xml) or a Ringo dump (ringo-topo --dump), told apart by content."},
      {"RINGO_NVLINK_FILE", "string", "",
       "NVLink overlay used instead of NVML, one '<GPU bus id> <peer bus id | nvswitch> "
       "<links> <generation>' per line (for hwloc XML fixtures)."},
      {"RINGO_TOPO_DUMP_FILE", "string", "",
       "Write the detected topology graph and the rings chosen to this file (%h: host "
       "name); ringo-topo --load and RINGO_TOPO_FILE read it back."},
      {"RINGO_P2P_LEVEL", "enum", "",
       "Farthest path type over which two GPUs use peer-to-peer: NVL, PIX, PXB, PHB, NODE or "
       "SYS. Default: SYS when every CPU is AMD, PXB otherwise."},
      {"RINGO_P2P_DISABLE", "bool", "0",
       "1: never use peer-to-peer between GPU ranks (shared memory instead)."},
      {"RINGO_SHM_DISABLE", "bool", "0",
       "1: never use shared memory between ranks of one host (the network transport instead)."},
      {"RINGO_TRACE_BUFFER", "int", "2000",
       "Operations each communicator's flight recorder keeps (its last ones: arguments, group, when "
       "called, started and finished, state); 0 turns the recorder off."},
      {"RINGO_TRACE_GPU_TIMES", "bool", "0",
       "1: GPU communicators time each recorded operation on the GPU (two CUDA events around its launch), "
       "so that the flight record shows when it started and finished there; 0 records the enqueue only. "
       "Off until a GPU run has verified it (docs/gpu.md)."},
      {"RINGO_TRACE_DIR", "string", "",
       "Folder where the flight recorders are written as JSON lines, one file per rank and "
       "communicator, on a fault, a timeout or an abort, on ringoCommDumpTrace, and on "
       "RINGO_TRACE_SIGNAL; unset: nothing is written. ringo-doctor reads the folder."},
      {"RINGO_TRACE_SIGNAL", "int", "0",
       "A signal number (10 is SIGUSR1 on Linux) on which every communicator of the process writes "
       "its record to RINGO_TRACE_DIR (from a thread of Ringo's, never inside the handler); 0: none."},
      {"RINGO_STALL_MS", "int", "10000",
       "A wait on a peer that lasts this many milliseconds asks every rank of the communicator where "
       "it is (over the control connections) and logs, once on every rank, which ranks have not "
       "entered the collective and where they are; the timeout's error carries it too. 0: never."},
      {"RINGO_STALL_ABORT", "bool", "0",
       "1: a wait fails with ringoTimeout right after its stall diagnosis instead of waiting on until "
       "RINGO_TIMEOUT_MS."},
      {"RINGO_CONTROL_TIMEOUT_MS", "int", "1000",
       "How long a rank is given to answer a control request (the stall diagnosis, the failure "
       "agreement) before it is reported silent."},
      // CUDA's own, which Ringo reads and may set.
      {"CUDA_DEVICE_MAX_CONNECTIONS", "int", "",
       "CUDA: hardware work queues of each device context (1 to 32; CUDA's default is 8), read "
       "by the driver when it creates the context. Streams beyond it share queues, and kernels "
       "in one queue wait for each other, so ranks of one process that share a GPU need one "
       "each: when it is unset Ringo sets it to 32 before its own first CUDA call, which "
       "helps only if that call comes before the process's first context, and not where an "
       "MPS control daemon is running (the MPS server's pool of queues would run out after a "
       "few clients)."},
      {"CUDA_MPS_PIPE_DIRECTORY", "string", "/tmp/nvidia-mps",
       "CUDA MPS: the folder of the control daemon's pipes; where it holds the daemon's "
       "'control' pipe, this process will be an MPS client and Ringo leaves "
       "CUDA_DEVICE_MAX_CONNECTIONS alone."},
      // Launchers, read by the tools to find rank, size and rendezvous.
      {"RANK", "int", "", "torchrun: global rank."},
      {"WORLD_SIZE", "int", "", "torchrun: number of ranks."},
      {"LOCAL_RANK", "int", "", "torchrun: rank on this host."},
      {"MASTER_ADDR", "string", "", "torchrun: rendezvous host (Ringo uses MASTER_PORT+1)."},
      {"MASTER_PORT", "int", "", "torchrun: rendezvous port."},
      {"OMPI_COMM_WORLD_RANK", "int", "", "Open MPI: global rank."},
      {"OMPI_COMM_WORLD_SIZE", "int", "", "Open MPI: number of ranks."},
      {"OMPI_COMM_WORLD_LOCAL_RANK", "int", "", "Open MPI: rank on this host."},
      {"OMPI_COMM_WORLD_LOCAL_SIZE", "int", "", "Open MPI: ranks on this host."},
      {"PMIX_NAMESPACE", "string", "", "Open MPI (PMIx): the job's name, unique per launch."},
      {"SLURM_PROCID", "int", "", "Slurm: global rank."},
      {"SLURM_NTASKS", "int", "", "Slurm: number of ranks."},
      {"SLURM_LOCALID", "int", "", "Slurm: rank on this host."},
      {"SLURM_NNODES", "int", "", "Slurm: number of hosts."},
      {"SLURM_JOB_ID", "string", "", "Slurm: job id."},
      {"SLURM_STEP_ID", "string", "", "Slurm: step id."},
  };
  return *kTable;
}

bool ParseInt(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == nullptr || *end != '\0') return false;
  *out = v;
  return true;
}

Config* Load() {
  auto* config = new Config();
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const EnvVarInfo& var : Table()) {
    auto it = env.find(var.name);
    if (it != env.end()) config->raw[var.name] = it->second;
  }
  std::string errors;
  auto int_var = [&](const char* name, int64_t* out, int64_t min_value,
                     int64_t max_value = std::numeric_limits<int64_t>::max()) {
    auto v = config->Get(name);
    if (!v) return;
    int64_t parsed = 0;
    if (!ParseInt(*v, &parsed) || parsed < min_value || parsed > max_value) {
      errors += std::string(errors.empty() ? "" : "; ") + name + "='" + *v + "' is not an integer " +
                (max_value == std::numeric_limits<int64_t>::max()
                     ? ">= " + std::to_string(min_value)
                     : "from " + std::to_string(min_value) + " to " + std::to_string(max_value));
      return;
    }
    *out = parsed;
  };
  if (auto level = config->Get("RINGO_DEBUG")) {
    if (*level == "NONE") config->log_level = LogLevel::kNone;
    else if (*level == "WARN") config->log_level = LogLevel::kWarn;
    else if (*level == "INFO") config->log_level = LogLevel::kInfo;
    else if (*level == "TRACE") config->log_level = LogLevel::kTrace;
    else errors += "RINGO_DEBUG='" + *level + "' is not NONE, WARN, INFO or TRACE";
  }
  config->log_file = config->Get("RINGO_DEBUG_FILE").value_or("");
  int_var("RINGO_TIMEOUT_MS", &config->timeout_ms, 1);
  config->comm_id = config->Get("RINGO_COMM_ID").value_or("");
  config->socket_ifname = config->Get("RINGO_SOCKET_IFNAME").value_or("");
  int_var("RINGO_SLOT_BYTES", &config->slot_bytes, 0);
  if (config->slot_bytes != 0 && (config->slot_bytes < 64 || config->slot_bytes % 64 != 0)) {
    errors += std::string(errors.empty() ? "" : "; ") + "RINGO_SLOT_BYTES=" +
              std::to_string(config->slot_bytes) + " is not a multiple of 64 of at least 64";
    config->slot_bytes = 0;
  }
  int_var("RINGO_NCHANNELS", &config->nchannels, 0);
  int_var("RINGO_NET_STREAMS", &config->net_streams, 1);
  config->ib_hca = config->Get("RINGO_IB_HCA").value_or("");
  int_var("RINGO_IB_GID_INDEX", &config->ib_gid_index, -1, 255);
  int_var("RINGO_IB_TIMEOUT", &config->ib_timeout, 1, 31);
  int_var("RINGO_IB_RETRY_CNT", &config->ib_retry_cnt, 0, 7);
  int_var("RINGO_IB_QPS_PER_CONNECTION", &config->ib_qps_per_connection, 1, 16);
  config->host_id = config->Get("RINGO_HOSTID").value_or("");
  int_var("RINGO_SPIN_COUNT", &config->spin_count, -1);
  int_var("RINGO_YIELD_COUNT", &config->yield_count, -1);
  int_var("RINGO_CROWDED_WAIT", &config->crowded_wait, -1);
  if (config->crowded_wait > 1) {
    errors += std::string(errors.empty() ? "" : "; ") + "RINGO_CROWDED_WAIT=" +
              std::to_string(config->crowded_wait) + " is not -1, 0 or 1";
    config->crowded_wait = -1;
  }
  auto bool_var = [&](const char* name, bool* out) {
    auto v = config->Get(name);
    if (!v) return;
    if (*v == "1" || *v == "0") {
      *out = (*v == "1");
    } else {
      errors += std::string(errors.empty() ? "" : "; ") + name + "='" + *v + "' is not 0 or 1";
    }
  };
  bool_var("RINGO_CHECK", &config->check);
  bool_var("RINGO_DETERMINISTIC", &config->deterministic);
  bool_var("RINGO_REQUIRE_GPU", &config->require_gpu);
  int_var("RINGO_TRACE_BUFFER", &config->trace_buffer, 0, int64_t{1} << 24);
  bool_var("RINGO_TRACE_GPU_TIMES", &config->trace_gpu_times);
  config->trace_dir = config->Get("RINGO_TRACE_DIR").value_or("");
  int_var("RINGO_TRACE_SIGNAL", &config->trace_signal, 0, 64);
  int_var("RINGO_STALL_MS", &config->stall_ms, 0);
  bool_var("RINGO_STALL_ABORT", &config->stall_abort);
  int_var("RINGO_CONTROL_TIMEOUT_MS", &config->control_timeout_ms, 1);
  bool_var("RINGO_IB_DISABLE", &config->ib_disable);
  bool_var("RINGO_NET_GPUDIRECT", &config->net_gpudirect);
  bool_var("RINGO_NET_BALANCE", &config->net_balance);
  bool_var("RINGO_GPU_ACROSS_HOSTS", &config->gpu_across_hosts);
  bool_var("RINGO_GPU_WIRE", &config->gpu_wire);
  bool_var("RINGO_GPU_ELASTIC", &config->gpu_elastic);
  bool_var("RINGO_GPU_TRACK_REPLAYS", &config->gpu_track_replays);
  bool_var("RINGO_GPU_DEVICE_SCOPE", &config->gpu_device_scope);
  // CUDA's, not Ringo's: not validated (CUDA itself ignores a bad value).
  if (auto n = config->GetInt("CUDA_DEVICE_MAX_CONNECTIONS")) {
    config->cuda_device_max_connections = *n >= 1 ? *n : 0;
  }
  // Enumerations: the value if it is one of `allowed`, else "" and an error
  // that lists them.
  auto enum_var = [&](const char* name, std::string* out, std::initializer_list<const char*> allowed) {
    *out = config->Get(name).value_or("");
    if (out->empty()) return;
    std::string listed;
    for (const char* a : allowed) {
      if (*out == a) return;
      listed += std::string(listed.empty() ? "" : ", ") + a;
    }
    errors += std::string(errors.empty() ? "" : "; ") + name + "='" + *out + "' is not one of " + listed;
    out->clear();
  };
  enum_var("RINGO_ALGO", &config->algo, {"ring", "oneshot", "direct", "doubling"});
  enum_var("RINGO_WIRE", &config->wire, {"none", "bf16", "fp16", "e4m3", "fp8", "e5m2"});
  enum_var("RINGO_WIRE_ENGINE", &config->wire_engine, {"pipelined", "staged"});
  enum_var("RINGO_NET", &config->net, {"socket", "ib", "auto"});
  enum_var("RINGO_SOCKET_FAMILY", &config->socket_family, {"ipv4", "ipv6", "auto"});
  enum_var("RINGO_PROTO", &config->proto, {"simple", "ll"});
  enum_var("RINGO_DEVICE", &config->device, {"host", "cuda", "auto"});
  enum_var("RINGO_HOST_ISA", &config->host_isa, {"generic", "avx2", "auto"});
  if (!errors.empty()) config->parse_status = InvalidArgument("bad environment: " + errors);
  return config;
}

std::atomic<Config*> g_config{nullptr};
std::mutex g_config_mu;

}  // namespace

const std::vector<EnvVarInfo>& DeclaredEnvVars() { return Table(); }

int ExportCudaDeviceMaxConnections(int value) {
  constexpr char kName[] = "CUDA_DEVICE_MAX_CONNECTIONS";
  constexpr int kCudaDefault = 8;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const char* now = std::getenv(kName);
  if (value > 0 && (now == nullptr || *now == '\0')) {
    setenv(kName, std::to_string(value).c_str(), 0);
    now = std::getenv(kName);
  }
  int64_t parsed = 0;
  if (now == nullptr || !ParseInt(now, &parsed) || parsed < 1) return kCudaDefault;
  return static_cast<int>(parsed > 32 ? 32 : parsed);
}

bool MpsControlPresent(const Config& config) {
  const std::string dir = config.Get("CUDA_MPS_PIPE_DIRECTORY").value_or("/tmp/nvidia-mps");
  struct stat st;
  return !dir.empty() && stat((dir + "/control").c_str(), &st) == 0;
}

std::optional<std::string> Config::Get(const std::string& name) const {
  bool declared = false;
  for (const EnvVarInfo& var : Table()) declared = declared || name == var.name;
  RINGO_CHECK(declared, "environment variable " + name + " is not declared in base/config.cc");
  auto it = raw.find(name);
  if (it == raw.end()) return std::nullopt;
  return it->second;
}

std::optional<int64_t> Config::GetInt(const std::string& name) const {
  auto v = Get(name);
  int64_t out = 0;
  if (!v || !ParseInt(*v, &out)) return std::nullopt;
  return out;
}

const Config& GetConfig() {
  Config* c = g_config.load(std::memory_order_acquire);
  if (c != nullptr) return *c;
  std::lock_guard<std::mutex> lock(g_config_mu);
  c = g_config.load(std::memory_order_relaxed);
  if (c == nullptr) {
    c = Load();
    g_config.store(c, std::memory_order_release);
  }
  return *c;
}

void ReloadConfigForTesting() {
  std::lock_guard<std::mutex> lock(g_config_mu);
  g_config.store(Load(), std::memory_order_release);  // the old snapshot is kept alive
}

}  // namespace ringo::base
