// The element loops of the host executors (the one-shot, the direct path and
// the ring) for one (datatype, op), compiled once per instruction set and
// chosen once per process: the widest set this CPU runs, or RINGO_HOST_ISA.
// Every set computes bit-identical results (the same operations in the same
// order, no fused multiply-add), so ranks on different CPUs agree.
//
// The loops take untyped pointers to elements of the datatype; `op` (the
// rank count, a premul-sum's scalar) builds the reduction's functor. `stream`
// writes that output with non-temporal stores (the caller fences before
// publishing). Inputs and outputs may be the same memory (in place), but an
// output must not partly overlap an input.
#ifndef RINGO_KERNELS_INTERNAL_HOST_LOOPS_TABLE_H_
#define RINGO_KERNELS_INTERNAL_HOST_LOOPS_TABLE_H_

#include <cstdint>
#include <string>

#include "base/device/dtype.h"
#include "kernels/reduce_op.h"

namespace ringo::kernels::internal {

struct HostLoops {
  // out[k][i] = Post(Pre(in[0][i]) (+) ... (+) Pre(in[n-1][i])) for k < nout, in rank order.
  void (*reduce_all)(const void* const* in, int n, void* const* out, int nout, int64_t count, const OpParams& op,
                     bool stream);
  // As reduce_all, but every partial result rounded to the datatype as the
  // ring's chain does (send, then recvReduceSend ..., recvReduceCopy, in
  // input order): the same bits as a ring Reduce whose ranks are in input
  // order (RINGO_DETERMINISTIC). The same function as reduce_all wherever
  // partial results are not rounded (every type but fp16 and bf16).
  void (*reduce_ordered)(const void* const* in, int n, void* const* out, int nout, int64_t count, const OpParams& op,
                         bool stream);
  // out[i] = Partial(Pre(src[i])): a rank's input entering the ring.
  void (*send)(const void* src, void* out, int64_t count, const OpParams& op, bool stream);
  // out1[i] (and out2[i] unless out2 is null) = in[i] (+) Pre(src[i]), stored
  // as a partial result (reduce_partial) or the final one (reduce_final).
  void (*reduce_partial)(const void* in, const void* src, void* out1, void* out2, int64_t count, const OpParams& op,
                         bool stream1, bool stream2);
  void (*reduce_final)(const void* in, const void* src, void* out1, void* out2, int64_t count, const OpParams& op,
                       bool stream1, bool stream2);
};

enum class HostIsa : int {
  kGeneric = 0,  // what the compiler's baseline target gives (SSE2 on x86-64)
  kAvx2 = 1,     // x86-64 with AVX2 and F16C (fp16 converted in hardware)
};
inline constexpr int kNumHostIsas = 2;

const char* HostIsaName(HostIsa isa);
// "generic", "avx2" or "auto" (the widest this CPU runs); false otherwise.
bool ParseHostIsa(const std::string& name, HostIsa* isa, bool* automatic);
bool HostIsaSupported(HostIsa isa);  // built in and run by this CPU

// The set in use: RINGO_HOST_ISA where this CPU runs it (a warning otherwise),
// else the widest it runs; decided at the first call.
HostIsa ActiveHostIsa();
const HostLoops& GetHostLoops(base::DataType dtype, base::RedOp op);
// A given set's loops (tests compare the sets); `isa` must be supported.
const HostLoops& GetHostLoopsFor(HostIsa isa, base::DataType dtype, base::RedOp op);

// fp16 <-> fp32 over arrays, as a set's loops convert them (tests compare
// the sets on every value).
struct HalfConversions {
  void (*to_float)(const uint16_t* src, float* dst, int64_t count);
  void (*from_float)(const float* src, uint16_t* dst, int64_t count);
};
const HalfConversions& GetHalfConversionsFor(HostIsa isa);

// Filled by each set's translation unit.
struct HostIsaTable {
  HostLoops loops[base::kNumDataTypes][base::kNumReduceOps];  // [dtype][op]
  HalfConversions half;
};
void FillGenericHostLoops(HostIsaTable& table);
bool FillAvx2HostLoops(HostIsaTable& table);  // false where not built (not x86-64)

}  // namespace ringo::kernels::internal

#endif  // RINGO_KERNELS_INTERNAL_HOST_LOOPS_TABLE_H_
