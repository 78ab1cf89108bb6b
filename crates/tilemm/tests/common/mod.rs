//! What the device test files share: the device, and the registry's configurations.

#![allow(dead_code)]

use std::sync::OnceLock;

use tilemm::{Backend, GpuSession, Kernel, Plan};

/// The wgpu device the tests run on (lavapipe on machines without a GPU), opened once.
pub fn gpu() -> &'static GpuSession {
    static GPU: OnceLock<GpuSession> = OnceLock::new();
    GPU.get_or_init(|| {
        GpuSession::open(Backend::Wgpu, None).unwrap_or_else(|e| {
            panic!("these tests run the kernels on a wgpu device and found none: {e}")
        })
    })
}

/// Every configuration of every rung: the registry decides what the tests cover.
pub fn every_plan() -> Vec<Plan> {
    Kernel::ALL
        .iter()
        .flat_map(|k| k.configs())
        .map(Plan::new)
        .collect()
}
