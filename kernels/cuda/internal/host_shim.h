// Lets the device headers that need no GPU (reduce_copy.h, ring_loop.h,
// device_fifo.cuh, which include it) compile as host C++, for tests that run
// them on the CPU (device_fifo.cuh's libcu++ atomics have host definitions).
// Under nvcc it defines nothing. Where the CUDA headers are on the include
// path (libcu++ includes them), it takes __device__, __forceinline__ and
// uint4 from them, as a host compiler sees them; elsewhere it defines its own.
#ifndef RINGO_KERNELS_CUDA_INTERNAL_HOST_SHIM_H_
#define RINGO_KERNELS_CUDA_INTERNAL_HOST_SHIM_H_

// `#pragma unroll` for nvcc, nothing for the host compiler.
#if defined(__CUDACC__)
#define RINGO_UNROLL _Pragma("unroll")
#else
#define RINGO_UNROLL
#endif

#if !defined(__CUDACC__)
#include <time.h>

#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#else
#define __device__
#define __forceinline__ inline
struct uint4 {
  unsigned int x, y, z, w;
};
#endif
template <typename T>
inline T __ldcg(const T* p) {
  return *p;
}
// atomicCAS as the device defines it: returns the old value.
inline int atomicCAS(int* address, int compare, int value) {
  __atomic_compare_exchange_n(address, &compare, value, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return compare;
}
// %globaltimer's stand-in: a monotonic clock in ns.
inline unsigned long long HostClockNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<unsigned long long>(ts.tv_sec) * 1000000000ull + static_cast<unsigned long long>(ts.tv_nsec);
}
#endif

#endif  // RINGO_KERNELS_CUDA_INTERNAL_HOST_SHIM_H_
