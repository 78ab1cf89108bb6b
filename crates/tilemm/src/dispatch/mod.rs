//! Where and how a product runs, decided in one place for every front end (the Rust front
//! door, the CLI, Python, the drop-in BLAS):
//! - [`Settings`]: what the environment asks (`TILEMM_DEVICE`, `TILEMM_TUNE_BUDGET`, the
//!   BLAS's `TILEMM_BLAS` and `TILEMM_BLAS_LOG`), read
//!   once; front ends override fields, never read the environment again;
//! - [`DeviceSpec`]: a device as every front end names it (`cuda:1`, `hip`, `wgpu:0`, `cpu`);
//! - [`sessions`]: one GPU session per device for the process, shared by all front ends;
//! - [`route`] and [`model`]: whether a product goes to the GPU, its transfers included, or
//!   stays home: measured where the BLAS has measured the size, else the link's cost model;
//! - [`router`]: a front end's routes (the BLAS's) chosen per size class by timing them;
//! - [`memo`]: the process's decisions by key, the first one final;
//! - [`choose`]: which kernel runs, without waiting on a search unless one is asked for.

pub mod choose;
pub mod memo;
pub mod model;
pub mod route;
pub mod router;
pub mod sessions;
mod settings;

pub use settings::{
    BlasRoute, DeviceSpec, Settings, Unusable, BLAS_LOG_VARIABLE, BLAS_ROUTE_VARIABLE,
    DEVICE_VARIABLE, TUNE_BUDGET_VARIABLE,
};
