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

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_DOUBLING_PLAN_H_
