// Verification data: every input element is a small integer that depends on
// the rank and the element's index and is exact in every datatype, chosen so
// that every partial result of the reduction is exact too (sums stay <= 120,
// products are powers of two <= 64). Expected results are computed element by
// element, on the host here or on the device by a CUDA backend, from the same
// arithmetic (pattern_math.h); only avg on floating-point types needs a
// tolerance (it multiplies by 1/nranks).
#ifndef RINGO_TOOLS_PERF_VERIFY_H_
#define RINGO_TOOLS_PERF_VERIFY_H_

#include <cstddef>
#include <cstdint>

#include "base/device/dtype.h"
#include "tools/perf/collective.h"
#include "tools/perf/options.h"
#include "tools/perf/pattern_math.h"

namespace ringo::perf {

// Byte written over buffers that the collective must overwrite: as any
// integer type it is -1 or the maximum, as any float a NaN, never an input.
inline constexpr uint8_t kPoisonByte = 0xff;

// One rank's view of one run: what it feeds in and what it must get back.
// Indices are "global": positions in the full reduced vector (reducescatter's
// sendbuff, allreduce's buffers) or in allgather's recvbuff.
class Pattern {
 public:
  // `wire_roundoff`: the unit roundoff of the wire format the collective
  // crosses hosts in (ringo-perf --wire; 0: none), widening the tolerance.
  Pattern(Collective c, base::RedOp op, base::DataType type, int rank, int nranks, int root,
          const CollCounts& counts, double wire_roundoff = 0);

  // Whether this rank has an input (broadcast: root only) and an output to
  // check (reduce: root only).
  bool HasInput() const;
  bool HasOutput() const;
  // Global index of this rank's first input and first output element.
  size_t InputFirst() const;
  size_t OutputFirst() const;
  // This rank's input at global index g, and the exact expected output there.
  double Input(size_t g) const;
  double Expected(size_t g) const;
  // Largest accepted |got - expected|.
  double Tolerance(double expected) const;
  // Input(g) and Expected(g) depend on g only through g % Period() between
  // g and SegmentEnd(g) (allgather: the end of the block g's owner sent), so
  // filling and checking compute one period and repeat it.
  size_t Period() const;
  size_t SegmentEnd(size_t g) const;

  // Input of rank r at global index g for a reducing collective.
  double ReduceInput(int r, size_t g) const;
  // Data owned by rank r at g for allgather and broadcast (wider range: nothing is summed).
  static double OwnedValue(int r, size_t g);

  // The arithmetic's parameters, for the device kernels.
  const PatternSpec& spec() const { return spec_; }

 private:
  Collective coll_;
  int rank_;
  int root_;
  CollCounts counts_;
  PatternSpec spec_;
};

// Writes pattern.Input(first + i), i < count, as `type` into host memory dst.
void FillInput(base::DataType type, const Pattern& pattern, size_t first, size_t count, void* dst);

// Counts the elements of host memory `got` (count elements of `type`) that are
// not pattern.Expected(first + i) within pattern.Tolerance.
int64_t CountWrong(base::DataType type, const Pattern& pattern, size_t first, size_t count,
                   const void* got);

}  // namespace ringo::perf

#endif  // RINGO_TOOLS_PERF_VERIFY_H_
