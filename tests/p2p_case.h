// Point-to-point test patterns: a round is a list of messages (source,
// destination, element count, datatype, contents seed) that every rank
// builds alike; a rank issues its part of the list in list order (so the
// messages of one pair match in order), in one group or one call at a
// time, and checks every byte it received and the guard bytes around it.
//
// Thread safety: pure functions and per-rank buffers.
#ifndef RINGO_TESTS_P2P_CASE_H_
#define RINGO_TESTS_P2P_CASE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ringo/ringo.h"

namespace ringo::tests {

struct Message {
  int src = 0;
  int dst = 0;
  size_t count = 0;
  ringoDataType_t dtype = ringoUint8;
  uint32_t seed = 0;
};

struct Round {
  std::string name;
  std::vector<Message> messages;
  bool grouped = true;  // one ringoGroupStart/End around the rank's operations
};

// The patterns of one rank count: rings in both directions, a random
// permutation, random pairs (self included, at most `max_ops` operations on
// any rank), every ordered pair, several messages on one pair, and, when
// `with_ungrouped`, a chain of single calls. Counts come from `counts`,
// datatypes cycle through all of them.
std::vector<Round> MakeRounds(int nranks, uint32_t seed, const std::vector<size_t>& counts, int max_ops,
                              bool with_ungrouped);

// Runs this rank's part of `round` on `comm`; "" or what went wrong.
std::string RunRound(const Round& round, int rank, ringoComm_t comm);

// The bytes of message m (what the sender sends, the receiver expects).
void FillMessage(const Message& m, unsigned char* dst);
size_t MessageBytes(const Message& m);

}  // namespace ringo::tests

#endif  // RINGO_TESTS_P2P_CASE_H_
