// RINGO_HD marks functions compiled for both host and device; RINGO_DEVICE_FN
// marks code that runs on the device under nvcc and on the host otherwise
// (the ring loop: the kernels' and the host executor's).
#ifndef RINGO_BASE_DEVICE_MACROS_H_
#define RINGO_BASE_DEVICE_MACROS_H_

#if defined(__CUDACC__)
#define RINGO_HD __host__ __device__
#define RINGO_HD_INLINE __host__ __device__ __forceinline__
#define RINGO_DEVICE_FN __device__
#else
#define RINGO_HD
#define RINGO_HD_INLINE inline __attribute__((always_inline))
#define RINGO_DEVICE_FN inline
#endif

#endif  // RINGO_BASE_DEVICE_MACROS_H_
