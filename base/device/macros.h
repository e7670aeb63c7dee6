// RINGO_HD marks functions compiled for both host and device.
#ifndef RINGO_BASE_DEVICE_MACROS_H_
#define RINGO_BASE_DEVICE_MACROS_H_

#if defined(__CUDACC__)
#define RINGO_HD __host__ __device__
#define RINGO_HD_INLINE __host__ __device__ __forceinline__
#else
#define RINGO_HD
#define RINGO_HD_INLINE inline __attribute__((always_inline))
#endif

#endif  // RINGO_BASE_DEVICE_MACROS_H_
