#include "topology/link_speed.h"

#include "topology/graph.h"

namespace ringo::topology {

double PcieGbps(double raw_gbps) {
  if (raw_gbps <= 0) raw_gbps = kDefaultPcieRawGBps;
  return RoundGbps(raw_gbps * kLinkEfficiency);
}

double NvlinkRawGbpsPerLink(int generation) {
  switch (generation) {
    case 1:
      return 20.0;
    case 2:
    case 3:
    case 4:
      return 25.0;
    case 5:
      return 50.0;
    default:
      return 25.0;
  }
}

double NvlinkGbps(int count, int generation) {
  return RoundGbps(count * NvlinkRawGbpsPerLink(generation) * kLinkEfficiency);
}

double SmpGbps(std::string_view cpu_vendor) {
  if (cpu_vendor == "GenuineIntel") return 22.0;
  return 16.0;
}

}  // namespace ringo::topology
