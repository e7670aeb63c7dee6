#include "collectives/plan/settings.h"

#include <algorithm>

namespace ringo::collectives {

Algorithm ParseAlgorithm(const std::string& name) {
  if (name == "ring") return Algorithm::kRing;
  if (name == "oneshot") return Algorithm::kOneShot;
  if (name == "direct") return Algorithm::kDirect;
  if (name == "doubling") return Algorithm::kDoubling;
  return Algorithm::kAuto;
}

ProtoChoice ParseProto(const std::string& name) {
  if (name == "simple") return ProtoChoice::kSimple;
  if (name == "ll") return ProtoChoice::kLL;
  return ProtoChoice::kAuto;
}

CommSettings SettingsFrom(const base::Config& config) {
  CommSettings s;
  s.shared.nchannels = static_cast<int32_t>(std::clamp<int64_t>(config.nchannels, 0, 64));
  s.shared.algorithm = ParseAlgorithm(config.algo);
  s.shared.proto = ParseProto(config.proto);
  s.shared.check = config.check ? 1 : 0;
  s.shared.deterministic = config.deterministic ? 1 : 0;
  s.shared.gpu_across_hosts = config.gpu_across_hosts ? 1 : 0;
  s.shared.slot_bytes = config.slot_bytes;
  s.shared.net_balance = config.net_balance ? 1 : 0;
  s.shared.gpu_wire = config.gpu_wire ? 1 : 0;
  s.local.spin_count = config.spin_count;
  s.local.yield_count = config.yield_count;
  s.local.crowded_wait = config.crowded_wait;
  s.local.gpu_track_replays = config.gpu_track_replays;
  s.local.gpu_device_scope = config.gpu_device_scope;
  s.local.wire_staged = config.wire_engine == "staged";
  return s;
}

base::Status ValidateShared(const std::vector<SharedSettings>& all) {
  for (size_t r = 0; r < all.size(); ++r) {
    const SharedSettings& s = all[r];
    auto bad = [&](const std::string& what) {
      return base::RemoteError("rank " + std::to_string(r) + " sent " + what)
          .WithOrigin(static_cast<int>(r), "malformed settings");
    };
    if (s.nchannels < 0 || s.nchannels > 64) return bad(std::to_string(s.nchannels) + " channels");
    if (s.slot_bytes < 0 || s.slot_bytes % 64 != 0 || s.slot_bytes > (int64_t{1} << 30)) {
      return bad("a slot size of " + std::to_string(s.slot_bytes) + " bytes");
    }
    const auto algo = static_cast<int32_t>(s.algorithm);
    const auto proto = static_cast<int32_t>(s.proto);
    if (algo < 0 || algo > static_cast<int32_t>(Algorithm::kDoubling) || proto < 0 || proto > 2) {
      return bad("an unknown algorithm or protocol");
    }
    if ((s.check != 0 && s.check != 1) || (s.deterministic != 0 && s.deterministic != 1) ||
        (s.gpu_across_hosts != 0 && s.gpu_across_hosts != 1) || (s.net_balance != 0 && s.net_balance != 1) ||
        (s.gpu_wire != 0 && s.gpu_wire != 1)) {
      return bad("a setting that is neither 0 nor 1");
    }
  }
  return base::OkStatus();
}

}  // namespace ringo::collectives
