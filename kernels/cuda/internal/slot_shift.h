// Where a Simple slot's data starts. A slot is 16-byte aligned; the element
// loops (reduce_copy.h) use 16-byte vectors only when every pointer of a step
// shares its offset modulo 16, so a user buffer that is not 16-byte aligned
// would make every step scalar. The sender therefore writes a chunk at the
// offset its own user pointer has modulo 16 (the "shift", 0..15), and records
// the shift beside the chunk's size in the connector's size word; the
// receiver reads the chunk at that shift. When every rank's buffers share
// their offset modulo 16 (views of tensors at the same offset, or aligned
// buffers) every step takes the vector path. A slot holds a slice plus
// kSlotShiftPad bytes.
//
// Pure host/device arithmetic; no CUDA headers. Shared by the kernels'
// primitives and the CPU test of the ring loop.
#ifndef RINGO_KERNELS_CUDA_INTERNAL_SLOT_SHIFT_H_
#define RINGO_KERNELS_CUDA_INTERNAL_SLOT_SHIFT_H_

#include <cstdint>

#include "base/device/macros.h"

namespace ringo::kernels::gpu::internal {

// The bits of a size word that hold the shift; the chunk's bytes sit below.
inline constexpr int kSlotShiftBit = 56;
inline constexpr uint64_t kSlotBytesMask = (uint64_t{1} << kSlotShiftBit) - 1;

// The shift that puts a slot's data at the same offset modulo 16 as `p`.
RINGO_HD_INLINE uint32_t SlotShiftFor(const void* p) {
  return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(p) & 15u);
}

// The shift a sending primitive uses: its own user pointer's, the input when
// it reads one, else the output it writes (RecvCopySend).
RINGO_HD_INLINE uint32_t SendShift(const void* src, const void* dst) {
  return SlotShiftFor(src != nullptr ? src : dst);
}

RINGO_HD_INLINE uint64_t EncodeSlotSize(uint64_t bytes, uint32_t shift) {
  return (bytes & kSlotBytesMask) | (static_cast<uint64_t>(shift & 15u) << kSlotShiftBit);
}
RINGO_HD_INLINE uint64_t SlotSizeBytes(uint64_t word) { return word & kSlotBytesMask; }
RINGO_HD_INLINE uint32_t SlotSizeShift(uint64_t word) {
  return static_cast<uint32_t>(word >> kSlotShiftBit) & 15u;
}

}  // namespace ringo::kernels::gpu::internal

#endif  // RINGO_KERNELS_CUDA_INTERNAL_SLOT_SHIFT_H_
