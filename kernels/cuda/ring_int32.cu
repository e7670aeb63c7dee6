// Ring and reduction kernels for int32 and uint32: the typed launchers launch.cc dispatches
// to. One .cu file per datatype family so nvcc builds them in parallel;
// launch shape and memory ordering: internal/ring.cuh.
#include "kernels/cuda/internal/ring.cuh"

RINGO_CUDA_INSTANTIATE(int32_t)
RINGO_CUDA_INSTANTIATE(uint32_t)
