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

/// Every rung in its default configuration and in the last one it lists (its largest tile):
/// the tests that run many problems per plan use these, so that their time grows with the
/// rungs rather than with every configuration.
pub fn rung_plans() -> Vec<Plan> {
    let mut plans = Vec::new();
    for kernel in Kernel::ALL {
        let default = kernel.default_config();
        plans.push(Plan::new(default));
        if let Some(last) = kernel.configs().last().filter(|c| **c != default) {
            plans.push(Plan::new(*last));
        }
    }
    plans
}
