// Test helpers: the hwloc XML fixtures of tests/data/topo/ loaded into graphs.
// Paths are relative to the test's runfiles directory (Bazel's working
// directory for tests).
#ifndef RINGO_TOPOLOGY_TEST_FIXTURES_H_
#define RINGO_TOPOLOGY_TEST_FIXTURES_H_

#include <string>
#include <vector>

#include "topology/graph.h"

namespace ringo::topology::testing {

// "tests/data/topo/<name>.xml".
std::string FixtureXml(const std::string& name);
// "tests/data/topo/<name>.nvlink", or "" when the fixture has none.
std::string FixtureNvlink(const std::string& name);
// The fixture's graph (its NVLink overlay applied, NVML never asked); fails
// the test on error.
Graph LoadFixture(const std::string& name);
// Every fixture's name.
std::vector<std::string> FixtureNames();

}  // namespace ringo::topology::testing

#endif  // RINGO_TOPOLOGY_TEST_FIXTURES_H_
