#include "transport/net/registry.h"

#include <mutex>

#include "base/logging.h"
#include "transport/net/socket_net.h"

namespace ringo::transport::net {

base::StatusOr<Net*> ProcessNet(const base::Config& config) {
  static std::mutex mu;
  static Net* net = nullptr;  // GUARDED_BY(mu); never freed: connections may outlive any owner
  std::lock_guard<std::mutex> lock(mu);
  if (net != nullptr) return net;
  if (config.net == "ib") {
    return base::InvalidUsage("RINGO_NET=ib: this build has no InfiniBand verbs transport yet");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Net> made, MakeSocketNet(SocketNetOptionsFromConfig(config)));
  auto props = made->Properties(0);
  RINGO_LOG(INFO) << "network transport: " << made->name() << ", " << made->DeviceCount() << " device(s)"
                  << (props.ok() ? ", first " + props->name : std::string());
  net = made.release();
  return net;
}

}  // namespace ringo::transport::net
