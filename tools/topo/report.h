// ringo-topo's report: what was loaded, the paths, the rings and the
// prediction, and its renderings (text, JSON, Graphviz).
#ifndef RINGO_TOOLS_TOPO_REPORT_H_
#define RINGO_TOOLS_TOPO_REPORT_H_

#include <ostream>
#include <string>
#include <vector>

#include "topology/cost_model.h"
#include "topology/paths.h"
#include "topology/ring_search.h"
#include "topology/topology.h"

namespace ringo::tools {

struct Report {
  topology::Topology topo;
  topology::PathMatrix paths;
  std::vector<topology::Ring> rings;
  bool rings_from_dump = false;
  int hosts = 1;     // rings are chains through NICs when > 1
  double bytes = 0;  // all-reduce size of the prediction
  bool has_prediction = false;
  // Across hosts: RINGO_NET_GPUDIRECT=1 asks GPU edges over verbs to keep
  // their slots in device memory (no staging copy in the prediction).
  bool gpudirect = false;
  topology::Prediction prediction;
  topology::PathType farthest = topology::PathType::kLoc;  // farthest ring edge
  // hosts > 1: the communicator's plan over every host's GPUs (its first
  // channel's edges are shown, with each edge's transport and memory).
  std::vector<topology::RingPlan> plan;
};

// The sections: header, machine tree, GPU path matrix, rings, prediction.
void RenderText(const Report& report, std::ostream& out);
void RenderJson(const Report& report, std::ostream& out);
void RenderDot(const Report& report, std::ostream& out);

// Pieces, for tests and reuse.
void RenderTree(const topology::Graph& graph, std::ostream& out);
void RenderMatrix(const topology::Graph& graph, const topology::PathMatrix& paths,
                  std::ostream& out);

// "256 MiB", "1.5 KiB", "17 B".
std::string FormatBytes(double bytes);

}  // namespace ringo::tools

#endif  // RINGO_TOOLS_TOPO_REPORT_H_
