//! Looking at kernels without running them: the source the JIT generates (`emit`) and the
//! resources NVRTC and clang allocate for it (`compile_check`).

pub mod compile_check;
pub mod emit;
