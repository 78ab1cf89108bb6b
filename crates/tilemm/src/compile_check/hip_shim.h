// Minimal stand-in for <hip/hip_runtime.h>, enough for CubeCL's generated kernels to compile
// for AMD GPUs with a bare clang (no ROCm): indices and barriers map to the AMDGPU builtins
// that HIP's own headers use.
#pragma once
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __launch_bounds__(n) __attribute__((amdgpu_flat_work_group_size(1, n)))
#define __align__(n) __attribute__((aligned(n)))
typedef unsigned char uchar;
struct uint3 { unsigned int x, y, z; };
static __device__ inline uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) { return {x, y, z}; }
typedef uint3 __tilemm_dim3;
static __device__ inline __tilemm_dim3 __tilemm_thread_idx() {
  return {__builtin_amdgcn_workitem_id_x(), __builtin_amdgcn_workitem_id_y(), __builtin_amdgcn_workitem_id_z()};
}
static __device__ inline __tilemm_dim3 __tilemm_block_idx() {
  return {__builtin_amdgcn_workgroup_id_x(), __builtin_amdgcn_workgroup_id_y(), __builtin_amdgcn_workgroup_id_z()};
}
static __device__ inline __tilemm_dim3 __tilemm_block_dim() {
  return {__builtin_amdgcn_workgroup_size_x(), __builtin_amdgcn_workgroup_size_y(), __builtin_amdgcn_workgroup_size_z()};
}
#define threadIdx (__tilemm_thread_idx())
#define blockIdx (__tilemm_block_idx())
#define blockDim (__tilemm_block_dim())
#define __syncthreads() do { \
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); \
    __builtin_amdgcn_s_barrier(); \
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup"); \
  } while (0)
// HIP's integer and float min/max overloads (hip/amd_detail/amd_math_functions.h).
#define __TILEMM_MINMAX(T) \
  static __device__ inline T min(T a, T b) { return a < b ? a : b; } \
  static __device__ inline T max(T a, T b) { return a < b ? b : a; }
__TILEMM_MINMAX(int)
__TILEMM_MINMAX(unsigned int)
__TILEMM_MINMAX(long long)
__TILEMM_MINMAX(unsigned long long)
__TILEMM_MINMAX(float)
__TILEMM_MINMAX(double)
#undef __TILEMM_MINMAX
