// Compiler glue shared by every gbf header: the host/device qualifier and
// force-inline macros, so the same source compiles under nvcc and a plain C++
// compiler.
#pragma once

#if defined(__CUDACC__)
#define GBF_HD __host__ __device__
#define GBF_FORCEINLINE __forceinline__
#else
#define GBF_HD
#if defined(__GNUC__)
#define GBF_FORCEINLINE inline __attribute__((always_inline))
#else
#define GBF_FORCEINLINE inline
#endif
#endif

// Loop unrolling hint understood by both nvcc and GCC/Clang (without
// tripping -Wunknown-pragmas on the host compiler). Under nvcc only the device
// pass gets `#pragma unroll`: nvcc forwards pragmas of the host pass to the
// host compiler, which does not know it, and rejects `#pragma GCC unroll`.
#if defined(__CUDA_ARCH__)
#define GBF_UNROLL _Pragma("unroll")
#elif defined(__CUDACC__)
#define GBF_UNROLL
#elif defined(__clang__)
#define GBF_UNROLL _Pragma("clang loop unroll(full)")
#elif defined(__GNUC__)
#define GBF_UNROLL _Pragma("GCC unroll 32")
#else
#define GBF_UNROLL
#endif
