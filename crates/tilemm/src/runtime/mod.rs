//! Running on a device: a session per device on a CubeCL runtime (`gpu`), the backends that
//! open one (`backend`: wgpu, CUDA, HIP), and the compiled kernels and CubeCL configuration
//! kept for them (`cache`); how work on one is timed (`timing`); host memory registered with a
//! device (`register`), the schedule that overlaps copies with compute (`transfer`), and the
//! link's measured speed with the cost model that uses it (`link`).

pub mod backend;
pub mod cache;
pub mod gpu;
pub mod link;
pub mod register;
pub mod timing;
pub mod transfer;
