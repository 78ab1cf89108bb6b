//! tilemm: fast matrix multiplication on the GPUs of every vendor.
//!
//! The front door is [`matmul`] (and [`Gemm`] for α, β, a named device or kernel, writing into
//! a view, batches), over ndarray views of f16, bf16, f32 or f64:
//!
//! ```
//! let a = ndarray::Array2::from_shape_fn((64, 48), |(i, j)| (i + j) as f32);
//! let b = ndarray::Array2::from_shape_fn((48, 30), |(i, j)| (i * j % 5) as f32);
//! let c = tilemm::matmul(a.view(), b.view())?;
//! assert_eq!(c, a.dot(&b));
//! # Ok::<(), tilemm::Error>(())
//! ```
//!
//! Kernels are written once in Rust with [CubeCL](https://github.com/tracel-ai/cubecl) and
//! JIT-compiled for wgpu (Vulkan, Metal, DX12), CUDA or HIP. Below the front door: a
//! [`Problem`] (shapes, layouts, dtype) is decided once; a [`Plan`] says which rung of the
//! [`ladder`] runs and how; [`GpuSession::gemm`] runs it; [`verify::Reference`] checks any
//! result against a CPU reference under an error bound that grows with K; [`run::Runner`] is
//! the whole experiment of numba's matmul example, with a [`report::Report`] of where the time
//! went.
//!
//! ```
//! use tilemm::{inputs, GpuSession, Backend, Kernel, Plan, Shape};
//! use tilemm::verify::Reference;
//!
//! // C = 0.5·Aᵀ·B + 2·C for a batch of 3, A stored transposed.
//! let problem = Shape { batch: 3, trans_a: true, alpha: 0.5, beta: 2.0, ..Shape::new(100, 77, 51) }
//!     .problem()?;
//! let ops = inputs::random_operands(&problem, 0)?;
//! let gpu = GpuSession::open(Backend::Wgpu, None)?;
//! let plan = Plan::default_for(Kernel::Tiled);
//! let run = gpu.gemm(&problem, &plan, &ops.a, &ops.b, ops.c0.as_ref())?;
//! let check = Reference::new(&problem, &ops.a, &ops.b, ops.c0.as_ref())?.check(&run.c)?;
//! assert!(check.pass);
//! # Ok::<(), tilemm::Error>(())
//! ```

#![warn(missing_docs)]

pub mod array;
pub mod backend;
pub mod bench;
pub mod cache;
pub mod compile_check;
pub mod cpu;
pub mod device;
pub mod element;
pub mod emit;
mod error;
mod files;
pub mod gpu;
pub mod host;
pub mod inputs;
pub mod ladder;
pub mod panels;
pub mod peak;
pub mod peers;
pub mod plan;
pub mod problem;
pub mod report;
pub mod run;
pub mod tune;
pub mod types;
pub mod vendor_blas;
pub mod verify;

pub use array::{matmul, Gemm, GemmRun, Route};
pub use backend::{Backend, GpuSession};
pub use device::{DeviceInfo, DeviceKind, DeviceLimits, MatrixUnit};
pub use element::{Element, HostData};
pub use error::{one_line, panic_message, Error, Result, Unavailable};
pub use ladder::{Config, Kernel};
pub use plan::Plan;
pub use problem::{DType, Layout, MatrixDesc, Precision, Problem, Shape};
pub use tune::KernelChoice;
