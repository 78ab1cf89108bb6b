//! Where and how a product runs, decided in one place for every front end (the Rust front
//! door, the CLI, Python, the drop-in BLAS):
//! - [`Settings`]: what the environment asks (`TILEMM_DEVICE`, `TILEMM_TUNE_BUDGET`), read
//!   once; front ends override fields, never read the environment again;
//! - [`DeviceSpec`]: a device as every front end names it (`cuda:1`, `hip`, `wgpu:0`, `cpu`);
//! - [`sessions`]: one GPU session per device for the process, shared by all front ends;
//! - [`route`] and [`model`]: whether a product goes to the GPU, its transfers included, or
//!   stays home: measured where the BLAS has measured the size, else the link's cost model;
//! - [`choose`]: which kernel runs, without waiting on a search unless one is asked for.

pub mod choose;
pub mod model;
pub mod route;
pub mod sessions;
mod settings;

pub use settings::{DeviceSpec, Settings, Unusable, DEVICE_VARIABLE, TUNE_BUDGET_VARIABLE};
