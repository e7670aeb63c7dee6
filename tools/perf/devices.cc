#include "tools/perf/devices.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "base/check.h"

namespace ringo::perf {

base::Status CheckDeviceCount(int nranks, int ranks_per_gpu, int visible_devices) {
  RINGO_CHECK(ranks_per_gpu >= 1);
  const int64_t room = int64_t{ranks_per_gpu} * visible_devices;
  if (nranks <= room) return base::Status();
  const int64_t needed = (int64_t{nranks} + visible_devices - 1) / std::max(visible_devices, 1);
  std::string message = std::to_string(nranks) + " ranks at " + std::to_string(ranks_per_gpu) +
                        " per GPU need " +
                        std::to_string((int64_t{nranks} + ranks_per_gpu - 1) / ranks_per_gpu) +
                        " GPUs, but " + std::to_string(visible_devices) + " are visible: ";
  if (visible_devices > 0) {
    message += "pass --ranks-per-gpu " + std::to_string(needed) +
               " to share GPUs (several ranks on one GPU are supported), or ";
  }
  return base::InvalidUsage(message + "--host for host memory");
}

int RankDevice(int rank, int ranks_per_gpu, int visible_devices) {
  RINGO_CHECK(ranks_per_gpu >= 1 && visible_devices >= 1 && rank >= 0);
  return (rank / ranks_per_gpu) % visible_devices;
}

}  // namespace ringo::perf
