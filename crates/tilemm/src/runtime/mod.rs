//! Running on a device: a session per device on a CubeCL runtime (`gpu`), the backends that
//! open one (`backend`: wgpu, CUDA, HIP), and the compiled kernels and CubeCL configuration
//! kept for them (`cache`); how work on one is timed (`timing`); host memory registered with a
//! device (`register`), and the schedule that overlaps copies with compute (`transfer`).

pub mod backend;
pub mod cache;
pub mod gpu;
pub mod register;
pub mod timing;
pub mod transfer;
