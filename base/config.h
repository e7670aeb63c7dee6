// The one registry of environment variables. Every variable Ringo reads,
// including the launchers' (torchrun, Open MPI, Slurm), is declared in
// config.cc with its type, default and help; it is read once into an immutable
// snapshot. No getenv anywhere else.
//
// Thread safety: GetConfig() is thread-safe; the snapshot never changes
// (ReloadConfigForTesting installs a new one; old ones stay valid).
#ifndef RINGO_BASE_CONFIG_H_
#define RINGO_BASE_CONFIG_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace ringo::base {

enum class LogLevel : int { kNone = 0, kWarn = 1, kInfo = 2, kTrace = 3 };

struct EnvVarInfo {
  const char* name;
  const char* type;           // "int", "bool", "string", "enum"
  const char* default_value;  // as text; "" when unset means "not set"
  const char* help;
};

// Every declared variable, in declaration order (for `ringo-topo --env`).
const std::vector<EnvVarInfo>& DeclaredEnvVars();

struct Config {
  LogLevel log_level = LogLevel::kWarn;  // RINGO_DEBUG
  std::string log_file;                  // RINGO_DEBUG_FILE
  int64_t timeout_ms = 300000;           // RINGO_TIMEOUT_MS
  std::string comm_id;                   // RINGO_COMM_ID
  std::string socket_ifname;             // RINGO_SOCKET_IFNAME
  int64_t slot_bytes = 0;                // RINGO_SLOT_BYTES (0: chosen by the planner)
  int64_t nchannels = 0;                 // RINGO_NCHANNELS (0: chosen by the planner)
  int64_t spin_count = -1;               // RINGO_SPIN_COUNT (-1: chosen at init)
  int64_t yield_count = -1;              // RINGO_YIELD_COUNT (-1: chosen at init)
  int64_t crowded_wait = -1;             // RINGO_CROWDED_WAIT (-1: when ranks outnumber cores)
  std::string algo;                      // RINGO_ALGO: "", "ring", "oneshot", "direct" or "doubling"
  std::string wire;                      // RINGO_WIRE: "", "none", "bf16", "fp16", "e4m3", "fp8", "e5m2"
  std::string wire_engine;               // RINGO_WIRE_ENGINE: "", "pipelined" or "staged"
  bool check = true;                     // RINGO_CHECK
  bool deterministic = false;            // RINGO_DETERMINISTIC
  std::string proto;                     // RINGO_PROTO: "", "simple" or "ll" (GPU communicators)
  std::string device;                    // RINGO_DEVICE: "", "auto", "host" or "cuda"
  std::string host_isa;                  // RINGO_HOST_ISA: "", "auto", "generic" or "avx2"
  std::string net;                       // RINGO_NET: "", "auto", "socket" or "ib"
  int64_t net_streams = 2;               // RINGO_NET_STREAMS
  bool ib_disable = false;               // RINGO_IB_DISABLE
  bool net_gpudirect = false;            // RINGO_NET_GPUDIRECT
  bool net_balance = true;               // RINGO_NET_BALANCE
  bool gpu_wire = false;                 // RINGO_GPU_WIRE
  bool gpu_across_hosts = false;         // RINGO_GPU_ACROSS_HOSTS
  bool gpu_elastic = false;              // RINGO_GPU_ELASTIC
  bool gpu_track_replays = false;        // RINGO_GPU_TRACK_REPLAYS
  bool gpu_device_scope = false;         // RINGO_GPU_DEVICE_SCOPE
  std::string ib_hca;                    // RINGO_IB_HCA
  int64_t ib_gid_index = -1;             // RINGO_IB_GID_INDEX (-1: RoCE v2 IPv4-mapped)
  int64_t ib_timeout = 18;               // RINGO_IB_TIMEOUT
  int64_t ib_retry_cnt = 7;              // RINGO_IB_RETRY_CNT
  int64_t ib_qps_per_connection = 1;     // RINGO_IB_QPS_PER_CONNECTION
  std::string socket_family;             // RINGO_SOCKET_FAMILY: "", "auto", "ipv4" or "ipv6"
  std::string host_id;                   // RINGO_HOSTID ("": boot id, host name, network namespace)
  bool require_gpu = false;              // RINGO_REQUIRE_GPU
  int64_t trace_buffer = 2000;           // RINGO_TRACE_BUFFER: operations each communicator records (0: off)
  bool trace_gpu_times = false;          // RINGO_TRACE_GPU_TIMES: GPU operations timed by events
  std::string trace_dir;                 // RINGO_TRACE_DIR: where records are written ("": nowhere)
  int64_t trace_signal = 0;              // RINGO_TRACE_SIGNAL: the signal that dumps every record (0: none)
  int64_t stall_ms = 10000;              // RINGO_STALL_MS: a wait this long is diagnosed (0: never)
  bool stall_abort = false;              // RINGO_STALL_ABORT: fail the wait right after the diagnosis
  int64_t control_timeout_ms = 1000;     // RINGO_CONTROL_TIMEOUT_MS: how long a rank is given to answer
  int64_t cuda_device_max_connections = 0;  // CUDA_DEVICE_MAX_CONNECTIONS (0: unset)

  // Every declared variable that is set, by name.
  std::map<std::string, std::string> raw;
  // Errors met while parsing (a bad number, an unknown level); OK if none.
  Status parse_status;

  // The value of a declared variable if it is set. Aborts on an undeclared name.
  std::optional<std::string> Get(const std::string& name) const;
  // As Get, parsed as a base-10 integer; nullopt if unset or not a number.
  std::optional<int64_t> GetInt(const std::string& name) const;
};

// The process's snapshot, read from the environment on first use.
const Config& GetConfig();

// Reads the environment again into a new snapshot (tests that set variables).
void ReloadConfigForTesting();

// CUDA_DEVICE_MAX_CONNECTIONS as the CUDA driver reads it when it creates a
// device context: sets it to `value` first if it is unset and `value` > 0 (the one variable
// Ringo writes; base/cuda.cc calls this before its first CUDA call), and
// returns the value in effect, capped at CUDA's 32 (CUDA's default 8 when it
// holds no positive number). The snapshot of GetConfig() keeps what the
// environment held when it was read. Thread-safe with respect to itself.
int ExportCudaDeviceMaxConnections(int value);

// Whether an MPS control daemon's pipe is in CUDA_MPS_PIPE_DIRECTORY (default
// /tmp/nvidia-mps): contexts this process creates will be MPS clients.
bool MpsControlPresent(const Config& config);

}  // namespace ringo::base

#endif  // RINGO_BASE_CONFIG_H_
