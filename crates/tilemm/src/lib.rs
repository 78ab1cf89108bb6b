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
//! [`kernels`] runs and how; [`GpuSession::gemm`] runs it; [`verify::Reference`] checks any
//! result against a CPU reference under an error bound that grows with K; [`dispatch`] decides
//! once, for every front end, where a product runs and with which kernel. The example's
//! experiment, the benchmarks and the generated-code tools live in the `tilemm-lab` crate.
//!
//! ```
//! use tilemm::io::inputs;
//! use tilemm::{GpuSession, Backend, Kernel, Plan, Shape};
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
pub mod complex;
pub mod device;
pub mod device_array;
pub mod dispatch;
mod error;
pub mod host;
pub mod io;
pub mod kernels;
pub mod level3;
pub mod plan;
pub mod problem;
pub mod runtime;
pub mod tune;
pub mod types;
pub mod verify;

pub use array::{matmul, register, Gemm, GemmRun, Moved, Route};
pub use complex::{Complex, ComplexGemm};
pub use device::{DeviceInfo, DeviceKind, DeviceLimits, MatrixUnit};
pub use device_array::DeviceArray;
pub use dispatch::{DeviceSpec, Settings};
pub use error::{one_line, panic_message, Error, ErrorKind, Result, Unavailable};
pub use kernels::{Config, Kernel};
pub use plan::Plan;
pub use problem::{DType, Layout, MatrixDesc, Precision, Problem, Shape};
pub use runtime::backend::{Backend, GpuSession};
pub use runtime::register::Registration;
pub use tune::KernelChoice;
pub use types::element::{Element, HostData, HostSlice};
