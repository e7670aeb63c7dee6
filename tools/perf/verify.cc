#include "tools/perf/verify.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace ringo::perf {
namespace {

using base::DataType;
using base::RedOp;

PatternSource SourceOf(Collective c) {
  switch (c) {
    case Collective::kAllGather:
      return PatternSource::kAllGather;
    case Collective::kBroadcast:
      return PatternSource::kBroadcast;
    case Collective::kSendRecv:
      return PatternSource::kSendRecv;
    case Collective::kAllToAll:
      return PatternSource::kAllToAll;
    default:
      return PatternSource::kReduce;
  }
}

}  // namespace

Pattern::Pattern(Collective c, RedOp op, DataType type, int rank, int nranks, int root,
                 const CollCounts& counts, double wire_roundoff)
    : coll_(c), rank_(rank), root_(root), counts_(counts) {
  spec_.wire_roundoff = wire_roundoff;
  spec_.source = SourceOf(c);
  spec_.op = op;
  spec_.type = type;
  spec_.rank = rank;
  spec_.nranks = nranks;
  spec_.root = root;
  spec_.block_count = c == Collective::kAllToAll ? counts.param_count : counts.send_count;
  spec_.sum_modulus = SumModulus(nranks);
}

bool Pattern::HasInput() const { return coll_ != Collective::kBroadcast || rank_ == root_; }
bool Pattern::HasOutput() const { return coll_ != Collective::kReduce || rank_ == root_; }

size_t Pattern::InputFirst() const {
  return coll_ == Collective::kAllGather ? rank_ * counts_.send_count : 0;
}

size_t Pattern::OutputFirst() const {
  return coll_ == Collective::kReduceScatter ? rank_ * counts_.recv_count : 0;
}

double Pattern::OwnedValue(int r, size_t g) { return perf::OwnedValue(r, g); }
double Pattern::ReduceInput(int r, size_t g) const { return perf::ReduceInput(spec_, r, g); }
double Pattern::Input(size_t g) const { return InputValue(spec_, g); }
double Pattern::Expected(size_t g) const { return ExpectedValue(spec_, g); }
double Pattern::Tolerance(double expected) const { return ToleranceFor(spec_, expected); }

size_t Pattern::Period() const {
  if (!HasOp(coll_)) return kOwnedModulus;
  switch (spec_.op) {
    case RedOp::kSum:
    case RedOp::kAvg:
      return spec_.sum_modulus;
    case RedOp::kProd: return size_t{1} << kProdRanks;
    case RedOp::kMax:
    case RedOp::kMin: return kOwnedModulus;
    case RedOp::kPreMulSum: return 1;
  }
  return 1;
}

size_t Pattern::SegmentEnd(size_t g) const {
  const size_t block = coll_ == Collective::kAllGather ? counts_.send_count
                       : coll_ == Collective::kAllToAll ? counts_.param_count
                                                         : 0;
  if (block == 0) return SIZE_MAX;
  return (g / block + 1) * block;
}

namespace {

// Calls body(start, end, n) for each stretch [start, end) of [first, first +
// count) in which values repeat with period n (n <= end - start).
template <typename Body>
void ForEachPeriodicStretch(const Pattern& pattern, size_t first, size_t count, Body&& body) {
  for (size_t start = first; start < first + count;) {
    const size_t end = std::min(first + count, pattern.SegmentEnd(start));
    body(start, end, std::min(pattern.Period(), end - start));
    start = end;
  }
}

}  // namespace

void FillInput(DataType type, const Pattern& pattern, size_t first, size_t count, void* dst) {
  WithDataType(type, [&](auto zero) {
    using T = decltype(zero);
    T* out = static_cast<T*>(dst);
    std::vector<T> period;
    ForEachPeriodicStretch(pattern, first, count, [&](size_t start, size_t end, size_t n) {
      period.resize(n);
      for (size_t k = 0; k < n; ++k) period[k] = FromDouble<T>(pattern.Input(start + k));
      for (size_t g = start, k = 0; g < end; ++g, k = k + 1 == n ? 0 : k + 1)
        out[g - first] = period[k];
    });
  });
}

int64_t CountWrong(DataType type, const Pattern& pattern, size_t first, size_t count,
                   const void* got) {
  int64_t wrong = 0;
  WithDataType(type, [&](auto zero) {
    using T = decltype(zero);
    const T* in = static_cast<const T*>(got);
    std::vector<double> want, tol;
    ForEachPeriodicStretch(pattern, first, count, [&](size_t start, size_t end, size_t n) {
      want.resize(n);
      tol.resize(n);
      for (size_t k = 0; k < n; ++k) {
        const double exact = pattern.Expected(start + k);
        tol[k] = pattern.Tolerance(exact);
        want[k] = ComparedValue<T>(exact, tol[k]);
      }
      // A NaN (the poison left where nothing was written) fails the <=.
      for (size_t g = start, k = 0; g < end; ++g, k = k + 1 == n ? 0 : k + 1) {
        if (!(std::fabs(ToDouble(in[g - first]) - want[k]) <= tol[k])) ++wrong;
      }
    });
  });
  return wrong;
}

}  // namespace ringo::perf
