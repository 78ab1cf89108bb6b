// Minimal stand-in for <hip/hip_fp16.h>: CubeCL's kernels load, store, convert and shuffle
// __half, which clang's _Float16 does natively on AMDGPU.
#pragma once
typedef _Float16 __half;
// HIP's __shfl for __half (amd_warp_functions.h), through the 32-bit one.
static __device__ inline __half __shfl(__half var, int src, int width = warpSize) {
  unsigned short bits = __builtin_bit_cast(unsigned short, var);
  return __builtin_bit_cast(__half, (unsigned short)__shfl((int)bits, src, width));
}
