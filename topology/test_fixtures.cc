#include "topology/test_fixtures.h"

#include <gtest/gtest.h>

#include <fstream>

#include "topology/discovery.h"

namespace ringo::topology::testing {

std::string FixtureXml(const std::string& name) { return "tests/data/topo/" + name + ".xml"; }

std::string FixtureNvlink(const std::string& name) {
  std::string path = "tests/data/topo/" + name + ".nvlink";
  return std::ifstream(path).good() ? path : "";
}

Graph LoadFixture(const std::string& name) {
  DiscoveryOptions options;
  options.xml_file = FixtureXml(name);
  options.nvlink_file = FixtureNvlink(name);
  options.use_nvml = false;
  auto graph = DiscoverTopology(options);
  EXPECT_TRUE(graph.ok()) << name << ": " << graph.status().ToString();
  return graph.ok() ? std::move(graph).value() : Graph();
}

std::vector<std::string> FixtureNames() {
  return {"dgx_a100", "dgx_h100", "pcie_8gpu", "nvlink_bridge_4gpu", "two_socket_2gpu"};
}

}  // namespace ringo::topology::testing
