// Ring and reduction kernels for the 8-bit float E5M2 (combined in fp32,
// stored rounded and saturated, base/device/fp8.h): the typed launchers
// launch.cc dispatches to. One .cu file per datatype family so nvcc builds
// them in parallel (the two 8-bit floats apart: each is the slowest to
// compile); launch shape and memory ordering: internal/ring.cuh.
#include "kernels/cuda/internal/ring.cuh"

RINGO_CUDA_INSTANTIATE(ringo::base::Fp8E5M2)
