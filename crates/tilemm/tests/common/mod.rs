//! What the device test files share: the device, and the registry's configurations.

#![allow(dead_code)]

use std::sync::OnceLock;

use tilemm::{Backend, GpuSession, Kernel, Plan, Precision, Problem};

/// The wgpu device the tests run on (lavapipe on machines without a GPU), opened once.
pub fn gpu() -> &'static GpuSession {
    static GPU: OnceLock<GpuSession> = OnceLock::new();
    GPU.get_or_init(|| {
        GpuSession::open(Backend::Wgpu, None).unwrap_or_else(|e| {
            panic!("these tests run the kernels on a wgpu device and found none: {e}")
        })
    })
}

/// Every configuration of every rung that computes f32: the registry decides what the tests
/// cover. (The matrix-unit rung takes f16 and bf16 inputs only; `tests/tensorcore.rs` runs it.)
pub fn every_plan() -> Vec<Plan> {
    Kernel::ALL
        .iter()
        .flat_map(|k| k.configs())
        .filter(|c| c.computes(Precision::F32))
        .map(Plan::new)
        .collect()
}

/// Whether `plan` runs `problem` on the test device: it computes the precision and the device
/// has what the kernel is built on (matrix units, their plane width).
pub fn runs(plan: &Plan, problem: &Problem) -> bool {
    plan.config.computes(problem.precision) && plan.config.supports(problem, gpu().info()).is_ok()
}

/// Every rung in its default configuration and in the last one it lists (its largest tile):
/// the tests that run many problems per plan use these, so that their time grows with the
/// rungs rather than with every configuration.
pub fn rung_plans() -> Vec<Plan> {
    let mut plans = Vec::new();
    for kernel in Kernel::ALL
        .iter()
        .filter(|k| k.default_config().computes(Precision::F32))
    {
        let default = kernel.default_config();
        plans.push(Plan::new(default));
        if let Some(last) = kernel.configs().last().filter(|c| **c != default) {
            plans.push(Plan::new(*last));
        }
    }
    plans
}
