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
static __device__ inline __tilemm_dim3 __tilemm_grid_dim() {
  return {__builtin_amdgcn_grid_size_x() / __builtin_amdgcn_workgroup_size_x(),
          __builtin_amdgcn_grid_size_y() / __builtin_amdgcn_workgroup_size_y(),
          __builtin_amdgcn_grid_size_z() / __builtin_amdgcn_workgroup_size_z()};
}
#define threadIdx (__tilemm_thread_idx())
#define blockIdx (__tilemm_block_idx())
#define blockDim (__tilemm_block_dim())
#define gridDim (__tilemm_grid_dim())
// Unsigned, so that CubeCL's min(warpSize, blockDim.x * ...) resolves.
#define warpSize ((unsigned int)__AMDGCN_WAVEFRONT_SIZE)
// HIP's __shfl (amd_warp_functions.h): lane `src` of the wavefront's value, through
// ds_bpermute (32 bits at a time).
static __device__ inline int __shfl(int var, int src, int width = warpSize) {
  int self = __builtin_amdgcn_mbcnt_hi(-1, __builtin_amdgcn_mbcnt_lo(-1, 0));
  int index = src + (self & ~(width - 1));
  return __builtin_amdgcn_ds_bpermute(index << 2, var);
}
static __device__ inline unsigned int __shfl(unsigned int var, int src, int width = warpSize) {
  return (unsigned int)__shfl((int)var, src, width);
}
static __device__ inline float __shfl(float var, int src, int width = warpSize) {
  return __builtin_bit_cast(float, __shfl(__builtin_bit_cast(int, var), src, width));
}
static __device__ inline double __shfl(double var, int src, int width = warpSize) {
  struct halves { int lo, hi; } h = __builtin_bit_cast(halves, var);
  h.lo = __shfl(h.lo, src, width);
  h.hi = __shfl(h.hi, src, width);
  return __builtin_bit_cast(double, h);
}
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
