// Lets the device headers that need no GPU (reduce_copy.h, ring_loop.h, which
// include it) compile as host C++, for tests that run them on the CPU. Under
// nvcc it defines nothing; a host translation unit that includes it must not
// also include the CUDA headers.
#ifndef RINGO_KERNELS_CUDA_INTERNAL_HOST_SHIM_H_
#define RINGO_KERNELS_CUDA_INTERNAL_HOST_SHIM_H_

// `#pragma unroll` for nvcc, nothing for the host compiler.
#if defined(__CUDACC__)
#define RINGO_UNROLL _Pragma("unroll")
#else
#define RINGO_UNROLL
#endif

#if !defined(__CUDACC__)
#define __device__
#define __forceinline__ inline
struct uint4 {
  unsigned int x, y, z, w;
};
template <typename T>
inline T __ldcg(const T* p) {
  return *p;
}
#endif

#endif  // RINGO_KERNELS_CUDA_INTERNAL_HOST_SHIM_H_
