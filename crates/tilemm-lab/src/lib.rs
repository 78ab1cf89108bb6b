//! tilemm's lab: what measures and inspects tilemm rather than computes with it. The
//! example's experiment and its report ([`measure::run`], [`measure::report`]), the one
//! benchmark runner and its sweep ([`measure::bench`], [`measure::sweep`]) with the peers it
//! measures against (cubek-matmul, cuBLAS, rocBLAS), operand and output files ([`inputs`]),
//! and, with the `tools` feature, the generated code and its compile check ([`tools`]).
//!
//! The CLI and Python's `tilemm.run` use it; the library's product path (the front door, the
//! drop-in BLAS, Python's `tilemm.matmul`) does not link it.

#![warn(missing_docs)]

mod error;
pub mod inputs;
pub mod measure;
#[cfg(feature = "tools")]
pub mod tools;

pub use error::{Error, Result};
