// -np for any benchmark program: fork N local ranks and wait for them, so a
// failing rank does not leave the others running forever.
#ifndef RINGO_LAUNCH_FORK_H_
#define RINGO_LAUNCH_FORK_H_

#include <functional>

namespace ringo::launch {

// Flushes stdio, forks `nranks` children that each run `rank_main(rank)` and
// _exit with its return value, and waits for all. If a child fails the rest
// get a grace period to report the error, then are killed. Returns 0 when
// every child exited 0, else the first failing child's status (1 if killed).
// Messages start with "`program`: ". Call from a single-threaded process.
// With `bind_to_core`, rank r runs on the r-th CPU this process may use
// (mpirun's --bind-to core, its default for two ranks or fewer), where there
// are at least as many CPUs as ranks; unbound otherwise, with a note.
//
// With `survivors_go_on` (elastic jobs), a child killed by a signal is
// reported but neither fails the run nor starts the grace period: the others
// are expected to go on without it, and the result is theirs.
int RunForkedRanks(const char* program, int nranks, const std::function<int(int rank)>& rank_main,
                   bool bind_to_core = false, bool survivors_go_on = false);

}  // namespace ringo::launch

#endif  // RINGO_LAUNCH_FORK_H_
