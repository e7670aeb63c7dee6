// Bandwidth constants of the topology graph, in GB/s (10^9 B/s) per direction,
// and where each comes from. All are "usable" figures: the raw signalling rate
// times kLinkEfficiency, the share a bulk copy achieves after protocol
// overhead (PCIe TLP headers and flow control; NVLink flits). 0.8 matches
// what cudaMemcpy peer copies reach (about 25 GB/s on PCIe Gen4 x16, 20 GB/s
// per NVLink3 link) and the per-link figures NCCL's search uses.
#ifndef RINGO_TOPOLOGY_LINK_SPEED_H_
#define RINGO_TOPOLOGY_LINK_SPEED_H_

#include <string_view>

namespace ringo::topology {

inline constexpr double kLinkEfficiency = 0.8;

// PCIe: hwloc's linkspeed attribute is the raw rate in GB/s (lanes x GT/s x
// encoding / 8): Gen3 x16 15.75, Gen4 x16 31.51, Gen5 x16 63.02. Where hwloc
// reports none (a VM, a container without sysfs, a hand-written XML), Gen4
// x16 is assumed.
inline constexpr double kDefaultPcieRawGBps = 31.507692;
// Usable bandwidth of a PCIe link of raw rate `raw_gbps` (0: unknown).
double PcieGbps(double raw_gbps);

// NVLink, raw per link per direction, from NVIDIA's aggregate figures:
// gen1 (P100) 160 GB/s bidirectional over 4 links = 20; gen2 (V100) 300/6/2 =
// 25; gen3 (A100) 600/12/2 = 25; gen4 (H100) 900/18/2 = 25; gen5 (B200)
// 1800/18/2 = 50. Unknown generations count as gen4.
double NvlinkRawGbpsPerLink(int generation);
// Usable bandwidth of `count` bonded links of one generation.
double NvlinkGbps(int count, int generation);

// Between NUMA nodes (the path of a PCIe peer copy through the CPUs), usable,
// as NCCL measures it: AMD (Infinity Fabric / xGMI) 16; Intel (UPI, Sapphire
// Rapids) 22; anything else 16.
double SmpGbps(std::string_view cpu_vendor);

// Inside a CPU (host bridge to its NUMA node, one GPU to itself): not a limit.
inline constexpr double kLocalGbps = 5000.0;

// A NIC's network bandwidth: its PCIe link's usable bandwidth (a ConnectX-6
// HDR 200 Gb/s on Gen4 x16: 25 GB/s; a ConnectX-7 NDR 400 Gb/s on Gen5 x16:
// 50 GB/s), or this where the link speed is unknown (100 Gb/s Ethernet).
inline constexpr double kDefaultNicGbps = 12.5;

}  // namespace ringo::topology

#endif  // RINGO_TOPOLOGY_LINK_SPEED_H_
