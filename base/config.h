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
  std::string algo;                      // RINGO_ALGO: "", "ring", "oneshot" or "direct"
  bool check = true;                     // RINGO_CHECK
  bool deterministic = false;            // RINGO_DETERMINISTIC
  std::string proto;                     // RINGO_PROTO: "", "simple" or "ll" (GPU communicators)
  std::string device;                    // RINGO_DEVICE: "", "auto", "host" or "cuda"
  std::string host_isa;                  // RINGO_HOST_ISA: "", "auto", "generic" or "avx2"
  std::string net;                       // RINGO_NET: "", "auto", "socket" or "ib"
  int64_t net_streams = 2;               // RINGO_NET_STREAMS
  std::string socket_family;             // RINGO_SOCKET_FAMILY: "", "auto", "ipv4" or "ipv6"
  std::string host_id;                   // RINGO_HOSTID ("": boot id, host name, network namespace)

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

}  // namespace ringo::base

#endif  // RINGO_BASE_CONFIG_H_
