// Recursive doubling's steps for one rank, written once for the host and
// GPU engines (doubling.h, gpu_doubling.h) and simulated for every rank
// count by doubling_plan_test.cc.
//
// With p the largest power of two not above N and extra = N - p: ranks
// 0 .. 2 extra - 1 pair up, each even one handing its input to the odd one
// after it and later taking the result back; then the p remaining ranks
// (virtual ranks 0 .. p - 1: the odd ranks of the pairs, then the others)
// swap partial results with the rank whose virtual index differs in bit k
// and combine, lower rank's partial first, so both ends hold the same bits.
#ifndef RINGO_COLLECTIVES_ENGINES_DOUBLING_PLAN_H_
#define RINGO_COLLECTIVES_ENGINES_DOUBLING_PLAN_H_

#include <vector>

#include "topology/cost_model.h"

namespace ringo::collectives {

struct DoublingStep {
  int peer = 0;
  bool send = false;     // this rank's partial result to `peer`
  bool recv = false;     // `peer`'s into the scratch buffer
  bool combine = false;  // partial = lower rank's (+) higher rank's, of this rank's and what arrived
  bool take = false;     // partial = what arrived (a paired rank taking the result back)
};

inline std::vector<DoublingStep> DoublingSteps(int rank, int nranks) {
  std::vector<DoublingStep> steps;
  if (nranks < 2) return steps;
  const int p = 1 << topology::DoublingRounds(nranks);
  const int extra = nranks - p;
  if (rank < 2 * extra && rank % 2 == 0) {  // hands its input to rank + 1, then takes the result
    steps.push_back({rank + 1, true, false, false, false});
    steps.push_back({rank + 1, false, true, false, true});
    return steps;
  }
  int vrank = rank - extra;
  if (rank < 2 * extra) {
    steps.push_back({rank - 1, false, true, true, false});
    vrank = rank / 2;
  }
  for (int mask = 1; mask < p; mask <<= 1) {
    const int vpeer = vrank ^ mask;
    const int peer = vpeer < extra ? 2 * vpeer + 1 : vpeer + extra;
    steps.push_back({peer, true, true, true, false});
  }
  if (rank < 2 * extra) steps.push_back({rank - 1, true, false, false, false});
  return steps;
}

// The hierarchical variant, for ranks several to a host: `host[r]` names
// rank r's host (any value; equal values share one). Each host's lowest
// rank (its leader) receives every other local rank's input in rank order
// and combines them, lower rank's first; the leaders run recursive doubling
// among themselves (DoublingSteps over the hosts, in the order of their
// leaders); each leader sends the result to its local ranks. Network
// steps: those of DoublingSteps(hosts), where the flat plan takes those of
// DoublingSteps(ranks) with every rank's traffic on the network at once.
inline std::vector<DoublingStep> HierarchicalSteps(int rank, const std::vector<int>& host) {
  const int n = static_cast<int>(host.size());
  std::vector<int> leaders;  // each host's lowest rank, ascending
  std::vector<int> leader_of(n, -1);
  for (int r = 0; r < n; ++r) {
    for (int q = 0; q <= r; ++q) {
      if (host[q] == host[r]) {
        leader_of[r] = q;
        break;
      }
    }
    if (leader_of[r] == r) leaders.push_back(r);
  }
  std::vector<DoublingStep> steps;
  const int leader = leader_of[rank];
  if (leader != rank) {
    steps.push_back({leader, true, false, false, false});
    steps.push_back({leader, false, true, false, true});
    return steps;
  }
  std::vector<int> members;
  for (int r = rank + 1; r < n; ++r) {
    if (leader_of[r] == rank) members.push_back(r);
  }
  for (int m : members) steps.push_back({m, false, true, true, false});
  const int hosts = static_cast<int>(leaders.size());
  int me = 0;
  while (leaders[me] != rank) ++me;
  for (DoublingStep s : DoublingSteps(me, hosts)) {
    s.peer = leaders[s.peer];
    steps.push_back(s);
  }
  for (int m : members) steps.push_back({m, true, false, false, false});
  return steps;
}

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_DOUBLING_PLAN_H_
