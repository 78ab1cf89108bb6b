// Minimal stand-in for <hip/hip_fp16.h>: CubeCL's kernels only load, store and convert
// __half, which clang's _Float16 does natively on AMDGPU.
#pragma once
typedef _Float16 __half;
