#include "transport/net/choice.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <mutex>
#include <new>

#include "base/logging.h"
#include "transport/net/ib/net.h"
#include "transport/net/socket/net.h"

namespace ringo::transport::net {
namespace {

struct Made {
  bool tried = false;
  Net* net = nullptr;  // never freed: connections may outlive any owner
  base::Status why;
};

std::mutex g_mu;
Made g_nets[2];  // GUARDED_BY(g_mu), by NetKind

// A forked child cannot use its parent's verbs contexts or sockets: it
// makes its own Nets (the parent's are left to the parent).
void ForgetNetsInChild() {
  new (&g_mu) std::mutex();
  for (Made& m : g_nets) m = Made();
}

[[maybe_unused]] const int g_atfork = pthread_atfork(nullptr, nullptr, &ForgetNetsInChild);

}  // namespace

const char* NetKindName(NetKind kind) { return kind == NetKind::kIb ? "ib" : "socket"; }

base::StatusOr<Net*> ProcessNet(const base::Config& config, NetKind kind, int numa) {
  std::lock_guard<std::mutex> lock(g_mu);
  Made& m = g_nets[static_cast<int>(kind)];
  if (!m.tried) {
    m.tried = true;
    base::StatusOr<std::unique_ptr<Net>> made =
        kind == NetKind::kIb ? MakeIbNet(IbNetOptionsFromConfig(config, numa))
                             : MakeSocketNet(SocketNetOptionsFromConfig(config));
    if (made.ok()) {
      auto props = (*made)->Properties(0);
      RINGO_LOG(INFO) << "network transport: " << (*made)->name() << ", " << (*made)->DeviceCount()
                      << " device(s)" << (props.ok() ? ", first " + props->name : std::string());
      m.net = made->release();
    } else {
      m.why = made.status();
    }
  }
  if (m.net == nullptr) return m.why;
  return m.net;
}

uint64_t VerbsFabric(const base::Config& config, int numa) {
  if (config.net == "socket" || config.ib_disable) return 0;
  auto net = ProcessNet(config, NetKind::kIb, numa);
  if (!net.ok()) {
    static std::once_flag said;
    std::call_once(said, [&] {
      RINGO_LOG(INFO) << "no verbs transport, hosts are joined by TCP: " << net.status().message();
    });
    return 0;
  }
  auto props = (*net)->Properties(0);
  return props.ok() ? props->fabric : 0;
}

base::StatusOr<NetKind> ChooseNet(const base::Config& config, uint64_t mine, uint64_t theirs, int self_rank,
                                  int peer_rank) {
  if (mine != 0 && mine == theirs) return NetKind::kIb;
  if (config.net == "ib") {
    const std::string why = mine == 0 ? "this rank has no usable verbs port"
                            : theirs == 0 ? "rank " + std::to_string(peer_rank) + " has no usable verbs port"
                                          : "their verbs ports are on different fabrics";
    return base::InvalidUsage("RINGO_NET=ib, but rank " + std::to_string(self_rank) + " and rank " +
                              std::to_string(peer_rank) + " cannot use verbs: " + why);
  }
  return NetKind::kSocket;
}

std::vector<int> DevicesNearFirst(const Net& net, int numa,
                                  const std::function<int(const std::string& pci_path)>& node_of) {
  const int n = std::max(1, net.DeviceCount());
  auto first = net.Properties(0);
  const uint64_t fabric = first.ok() ? first->fabric : 0;
  std::vector<int> order;
  std::vector<int> rank(n, 2);
  for (int d = 0; d < n; ++d) {
    auto props = net.Properties(d);
    // Only devices that reach what device 0 reaches (verbs ports of one
    // fabric; every socket interface).
    if (d > 0 && props.ok() && fabric != 0 && props->fabric != 0 && props->fabric != fabric) continue;
    order.push_back(d);
    if (!props.ok() || props->pci_path.empty() || numa < 0) continue;
    int node = -1;
    if (node_of) {
      node = node_of(props->pci_path);
    } else if (std::FILE* f = std::fopen((props->pci_path + "/numa_node").c_str(), "r")) {
      if (std::fscanf(f, "%d", &node) != 1) node = -1;
      std::fclose(f);
    }
    if (node >= 0) rank[d] = node == numa ? 0 : 1;
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return rank[a] < rank[b]; });
  return order;
}

}  // namespace ringo::transport::net
