//! JIT compilation is measured on its own (its own test binary: a process whose kernel cache
//! no other test has filled, with the kernels of earlier processes left out).

mod common;

use tilemm::{GpuSession, Kernel, Plan, Problem};

#[test]
fn compiling_is_measured_once_and_later_launches_reuse_the_kernel() {
    // Compiled, not loaded from an earlier process's kernels (the only test of this binary,
    // so no device is open yet).
    std::env::set_var("TILEMM_KERNEL_CACHE", "off");
    let gpu = GpuSession::open(common::backend(), None).unwrap_or_else(|e| {
        panic!(
            "this test compiles a kernel on a {} device and found none: {e}",
            common::backend()
        )
    });
    let plan = Plan::default_for(Kernel::Tiled);
    let problem = Problem::new(64, 64, 64).unwrap();
    let compile = gpu.compile(&plan, &problem).unwrap();
    // The second time, the kernel is cached: what remains is one tiny launch. Code generation
    // alone takes longer than that, so a "compile" time no longer than a cached launch would
    // mean compilation happened elsewhere, unmeasured.
    let cached = (0..3)
        .map(|_| gpu.compile(&plan, &problem).unwrap())
        .min()
        .unwrap();
    assert!(
        cached < compile,
        "first launch {compile:?}, cached launches at least {cached:?}"
    );
}
