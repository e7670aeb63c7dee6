// What the GPU test suites share beyond tests/collective_case.h: the chunk
// the planner gives a small GPU collective, so their count sweeps straddle
// chunk boundaries. CPU arithmetic only (no CUDA call).
#ifndef RINGO_TESTS_GPU_CASE_H_
#define RINGO_TESTS_GPU_CASE_H_

#include <cstddef>

#include "ringo/ringo.h"

namespace ringo::tests {

// The chunk, in elements, of a small collective of `dt` on `nranks` GPU
// ranks under the current configuration (RINGO_PROTO, RINGO_SLOT_BYTES).
size_t ChunkElems(ringoDataType_t dt, int nranks);

}  // namespace ringo::tests

#endif  // RINGO_TESTS_GPU_CASE_H_
