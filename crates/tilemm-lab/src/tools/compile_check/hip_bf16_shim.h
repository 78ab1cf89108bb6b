// Minimal stand-in for <hip/hip_bf16.h>: CubeCL's kernels only load, store and convert
// __hip_bfloat16. Stored as the top 16 bits of an f32; from f32 rounded to nearest even, as
// ROCm's header does (NaN is not special-cased: the compile check measures resources only).
#pragma once
struct __hip_bfloat16 {
  unsigned short data;
  __hip_bfloat16() = default;
  __attribute__((device)) __hip_bfloat16(float f) {
    unsigned int u = __builtin_bit_cast(unsigned int, f);
    data = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  __attribute__((device)) operator float() const {
    return __builtin_bit_cast(float, (unsigned int)data << 16);
  }
};
