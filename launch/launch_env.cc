#include "launch/launch_env.h"

#include <cstdint>
#include <optional>
#include <tuple>
#include <utility>

namespace ringo::launch {
namespace {

using base::Config;
using base::InvalidArgument;
using base::StatusOr;

// Rank and size from a launcher's pair of variables; nullopt when neither is set.
StatusOr<std::optional<std::pair<int, int>>> RankAndSize(const Config& config, const char* rank_var,
                                                         const char* size_var) {
  const auto rank_text = config.Get(rank_var);
  const auto size_text = config.Get(size_var);
  if (!rank_text && !size_text) return std::optional<std::pair<int, int>>();
  const auto rank = config.GetInt(rank_var);
  const auto size = config.GetInt(size_var);
  if (!rank || !size || *size < 1 || *rank < 0 || *rank >= *size || *size > (1 << 24)) {
    return InvalidArgument(std::string(rank_var) + "='" + rank_text.value_or("") + "' and " +
                           size_var + "='" + size_text.value_or("") +
                           "' are not a rank and a rank count");
  }
  return std::optional<std::pair<int, int>>(
      std::make_pair(static_cast<int>(*rank), static_cast<int>(*size)));
}

StatusOr<std::string> MasterCommId(const Config& config) {
  const std::string addr = *config.Get("MASTER_ADDR");
  const auto port = config.GetInt("MASTER_PORT");
  if (!port || *port < 1 || *port > 65534) {
    return InvalidArgument("MASTER_PORT='" + config.Get("MASTER_PORT").value_or("") +
                           "' is not a port from 1 to 65534");
  }
  // torchrun's own store owns MASTER_PORT; Ringo's root listens on the next one.
  const std::string host = addr.find(':') != std::string::npos ? "[" + addr + "]" : addr;
  return host + ":" + std::to_string(*port + 1);
}

}  // namespace

StatusOr<LaunchEnv> DetectRanks(const Config& config) {
  LaunchEnv env;
  ASSIGN_OR_RETURN(auto ompi, RankAndSize(config, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"));
  if (ompi) {
    env.launcher = "Open MPI";
    std::tie(env.rank, env.size) = *ompi;
    env.all_local = config.GetInt("OMPI_COMM_WORLD_LOCAL_SIZE") == int64_t{env.size};
    env.job_name = config.Get("PMIX_NAMESPACE").value_or("");
    return env;
  }
  ASSIGN_OR_RETURN(auto torchrun, RankAndSize(config, "RANK", "WORLD_SIZE"));
  if (torchrun) {
    env.launcher = "torchrun";
    std::tie(env.rank, env.size) = *torchrun;
    return env;
  }
  ASSIGN_OR_RETURN(auto slurm, RankAndSize(config, "SLURM_PROCID", "SLURM_NTASKS"));
  if (slurm) {
    env.launcher = "Slurm";
    std::tie(env.rank, env.size) = *slurm;
    env.all_local = config.GetInt("SLURM_NNODES") == int64_t{1};
    if (auto job = config.Get("SLURM_JOB_ID")) {
      // The step tells apart two sruns of one batch job; a batch script has none.
      env.job_name = *job + "." + config.Get("SLURM_STEP_ID").value_or("batch");
    }
  }
  return env;
}

StatusOr<LaunchEnv> DetectLaunch(const Config& config) {
  ASSIGN_OR_RETURN(LaunchEnv env, DetectRanks(config));
  if (env.size == 1) {
    env.rendezvous = Rendezvous::kSingle;
  } else if (!config.comm_id.empty()) {
    env.rendezvous = Rendezvous::kCommId;
    env.comm_id = config.comm_id;
  } else if (config.Get("MASTER_ADDR") && config.Get("MASTER_PORT")) {
    env.rendezvous = Rendezvous::kMaster;
    ASSIGN_OR_RETURN(env.comm_id, MasterCommId(config));
  } else if (env.all_local && !env.job_name.empty()) {
    env.rendezvous = Rendezvous::kIdFile;
  } else {
    return InvalidArgument(
        "the " + std::to_string(env.size) + " ranks started by " + env.launcher +
        " may run on several hosts, so they cannot meet through a local file: set "
        "RINGO_COMM_ID=host:port (rank 0's host and a free port) for every rank");
  }
  return env;
}

StatusOr<LaunchEnv> DetectLaunch() {
  const Config& config = base::GetConfig();
  RETURN_IF_ERROR(config.parse_status);
  return DetectLaunch(config);
}

std::string IdFilePath(const std::string& job_name, const std::string& program) {
  std::string safe = job_name;
  for (char& c : safe) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    if (!keep) c = '_';
  }
  return "/tmp/" + program + "-" + safe + ".id";
}

}  // namespace ringo::launch
