//! What the device test files share: the device, and the registry's configurations.

#![allow(dead_code)]

use std::sync::OnceLock;

use tilemm::{Backend, GpuSession, Kernel, MatrixDesc, Plan, Precision, Problem};

/// The backend the tests run on: wgpu (lavapipe on machines without a GPU), unless
/// `TILEMM_TEST_BACKEND` names another (`cuda`, `hip`) in a build with that feature.
pub fn backend() -> Backend {
    match std::env::var("TILEMM_TEST_BACKEND") {
        Ok(name) => name
            .parse()
            .unwrap_or_else(|e| panic!("TILEMM_TEST_BACKEND={name}: {e}")),
        Err(_) => Backend::Wgpu,
    }
}

/// The device the tests run on ([`backend`]'s first), opened once.
pub fn gpu() -> &'static GpuSession {
    static GPU: OnceLock<GpuSession> = OnceLock::new();
    GPU.get_or_init(|| {
        GpuSession::open(backend(), None).unwrap_or_else(|e| {
            panic!(
                "these tests run the kernels on a {} device and found none: {e}",
                backend()
            )
        })
    })
}

/// The test device opened again with bindings of `bytes`, so that products beyond them run
/// in panels.
pub fn with_bindings(bytes: u64) -> GpuSession {
    let limits = tilemm::DeviceLimits {
        max_binding_bytes: bytes,
        ..gpu().info().limits
    };
    GpuSession::open(backend(), None).unwrap().limit(limits)
}

/// Every configuration of every rung that computes f32, whether the test device runs it or
/// not: the registry decides what the tests cover. (The matrix-unit rung takes f16 and bf16
/// inputs only; `tests/tensorcore.rs` runs it.)
pub fn f32_plans() -> Vec<Plan> {
    Kernel::ALL
        .iter()
        .flat_map(|k| k.configs())
        .filter(|c| c.computes(Precision::F32))
        .map(Plan::new)
        .collect()
}

/// The [`f32_plans`] the test device runs: all but those laid out for another plane width
/// than its own, which `tests/kernels.rs` checks are refused as such (and that every rung
/// keeps at least one configuration here).
pub fn every_plan() -> Vec<Plan> {
    let probe = Problem::new(1, 1, 1).unwrap();
    f32_plans()
        .into_iter()
        .filter(|plan| runs(plan, &probe))
        .collect()
}

/// Whether `plan` runs `problem` on the test device (the one runnability check): it computes
/// the precision, the device has what the kernel is built on (matrix units, its plane width),
/// and its block fits, shared memory included (f64 doubles it: the warp-tiled rung's 64 KiB
/// exceed CUDA's 48).
pub fn runs(plan: &Plan, problem: &Problem) -> bool {
    tilemm::plan::check::runnable(&plan.config, problem, gpu().info()).is_ok()
}

/// Every rung in its default configuration and in the last one it lists that the device runs
/// (its largest tile): the tests that run many problems per plan use these, so that their
/// time grows with the rungs rather than with every configuration.
pub fn rung_plans() -> Vec<Plan> {
    let runnable = every_plan();
    let mut plans = Vec::new();
    for kernel in Kernel::ALL {
        let mut mine = runnable.iter().filter(|p| p.kernel() == *kernel);
        let default = kernel.default_config();
        if let Some(first) = mine.clone().find(|p| p.config == default).or(mine.next()) {
            plans.push(*first);
            if let Some(last) = runnable
                .iter()
                .rev()
                .find(|p| p.kernel() == *kernel && *p != first)
            {
                plans.push(*last);
            }
        }
    }
    plans
}

