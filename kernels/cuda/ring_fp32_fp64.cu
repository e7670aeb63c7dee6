// Ring and reduction kernels for float32 and float64: the typed launchers launch.cc dispatches
// to. One .cu file per datatype family so nvcc builds them in parallel;
// launch shape and memory ordering: internal/ring.cuh.
#include "kernels/cuda/internal/ring.cuh"

RINGO_CUDA_INSTANTIATE(float)
RINGO_CUDA_INSTANTIATE(double)
