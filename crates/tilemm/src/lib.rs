//! tilemm: fast matrix multiplication on the GPUs of every vendor.
//!
//! Kernels are written once in Rust with [CubeCL](https://github.com/tracel-ai/cubecl) and
//! JIT-compiled for wgpu (Vulkan, Metal, DX12), CUDA or HIP. A [`Problem`] (shapes, layouts, dtype)
//! is decided once; a [`Plan`] says which kernel runs and how; [`GpuSession::matmul`] runs it;
//! [`verify::Reference`] checks any result against a CPU reference under an error bound that
//! grows with K; [`run::Runner`] is the whole experiment of numba's matmul example, with a
//! [`report::Report`] of where the time went.
//!
//! ```
//! use tilemm::{inputs, GpuSession, Backend, Kernel, Plan, Problem};
//! use tilemm::verify::Reference;
//!
//! let problem = Problem::new(100, 77, 51)?;
//! let (a, b) = inputs::random_operands(&problem, 0)?;
//! let gpu = GpuSession::open(Backend::Wgpu, None)?;
//! let run = gpu.matmul(&problem, &Plan::new(Kernel::Tiled, 16)?, &a, &b)?;
//! let check = Reference::new(&problem, &a, &b)?.check(&run.c)?;
//! assert!(check.pass);
//! # Ok::<(), tilemm::Error>(())
//! ```

#![warn(missing_docs)]

pub mod backend;
pub mod bench;
pub mod compile_check;
pub mod cpu;
pub mod device;
pub mod emit;
mod error;
pub mod gpu;
pub mod host;
pub mod inputs;
mod kernels;
pub mod plan;
pub mod problem;
pub mod report;
pub mod run;
pub mod vendor_blas;
pub mod verify;

pub use backend::{Backend, GpuSession};
pub use device::{DeviceInfo, DeviceKind, DeviceLimits};
pub use error::{one_line, Error, Result};
pub use plan::{Kernel, Plan};
pub use problem::{DType, Layout, Problem};