/// A 37×29×23 product over padded, offset views with a column-major C (computed as
/// Cᵀ = BᵀAᵀ) in `precision`: A row-major with 3 elements of padding per row and offset 5, B
/// column-major with 1 of padding, C with 2 of padding and offset 1.
pub fn padded_views(precision: Precision) -> Problem {
    let (m, k, n) = (37, 29, 23);
    let mut a = MatrixDesc::row_major(m, k);
    a.row_stride = k + 3;
    a.offset = 5;
    let mut b = MatrixDesc::col_major(k, n);
    b.col_stride = k + 1;
    let mut c = MatrixDesc::col_major(m, n);
    c.col_stride = m + 2;
    c.offset = 1;
    Problem::general((m, k, n, 1), a, b, c, (1.0, 0.0), precision).unwrap()
}

/// Padded views that stay 16-byte aligned (offsets and strides multiples of 8 elements), with
/// M, N and K not multiples of a 16-byte chunk: the rungs that copy aligned operands in
/// 16-byte pieces copy the last piece of each row in part. `k_contiguous`: A row-major and B
/// column-major (the chunks run along K, the last one partly past K); else A column-major
/// and B row-major (they run along M and N).
pub fn aligned_padded_views(precision: Precision, k_contiguous: bool) -> Problem {
    let (m, k, n) = (37, 29, 23);
    let (a, b) = if k_contiguous {
        let mut a = MatrixDesc::row_major(m, k);
        a.row_stride = 32;
        a.offset = 8;
        let mut b = MatrixDesc::col_major(k, n);
        b.col_stride = 32;
        (a, b)
    } else {
        let mut a = MatrixDesc::col_major(m, k);
        a.col_stride = 40;
        let mut b = MatrixDesc::row_major(k, n);
        b.row_stride = 24;
        b.offset = 16;
        (a, b)
    };
    let c = MatrixDesc::row_major(m, n);
    Problem::general((m, k, n, 1), a, b, c, (1.0, 0.0), precision).unwrap()
}

/// `plans` of `kernel` only. Where there are none (the rung computes no f32, or the device
/// runs none of its configurations) the test says so: `tests/kernels.rs` checks the
/// refusals, `tests/tensorcore.rs` and `tests/mma.rs` the matrix-unit rungs.
pub fn of_rung(kernel: Kernel, plans: Vec<Plan>) -> Vec<Plan> {
    let mine: Vec<Plan> = plans.into_iter().filter(|p| p.kernel() == kernel).collect();
    if mine.is_empty() {
        println!("branch taken: {kernel} has no f32 configuration this device runs");
    }
    mine
}

/// One test per rung, `$module::<rung>`, each calling `$check` (a function or closure of the
/// rung, from the caller's module) with `Kernel::<Rung>`, with the
/// attributes given (`#[ignore = …]`) on each. A check over every rung in one test ran them one
/// after another on one core; as tests of their own, cargo-nextest (scripts/test) runs them
/// side by side. `$module::every_rung_has_a_test` fails where the registry gains a rung that
/// this list lacks.
#[macro_export]
macro_rules! per_rung {
    ($(#[$attr:meta])* $module:ident, $check:expr) => {
        $crate::per_rung!(@module [$(#[$attr])*] $module, $check;
            naive Naive, tiled Tiled, blocktile1d Blocktile1d, blocktile2d Blocktile2d,
            vectorized Vectorized, warptile Warptile, pipelined Pipelined, register Register,
            broadcast Broadcast, tensorcore Tensorcore, mma Mma);
    };
    (@module $attrs:tt $module:ident, $check:expr; $($name:ident $variant:ident),*) => {
        mod $module {
            use tilemm::Kernel;
            $($crate::per_rung!(@test $attrs $name, $variant, $check);)*
            #[test]
            fn every_rung_has_a_test() {
                assert_eq!(Kernel::ALL, &[$(Kernel::$variant),*]);
            }
        }
    };
    (@test [$($attr:tt)*] $name:ident, $variant:ident, $check:expr) => {
        #[test]
        $($attr)*
        fn $name() {
            use super::*;
            ($check)(Kernel::$variant)
        }
    };
}
