// Ring and reduction kernels for float16 and bfloat16 (accumulated in float32): the typed launchers launch.cc dispatches
// to. One .cu file per datatype family so nvcc builds them in parallel;
// launch shape and memory ordering: internal/ring.cuh.
#include "kernels/cuda/internal/ring.cuh"

RINGO_CUDA_INSTANTIATE(ringo::base::Half)
RINGO_CUDA_INSTANTIATE(ringo::base::BFloat16)
