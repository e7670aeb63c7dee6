// The test oracle: datatype helpers (including IEEE half and bfloat16
// conversion with round-to-nearest-even), deterministic per-rank inputs, and
// the expected result of each collective computed independently of Ringo.
//
// Reference semantics (what Ringo promises in ringo.h):
// - Integer sum and prod wrap modulo 2^bits: computed in uint64 on the
//   sign-extended inputs, then truncated to the type.
// - Integer avg: the sum (inputs are kept small, so it never wraps) divided
//   by nranks, truncating toward zero.
// - Float sum/prod/max/min: inputs are chosen so every partial result is
//   exactly representable in the type (small multiples of 1/4 for sums,
//   signed powers of two for products), so the result is exact whatever the
//   order of operations: tolerance 0.
// - Float avg: Ringo multiplies each input by 1/nranks in the type, then
//   sums. The reference is sum(x_r) / nranks in double, with tolerance
//   (nranks + 2) * eps(type) * sum(|x_r|) / nranks: one rounding for 1/nranks,
//   one per product and one per addition, each at most eps/2 relative to a
//   magnitude bounded by sum(|x_r|)/nranks, doubled for slack.
//
// Thread safety: everything here is a pure function of its arguments.
#ifndef RINGO_TESTS_REFERENCE_H_
#define RINGO_TESTS_REFERENCE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ringo/ringo.h"

namespace ringo::tests {

// ---- Datatypes ----

// The datatypes the reduction reference covers (fp8 has its own tests,
// tests/fp8_premul_test.cc); kEveryDataType adds the fp8 formats, for
// tests that move bytes.
extern const ringoDataType_t kAllDataTypes[10];
extern const ringoDataType_t kEveryDataType[12];
extern const ringoRedOp_t kAllOps[5];

size_t DataTypeSize(ringoDataType_t dt);
bool IsFloatType(ringoDataType_t dt);
bool IsSignedInt(ringoDataType_t dt);
const char* DataTypeName(ringoDataType_t dt);  // "int8", "float16", ...
const char* OpName(ringoRedOp_t op);           // "sum", "prod", ...
// Machine epsilon of a float type (2^-10 for half, 2^-7 for bfloat16, ...).
double Epsilon(ringoDataType_t dt);

// IEEE 754 binary16 and bfloat16 bit patterns, round-to-nearest-even,
// overflow to infinity, subnormals kept.
uint16_t DoubleToHalfBits(double v);
double HalfBitsToDouble(uint16_t bits);
uint16_t DoubleToBf16Bits(double v);
double Bf16BitsToDouble(uint16_t bits);

// Element i of an array of `dt` at `base`. Integers are returned as their
// 64-bit two's complement (sign-extended for signed types); WriteInt keeps
// the low bits. Floats go through double (WriteFloat rounds to nearest even).
uint64_t ReadInt(ringoDataType_t dt, const void* base, size_t i);
void WriteInt(ringoDataType_t dt, void* base, size_t i, uint64_t v);
double ReadFloat(ringoDataType_t dt, const void* base, size_t i);
void WriteFloat(ringoDataType_t dt, void* base, size_t i, double v);

// Element i as text, for failure messages.
std::string FormatElement(ringoDataType_t dt, const void* base, size_t i);

// ---- Inputs ----

// Writes rank `rank`'s input for reduction `op` (the value ranges described
// above; any op for non-reducing collectives) into n elements at dst. Each
// element depends on (seed, rank, index) so a wrong chunk or rank mapping
// shows up.
void FillInput(ringoDataType_t dt, ringoRedOp_t op, uint32_t seed, int rank, void* dst, size_t n);

// ---- Expected results ----

// The op over every rank's input, element by element, for `nelems` elements
// of inputs made by FillInput(dt, op, seed, r, ...), r < nranks.
struct ReducedReference {
  std::vector<unsigned char> bytes;  // exact result in the type (integers, exact floats)
  std::vector<double> value;         // float avg only: the result in double
  std::vector<float> tolerance;      // float avg only: allowed |got - value|
};
ReducedReference ReduceInputs(ringoDataType_t dt, ringoRedOp_t op, uint32_t seed, int nranks,
                              size_t nelems);

// Compares `count` elements of `got` with `want` starting at want's element
// `want_offset`. Returns "" or a description of the first few mismatches,
// each naming its index relative to `got`.
std::string CompareToReference(ringoDataType_t dt, const void* got, size_t count,
                               const ReducedReference& want, size_t want_offset);

// Byte-exact comparison with a description of the first few differences
// (elements of dt).
std::string CompareBytes(ringoDataType_t dt, const void* got, const void* want, size_t count);

}  // namespace ringo::tests

#endif  // RINGO_TESTS_REFERENCE_H_
