// The one-shot board of a communicator whose ranks share one memory domain,
// as its engines share it: the one-shot engine posts data there, the direct
// engine agrees on each call there, and the host ring posts each call's
// signature there so that a rank whose same call took the board finds a
// mismatch instead of waiting. Every rank counts its board operations
// alike (`seq`), since every rank's engines make the same ones.
#ifndef RINGO_COLLECTIVES_ENGINES_BOARD_STATE_H_
#define RINGO_COLLECTIVES_ENGINES_BOARD_STATE_H_

#include <cstdint>
#include <memory>

#include "transport/shm/board.h"

namespace ringo::collectives {

struct BoardState {
  explicit BoardState(std::shared_ptr<transport::HostPages> pages, size_t buffer_bytes)
      : board(std::move(pages), buffer_bytes) {}
  transport::Board board;
  uint64_t seq = 0;  // board operations run so far
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_BOARD_STATE_H_
