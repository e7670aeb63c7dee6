// The host loops for the compiler's baseline instruction set (every CPU).
#include <cstdint>
#include <type_traits>

#include "kernels/internal/host_loops_table.h"
#include "kernels/internal/stream_store.h"
#include "kernels/reduce_op.h"

#define RINGO_HOST_ISA isa_generic
#include "kernels/internal/host_loops_impl.h"
#undef RINGO_HOST_ISA

namespace ringo::kernels::internal {

void FillGenericHostLoops(HostIsaTable& table) { isa_generic::FillAll(table); }

}  // namespace ringo::kernels::internal
