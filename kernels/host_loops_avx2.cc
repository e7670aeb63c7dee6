// The host loops for x86-64 CPUs with AVX2 and F16C. Everything this file
// includes is compiled for the baseline target; only the loops of
// host_loops_impl.h, included after the pragma, use AVX2 (no FMA: results
// stay bit-identical to the baseline's). Called only where the CPU runs them.
#include <cstdint>
#include <type_traits>

#include "kernels/internal/host_loops_table.h"
#include "kernels/internal/stream_store.h"
#include "kernels/reduce_op.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,f16c")
#define RINGO_HOST_ISA isa_avx2
#define RINGO_HOST_F16C 1
#include "kernels/internal/host_loops_impl.h"
#undef RINGO_HOST_F16C
#undef RINGO_HOST_ISA
#pragma GCC pop_options

namespace ringo::kernels::internal {

bool FillAvx2HostLoops(HostIsaTable& table) {
  isa_avx2::FillAll(table);
  return true;
}

}  // namespace ringo::kernels::internal

#else

namespace ringo::kernels::internal {

bool FillAvx2HostLoops(HostIsaTable&) { return false; }

}  // namespace ringo::kernels::internal

#endif
