//! Running on a device: a session per device on a CubeCL runtime (`gpu`), the backends that
//! open one (`backend`: wgpu, CUDA, HIP), and the compiled kernels and CubeCL configuration
//! kept for them (`cache`); how work on one is timed (`timing`).

pub mod backend;
pub mod cache;
pub mod gpu;
pub mod timing;
